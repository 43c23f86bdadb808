// Package atomicfile writes files so that a crash leaves either the old file
// or the new one, never a half-written one.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Options modify Write.
type Options struct {
	Perm os.FileMode
	// Mtime, when not zero, is set on the file before it is renamed into place.
	Mtime time.Time
}

// Write writes a hidden temp file beside name, syncs it, renames it over name
// and syncs the folder.
func Write(name string, data []byte, opts Options) error {
	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(name)+".*.tmp")
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	perm := opts.Perm
	if perm == 0 {
		perm = 0o600
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if !opts.Mtime.IsZero() {
		if err := os.Chtimes(tmp.Name(), opts.Mtime, opts.Mtime); err != nil {
			return fmt.Errorf("set mtime: %w", err)
		}
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("rename into %s: %w", name, err)
	}
	return SyncDir(dir)
}

// SyncDir makes a folder's entries durable.
func SyncDir(dir string) error {
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
