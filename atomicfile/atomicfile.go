// Package atomicfile writes files so that a crash leaves either the old file
// or the new one, never a half-written one.
package atomicfile

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Options modify Write.
type Options struct {
	Perm os.FileMode
	// Mtime, when not zero, is set on the file before it is renamed into place.
	Mtime time.Time
	// Exclusive fails with fs.ErrExist when name exists, also when it
	// appears while the file is written (a hard link, not a rename, puts it
	// in place): nothing is ever replaced.
	Exclusive bool
	// NoDirSync leaves syncing the folder to the caller (SyncDir), who
	// writes many files into it and syncs it once.
	NoDirSync bool
}

// Write writes a hidden temp file beside name, syncs it, renames it over name
// (or links it, with Exclusive) and syncs the folder.
func Write(name string, data []byte, opts Options) error {
	return WriteFunc(name, func(w io.Writer) error {
		_, err := w.Write(data) // bufio passes a large data straight to the file
		return err
	}, opts)
}

// WriteFunc is Write of what write writes, through a buffer: a large file
// is never held whole. Nothing is put in place when write fails.
func WriteFunc(name string, write func(io.Writer) error, opts Options) error {
	tmp, err := Temp(filepath.Dir(name), filepath.Base(name), func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 64<<10)
		if err := cmp.Or(write(bw), bw.Flush()); err != nil { // a failed write's error, not the flush's
			return fmt.Errorf("write %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if opts.Perm != 0 { // a temp file is created 0600
		if err := os.Chmod(tmp, opts.Perm); err != nil {
			return fmt.Errorf("chmod %s: %w", tmp, err)
		}
	}
	return Install(tmp, name, opts)
}

// Temp writes what write writes to a new hidden temp file in dir (named
// for what, TempPattern), syncs and closes it, and returns its name: the
// one way ompsync makes a temp file it keeps. Nothing is left when it
// fails; write's own error is returned as it is.
func Temp(dir, what string, write func(io.Writer) error) (string, error) {
	f, err := os.CreateTemp(dir, TempPattern(what))
	if err != nil {
		return "", fmt.Errorf("create temp file: %w", err)
	}
	if err = write(f); err == nil {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("sync %s: %w", f.Name(), err)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", f.Name(), cerr)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// Install puts the synced temp file tmp at name as opts say: its mtime
// set, renamed over name (or, with Exclusive, linked: Place), the folder
// synced unless NoDirSync. A tmp linked stays for the caller to remove.
func Install(tmp, name string, opts Options) error {
	if !opts.Mtime.IsZero() {
		if err := os.Chtimes(tmp, opts.Mtime, opts.Mtime); err != nil {
			return fmt.Errorf("set mtime: %w", err)
		}
	}
	var err error
	if opts.Exclusive {
		err = Place(tmp, name)
	} else if err = replace(tmp, name); err != nil {
		err = fmt.Errorf("rename into %s: %w", name, err)
	}
	if err != nil || opts.NoDirSync {
		return err
	}
	return SyncDir(filepath.Dir(name))
}

// Place puts tmp at name by a hard link unless something is there (fs.ErrExist).
// On a file system without hard links it checks, then renames.
func Place(tmp, name string) error {
	err := os.Link(tmp, name)
	if err == nil {
		return nil
	}
	// Without hard links the link fails otherwise: check, then rename.
	if _, lerr := os.Lstat(name); errors.Is(err, fs.ErrExist) || lerr == nil {
		return fmt.Errorf("%s exists: %w", name, fs.ErrExist)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename into %s: %w", name, err)
	}
	return nil
}

// SyncDir makes a folder's entries durable. (On Windows, where a folder
// cannot be flushed, NTFS's journal keeps them: it does nothing.)
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open folder: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync folder %s: %w", dir, err)
	}
	return nil
}
