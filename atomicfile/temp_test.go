package atomicfile

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A sweep removes only ompsync's own temp files, and only those nobody
// wrote to for a day: never a young one (another process may be writing
// it), an agent's temp file (omp's ".<name>.<n>.tmp"), a folder or a
// symlink named like one, or anything else.
func TestSweepStale(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-StaleAfter - time.Hour)
	mk := func(name string, age time.Time) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, age, age); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f, err := os.CreateTemp(dir, TempPattern("s_01.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(f.Name(), old, old); err != nil {
		t.Fatal(err)
	}
	stale := []string{f.Name(), mk(".ompsync-session.123.tmp", old)}
	keep := []string{
		mk(".ompsync-session.456.tmp", time.Now()), // young
		mk(".s_01.jsonl.1234567.tmp", old),         // omp's
		mk("s_01.jsonl", old),                      // a session
		mk(".ompsync-notes.txt", old),              // not a temp file
		mk(".ompsync-.tmp", old),                   // no name between
	}
	sub := filepath.Join(dir, ".ompsync-dir.1.tmp")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, ".ompsync-link.1.tmp")
	if err := os.Symlink(keep[2], link); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, sub, link)

	removed, err := SweepStale(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	slices.Sort(stale)
	if !slices.Equal(removed, stale) {
		t.Errorf("removed %q, want %q", removed, stale)
	}
	for _, p := range stale {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	for _, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	if removed, err := SweepStale(filepath.Join(dir, "missing"), time.Now()); err != nil || len(removed) > 0 {
		t.Errorf("a missing folder: %q, %v", removed, err)
	}
}

// Write's temp file is one a sweep knows, so a crash mid-write leaves
// nothing a later sweep cannot take.
func TestWriteTempIsSweepable(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "state.json")
	var seen []string
	err := WriteFunc(name, func(w io.Writer) error {
		des, _ := os.ReadDir(dir)
		for _, de := range des {
			seen = append(seen, de.Name())
		}
		return nil
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || !IsTemp(seen[0]) {
		t.Errorf("while writing, the folder held %q, want one temp file IsTemp knows", seen)
	}
}
