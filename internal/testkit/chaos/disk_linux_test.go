//go:build chaos && linux

package chaos

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// smallDisk mounts a small tmpfs on dir (as root), so the state dir can be
// filled up. It reports false, and the disk-full part of the chaos is
// skipped, when mounting is not allowed.
func smallDisk(t *testing.T, dir string) bool {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m,mode=0700"); err != nil {
		t.Logf("state dir %s on the ordinary disk: cannot mount a small tmpfs (%v); the disk-full part is skipped (run as root to include it)", dir, err)
		return false
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return true
}

// fillDisk fills the filesystem of dir until it is full, holds it full for
// a while, and frees it again, until stop is closed.
func fillDisk(dir string, rng *lockedRand, st *stats, stop <-chan struct{}) {
	filler := filepath.Join(dir, "filler")
	defer os.Remove(filler)
	chunk := make([]byte, 64<<10)
	for {
		select {
		case <-stop:
			return
		case <-time.After(rng.between(2*time.Second, 6*time.Second)):
		}
		f, err := os.OpenFile(filler, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			continue
		}
		for {
			if _, err := f.Write(chunk); err != nil {
				if errors.Is(err, syscall.ENOSPC) {
					st.add(func(s *stats) { s.DiskFull++ })
				}
				break
			}
		}
		f.Close()
		select {
		case <-stop:
			return
		case <-time.After(rng.between(500*time.Millisecond, 3*time.Second)):
		}
		os.Remove(filler)
	}
}
