package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/ompsync/ompsync/repo"
)

// FileStatus is how far the backup of one watched file is behind.
type FileStatus struct {
	Path      string `json:"path"`
	SessionID string `json:"session_id"`
	Stream    string `json:"stream"`
	State     string `json:"state"`
	LocalSize int64  `json:"local_size"`
	Uploaded  int64  `json:"uploaded"`
	// Pending is LocalSize - Uploaded when positive (it may include a
	// partial last line that is not uploadable yet).
	Pending int64 `json:"pending"`
	// LastSynced is when every settled byte was last on the remote.
	LastSynced time.Time `json:"last_synced"`
	// PendingAge is how long the oldest pending byte may have waited.
	PendingAge time.Duration `json:"pending_age_ns"`
}

// Status reads the agent's state (without taking its lock: it works while
// an agent runs) and compares it with the files on disk.
func Status(agentDir, stateDir string, now time.Time) ([]FileStatus, error) {
	st, err := LoadState(stateDir)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("no agent state in %s: has the agent run with this state_dir?", stateDir)
	}
	var out []FileStatus
	for _, f := range st.Streams {
		if f.State != repo.StatePresent || f.Unseen {
			continue // an unseen session is not on this machine
		}
		fs := FileStatus{Path: f.Path, SessionID: f.SessionID, Stream: f.Stream, State: f.State, Uploaded: f.Offset, LastSynced: f.SyncedAt}
		fi, err := os.Stat(filepath.Join(agentDir, filepath.FromSlash(f.Path)))
		if err == nil {
			fs.LocalSize = fi.Size()
		}
		if d := fs.LocalSize - fs.Uploaded; d > 0 {
			fs.Pending = d
			if !f.SyncedAt.IsZero() {
				fs.PendingAge = now.Sub(f.SyncedAt)
			}
		}
		out = append(out, fs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Origin is the remote a state describes: Remote as the agent was told it
// (for messages), RepoID the repository's id. Both are empty for a state
// written before ompsync recorded them.
type Origin struct {
	Remote string `json:"remote,omitempty"`
	RepoID string `json:"repo_id,omitempty"`
}

// StateOrigin reads which remote the state in stateDir describes.
func StateOrigin(stateDir string) (Origin, error) {
	st, err := LoadState(stateDir)
	if err != nil {
		return Origin{}, err
	}
	if st == nil {
		return Origin{}, fmt.Errorf("no agent state in %s: has the agent run with this state_dir?", stateDir)
	}
	return Origin{Remote: st.Remote, RepoID: st.RepoID}, nil
}
