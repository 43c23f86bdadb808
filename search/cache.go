package search

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/safename"
)

// Cache keeps the records of session copies under a folder of the state
// dir, one copy (a session on one machine) per pair of files:
// <session>/<machine>.json (<machine>@<generation>.json for an older
// generation), what was indexed (the generation, how many of
// its bytes, the running stream hash there), and <machine>.txt, the
// records, to which a grown session's new records are appended. It is
// bounded: Evict removes the copies used longest ago until the records fit
// in the bound it was opened with. The records are the sessions' text: the folder is 0700 and
// its files 0600, as the state dir's. A nil *Cache is no cache: each method
// keeps nothing, finds nothing and fails nothing.
type Cache struct {
	dir  string
	max  int64
	lock *os.File
	// now is the clock (tests).
	now func() time.Time
}

// CopyState is what the cache holds of one copy.
type CopyState struct {
	Session    string `json:"session"`
	Machine    string `json:"machine"`
	Generation string `json:"generation"`
	// Offset is how many bytes of the generation are indexed, HashFrom
	// and HashState the generation's running stream hash there (see
	// repo.StreamGenerationFrom).
	Offset    int64  `json:"offset"`
	HashFrom  int64  `json:"hash_from"`
	HashState []byte `json:"hash_state,omitempty"`
	// Records is the length of the valid records (a run cut off between
	// appending records and saving this leaves more in the file).
	Records int64 `json:"records"`
	// Version is the records' version (recordsVersion).
	Version int `json:"version,omitempty"`
	// LeftOut are the lines of the copy too long to index.
	LeftOut []LeftLine `json:"left_out,omitempty"`
	// Listed is when a search last listed the session's objects, and
	// Older the machine's older generations it found (each kept as an
	// OlderCopy).
	Listed time.Time `json:"listed,omitzero"`
	Older  []string  `json:"older,omitempty"`
}

// recordsVersion changes when the same session bytes index into other
// records, so that what an older ompsync kept is indexed again: 2 reads
// Claude Code's and Codex's lines, which 1 (no version) left out.
const recordsVersion = 2

// usedGranularity is how stale a copy's time of use (its records file's
// modification time) may get before a search sets it again.
const usedGranularity = time.Hour

// OpenCache opens (creating it) the cache folder dir, bounded to maxBytes
// of records, and takes its lock: two searches at once take turns.
func OpenCache(dir string, maxBytes int64) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("search cache: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("search cache: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("search cache: lock: %w", err)
	}
	return &Cache{dir: dir, max: maxBytes, lock: f, now: time.Now}, nil
}

// Close releases the cache's lock.
func (c *Cache) Close() error {
	if c == nil {
		return nil
	}
	return c.lock.Close()
}

// OlderCopy is the cache's name for machine's older generation gen, kept
// beside its current copy: a generation that is not the newest never
// grows. ("@" is in no machine's name.)
func OlderCopy(machine, gen string) string { return machine + "@" + gen }

// validCopy reports whether name is a machine's, or an OlderCopy's.
func validCopy(name string) bool {
	if m, gen, ok := strings.Cut(name, "@"); ok {
		return safename.Machine(m) && repo.ValidGeneration(gen)
	}
	return safename.Machine(name)
}

func (c *Cache) paths(id, machine string) (state, records string, err error) {
	if !safename.SessionID(id) || !validCopy(machine) {
		return "", "", fmt.Errorf("search cache: unsafe session %q or machine %q", id, machine)
	}
	base := filepath.Join(c.dir, id, machine)
	return base + ".json", base + ".txt", nil
}

// State returns what the cache holds of a session's copy on machine, or
// nil when it holds nothing usable (or there is no cache, c nil).
func (c *Cache) State(id, machine string) (*CopyState, error) {
	if c == nil {
		return nil, nil
	}
	sp, _, err := c.paths(id, machine)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(sp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("search cache: %w", err)
	}
	var st CopyState
	if json.Unmarshal(b, &st) != nil || st.Session != id || st.Machine != machine || st.Records < 0 || st.Version != recordsVersion {
		return nil, nil // damaged, or of another version: indexed again
	}
	return &st, nil
}

// saveState replaces a copy's state by a rename, not synced: a cache lost
// in a crash is only indexed again, and a search of a thousand sessions
// should not wait for a thousand syncs.
func (c *Cache) saveState(path string, st *CopyState) error {
	b, _ := json.Marshal(st)
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("search cache: %w", err)
	}
	return nil
}

// Remove forgets a copy (nothing to forget without a cache).
func (c *Cache) Remove(id, machine string) error {
	if c == nil {
		return nil
	}
	sp, rp, err := c.paths(id, machine)
	if err != nil {
		return err
	}
	for _, p := range []string{sp, rp} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("search cache: %w", err)
		}
	}
	_ = os.Remove(filepath.Dir(sp)) // when it was the session's last copy
	return nil
}

type cachedCopy struct {
	id, machine string
	used        time.Time
	size        int64
}

// Evict removes the copies used longest ago until the records fit in the
// bound, and returns how many it removed.
func (c *Cache) Evict() (int, error) {
	if c == nil {
		return 0, nil
	}
	var copies []cachedCopy
	var total int64
	sessions, err := os.ReadDir(c.dir)
	if err != nil {
		return 0, fmt.Errorf("search cache: %w", err)
	}
	for _, s := range sessions {
		if !s.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(c.dir, s.Name()))
		if err != nil {
			return 0, fmt.Errorf("search cache: %w", err)
		}
		for _, f := range files {
			if strings.HasSuffix(f.Name(), tmpSuffix) {
				// A cut-off run's: this one holds the lock.
				_ = os.Remove(filepath.Join(c.dir, s.Name(), f.Name()))
				continue
			}
			machine, ok := strings.CutSuffix(f.Name(), ".txt")
			if !ok {
				continue
			}
			cp := cachedCopy{id: s.Name(), machine: machine}
			if fi, err := f.Info(); err == nil {
				cp.size, cp.used = fi.Size(), fi.ModTime() // the time of use: Open
			}
			total += cp.size
			copies = append(copies, cp)
		}
	}
	slices.SortFunc(copies, func(a, b cachedCopy) int {
		return cmp.Or(a.used.Compare(b.used), cmp.Compare(b.size, a.size)) // of equals, free the most
	})
	n := 0
	for _, cp := range copies {
		if total <= c.max {
			break
		}
		if err := c.Remove(cp.id, cp.machine); err != nil {
			return n, err
		}
		total -= cp.size
		n++
	}
	return n, nil
}
