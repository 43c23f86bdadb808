package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ompsync/ompsync/atomicfile"
	"github.com/ompsync/ompsync/safename"
)

// maxSessionDepth is how deep below a store's first root session files
// may lie (codex: sessions/YYYY/MM/DD/<file>); ScanLocal looks no deeper.
const maxSessionDepth = 4

// Local is which session files an agent dir holds, by session id. Reading
// it costs the first bytes of every session file, so a restore or a pull
// of many sessions reads it once and looks each session up in it. It is
// safe for concurrent use.
type Local struct {
	mu   sync.Mutex
	byID map[string][]string // each sorted
	// temps are ompsync's own hidden temp files in the session folders
	// (atomicfile.IsTemp), for a restore to sweep those a killed one left.
	temps []string
	// premerges are the local files a merge kept (PreMergeTime).
	premerges []string
}

// preMerge marks the hidden copy a merge keeps of the local file it
// replaced: .<name>.pre-merge-<UTC time>.
const preMerge = ".pre-merge-"

// PreMergeName is the hidden name the local file a merge replaced at t
// is kept under, beside the session file rel.
func PreMergeName(rel string, t time.Time) string {
	dir, base := path.Split(rel)
	return dir + "." + base + preMerge + t.UTC().Format("20060102T150405Z")
}

// PreMergeTime is when the merge that kept the file named name happened;
// ok is false for any other name.
func PreMergeTime(name string) (time.Time, bool) {
	i := strings.LastIndex(name, preMerge)
	if !strings.HasPrefix(name, ".") || i < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse("20060102T150405Z", name[i+len(preMerge):])
	return t, err == nil
}

// ScanLocal lists the session files under the store's first root (omp's
// sessions/*/*.jsonl) by session id: from the file's first bytes, or its
// name. A missing agent dir is an empty index.
func ScanLocal(st *Store, agentDir string) (*Local, error) {
	l := &Local{byID: map[string][]string{}}
	root := st.Roots()[0]
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		files, err := os.ReadDir(absPath(agentDir, dir))
		if errors.Is(err, fs.ErrNotExist) && dir == root {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read local sessions: %w", err)
		}
		for _, f := range files {
			rel := dir + "/" + f.Name()
			switch {
			case strings.HasPrefix(f.Name(), "."):
				if f.Type().IsRegular() && atomicfile.IsTemp(f.Name()) {
					l.temps = append(l.temps, rel)
				}
				if _, ok := PreMergeTime(f.Name()); ok && f.Type().IsRegular() {
					l.premerges = append(l.premerges, rel)
				}
			case f.IsDir():
				// A folder whose files are artifacts holds no sessions.
				if depth < maxSessionDepth && st.Classify(rel+"/x") != KindArtifact {
					if err := walk(rel, depth+1); err != nil {
						return err
					}
				}
			case f.Type().IsRegular() && st.Classify(rel) == KindSession:
				if id := st.SessionID(rel, ReadHead(absPath(agentDir, rel))); safename.SessionID(id) {
					l.byID[id] = append(l.byID[id], rel)
				}
			}
		}
		return nil
	}
	if err := walk(root, 1); err != nil {
		return nil, err
	}
	for _, rels := range l.byID {
		sort.Strings(rels)
	}
	return l, nil
}

// Temps lists ompsync's temp files the scan saw in the session folders,
// slash-separated and relative to the agent dir. (Only ScanLocal writes
// them, before any reader has the Local.)
func (l *Local) Temps() []string { return slices.Clone(l.temps) }

// PreMerges lists the files merges kept beside the sessions they
// replaced, slash-separated and relative to the agent dir.
func (l *Local) PreMerges() []string { return slices.Clone(l.premerges) }

// Find returns the local file of a session, or "".
func (l *Local) Find(id string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rels := l.byID[id]; len(rels) > 0 {
		return rels[0]
	}
	return ""
}

// Add records a session file written since the scan.
func (l *Local) Add(id, rel string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i, found := slices.BinarySearch(l.byID[id], rel); !found {
		l.byID[id] = slices.Insert(l.byID[id], i, rel)
	}
}

func absPath(agentDir, rel string) string {
	return filepath.Join(agentDir, filepath.FromSlash(rel))
}

// ReadHead reads the first 8 KiB of a file (nil when it cannot be read).
func ReadHead(p string) []byte {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, 8<<10)
	n, _ := io.ReadFull(f, b)
	return b[:n]
}
