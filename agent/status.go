package agent

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ompsync/ompsync/atomicfile"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
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
	// UnfinishedLine: what is pending of a session file is its last line,
	// without its newline yet. The agent uploads whole lines, so it waits
	// for the writer to finish it; one that stays means the writer stopped
	// mid-line.
	UnfinishedLine bool `json:"unfinished_line"`
}

// maxLineCheck bounds the pending bytes Status reads to tell an
// unfinished last line (FileStatus.UnfinishedLine).
const maxLineCheck = 1 << 20

// StatusOptions say what Status compares.
type StatusOptions struct {
	AgentDir, StateDir string
	Store              *store.Store // default omp
	Include, Exclude   []string     // as the agent's
	Now                time.Time
}

// Status reads the agent's state (without taking its lock: it works while
// an agent runs) and compares it with the files on disk. A file the state
// does not list yet (the agent's first pass is under way, or it has not
// seen the file) is pending whole, since its last change: the later of its
// mtime and ctime, so a file restored with its old mtime has waited only
// since the restore.
func Status(o StatusOptions) ([]FileStatus, error) {
	o.Store = cmp.Or(o.Store, store.OMP())
	if err := checkLayout(o.AgentDir, o.Store); err != nil {
		return nil, err
	}
	st, err := StateOrigin(o.StateDir)
	if err != nil {
		return nil, err
	}
	upToDate := readUpToDate(o.StateDir)
	var out []FileStatus
	listed := map[string]bool{}
	for _, f := range st.Streams {
		if f.State != repo.StatePresent || f.Unseen {
			continue // an unseen session is not on this machine
		}
		listed[f.Path] = true
		fs := FileStatus{Path: f.Path, SessionID: f.SessionID, Stream: f.Stream, State: f.State, Uploaded: f.Offset, LastSynced: f.SyncedAt}
		fi, err := os.Stat(filepath.Join(o.AgentDir, filepath.FromSlash(f.Path)))
		switch {
		case err == nil:
			fs.LocalSize = fi.Size()
		case !isNotExist(err):
			// Not "nothing pending": what the file holds is not known.
			return nil, fmt.Errorf("%w; status cannot tell what of %s is pending", err, f.Path)
		}
		if d := fs.LocalSize - fs.Uploaded; d > 0 {
			fs.Pending = d
			if since := f.pendingSince(upToDate); !since.IsZero() {
				fs.PendingAge = o.Now.Sub(since)
			}
			if strings.HasSuffix(f.Path, ".jsonl") && d <= maxLineCheck {
				fs.UnfinishedLine = noNewline(filepath.Join(o.AgentDir, filepath.FromSlash(f.Path)), f.Offset, d)
			}
		}
		out = append(out, fs)
	}
	// The agent's own scan, so that status covers what the agent backs up.
	a := &Agent{opts: Options{AgentDir: o.AgentDir, Store: o.Store, Include: o.Include, Exclude: o.Exclude, Now: func() time.Time { return o.Now }}, log: slog.New(slog.DiscardHandler)}
	sc, err := a.scan()
	if err != nil {
		return nil, err
	}
	// A folder that cannot be read, or a sessions folder gone with
	// sessions known (a wrong agent_dir, a disk not mounted), leaves files
	// unseen: status says so, as the agent does, rather than "nothing
	// pending".
	if err := a.problems.err(); err != nil {
		return nil, fmt.Errorf("%w; status cannot tell what is pending there", err)
	}
	if sc.sessionsGone && len(listed) > 0 {
		top := o.Store.Roots()[0]
		return nil, fmt.Errorf("%s %s has no %s/ folder, though the agent backed up files from it: is %s right, or its disk not mounted?",
			dirKey(o.Store), o.AgentDir, top, dirKey(o.Store))
	}
	for _, rel := range sc.rels {
		kind := o.Store.Classify(rel)
		if listed[rel] || kind == store.KindArchive || kind == store.KindBlob && st.Blobs[path.Base(rel)] {
			continue
		}
		fi, err := os.Stat(filepath.Join(o.AgentDir, filepath.FromSlash(rel)))
		if err != nil || fi.Size() == 0 {
			continue
		}
		id, _ := o.Store.IDFromName(rel)
		out = append(out, FileStatus{Path: rel, SessionID: id, State: StateNew, LocalSize: fi.Size(), Pending: fi.Size(), PendingAge: max(o.Now.Sub(changedAt(fi)), 0)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// StateNew is the State of a file the agent has not recorded yet.
const StateNew = "new"

// pendingSince is when the oldest byte not on the remote may have been
// written: when every settled byte was last uploaded, or, for a stream
// nothing of which was ever uploaded, when the agent first saw it. A file
// whose every byte was up at its last look (its size then the uploaded
// offset: no partial last line left behind) changed after that look, so
// after the agent was last up to date (upToDate) too: an idle session
// written to a day after its upload has waited since then, not for a day.
func (f *FileState) pendingSince(upToDate time.Time) time.Time {
	if f.SyncedAt.IsZero() && f.Offset == 0 {
		return f.Changed
	}
	if f.Size == f.Offset && upToDate.After(f.SyncedAt) {
		return upToDate
	}
	return f.SyncedAt
}

// noNewline reports whether the n bytes of the file at p from off hold no
// newline (all of them read: a file that shrank since is not).
func noNewline(p string, off, n int64) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		return false
	}
	return bytes.IndexByte(b, '\n') < 0
}

// upToDateName is a file in the state dir whose mtime is when the agent was
// last up to date: the start of its last pass that left nothing to do,
// less upToDateSlack: every settled byte written before then is on the
// remote.
const upToDateName = "uptodate"

// upToDateSlack covers a write whose change event had not reached the
// agent when a pass began.
const upToDateSlack = time.Second

// markUpToDate records that every file was up to date at the start of the
// pass that began at passStart and ended without error, when it was: no
// path waits for a pass, none could not be read, and the pass looked at
// every file (full) or every folder is watched, so that no event was
// missed. Its mtime is all it holds: one syscall a pass, no fsync (a crash
// that loses it leaves an older time, which only makes status count
// pending bytes from earlier).
func (a *Agent) markUpToDate(passStart time.Time, full bool) {
	if a.hasWork() || a.problems.count() > 0 || !full && a.watchGaps.Load() && !a.gapsPolled {
		return
	}
	at := passStart.Add(-upToDateSlack)
	a.upToDate = at
	p := filepath.Join(a.opts.StateDir, upToDateName)
	// A mark that cannot be written leaves an older one: status then
	// counts from earlier, never from later than it should.
	if err := os.Chtimes(p, at, at); errors.Is(err, fs.ErrNotExist) && os.WriteFile(p, nil, 0o600) == nil {
		_ = os.Chtimes(p, at, at)
	}
}

// Notes in the state dir hold, while it lasts, a problem the agent met that
// status names, since it reads no log.
const (
	refusedName  = "refused"  // the repository refuses this machine's uploads
	unpulledName = "unpulled" // other machines' sessions are not pulled
)

// writeNote records msg in the note at path, whole or not at all (a
// status reading it meanwhile), or removes it ("": none). A note that
// cannot be written leaves status without the cause; the log has it.
func writeNote(path, msg string) {
	if msg == "" {
		_ = os.Remove(path)
		return
	}
	_ = atomicfile.Write(path, []byte(msg+"\n"), atomicfile.Options{Perm: 0o600})
}

func readNote(stateDir, name string) string {
	b, _ := os.ReadFile(filepath.Join(stateDir, name))
	return strings.TrimSpace(string(b))
}

// Refused is the refusal of this machine's uploads that the agent whose
// state is in stateDir last met, or "".
func Refused(stateDir string) string { return readNote(stateDir, refusedName) }

// Unpulled is why that agent's last pull left machines' sessions out, or "".
func Unpulled(stateDir string) string { return readNote(stateDir, unpulledName) }

// readUpToDate is when the agent whose state is in stateDir was last up to
// date; zero if it never recorded it.
func readUpToDate(stateDir string) time.Time {
	fi, err := os.Stat(filepath.Join(stateDir, upToDateName))
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// Running reports whether an agent holds stateDir: the process its lock
// file names is alive. (Taking the lock to find out could make an agent
// starting at that moment refuse to.)
func Running(stateDir string) bool {
	b, err := os.ReadFile(filepath.Join(stateDir, "lock"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	return processAlive(pid)
}

// StateOrigin loads the state in stateDir for a command that reads it
// beside the agent (status, and the remote it describes: its Remote as the
// agent was told it, for messages, and its RepoID, the repository's id;
// both are empty for a state written before ompsync recorded them). An
// agent that is starting has recorded nothing yet (not even the remote it
// checks).
func StateOrigin(stateDir string) (*State, error) {
	st, err := LoadState(stateDir)
	if err == nil && st == nil {
		if !Running(stateDir) {
			if r := Refused(stateDir); r != "" {
				return nil, fmt.Errorf("no agent state in %s: the agent ran, but the repository refused it: %s", stateDir, r)
			}
			return nil, fmt.Errorf("no agent state in %s: has the agent run with this state_dir?", stateDir)
		}
		st = newState("")
	}
	return st, err
}
