package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Write replaces a file whole, with the mode and mtime asked for; with
// Exclusive it never replaces one; no temp file is left behind either way.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := Write(name, []byte("one"), Options{Mtime: mtime}); err != nil {
		t.Fatal(err)
	}
	if err := Write(name, []byte("two"), Options{Perm: 0o640, NoDirSync: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(name); string(b) != "two" {
		t.Fatalf("file holds %q", b)
	}
	if fi, _ := os.Stat(name); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", fi.Mode())
	}
	err := Write(name, []byte("three"), Options{Exclusive: true})
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("exclusive write over a file: %v", err)
	}
	if b, _ := os.ReadFile(name); string(b) != "two" {
		t.Fatalf("an exclusive write replaced the file: %q", b)
	}
	other := filepath.Join(dir, "g")
	if err := Write(other, []byte("new"), Options{Exclusive: true, Mtime: mtime}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(other); fi.Mode().Perm() != 0o600 || !fi.ModTime().Equal(mtime) {
		t.Errorf("new file: mode %v mtime %v", fi.Mode(), fi.ModTime())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("folder holds %d entries, want the 2 files", len(entries))
	}
}
