package atomicfile

import (
	"errors"
	"io"
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

// WriteFunc puts in place what its function wrote, through a buffer; when
// the function fails, the old file stays as it was and no temp file is
// left.
func TestWriteFunc(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "state.json")
	big := make([]byte, 200<<10) // past the buffer
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	write := func(w io.Writer) error {
		if _, err := w.Write([]byte("head:")); err != nil {
			return err
		}
		_, err := w.Write(big)
		return err
	}
	if err := WriteFunc(name, write, Options{}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(name); err != nil || string(got) != "head:"+string(big) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	boom := errors.New("boom")
	err := WriteFunc(name, func(w io.Writer) error {
		w.Write([]byte("partial"))
		return boom
	}, Options{})
	if !errors.Is(err, boom) {
		t.Fatalf("a failing write: %v, want its error", err)
	}
	if got, _ := os.ReadFile(name); string(got) != "head:"+string(big) {
		t.Fatalf("a failing write changed the file (%d bytes)", len(got))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d entries in the folder, want the file alone", len(ents))
	}
}
