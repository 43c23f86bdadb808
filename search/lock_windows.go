package search

import (
	"os"

	"golang.org/x/sys/windows"
)

// lockFile takes an exclusive LockFileEx lock on f, waiting for it. It locks
// one byte far past the end: Windows locks are mandatory, and the file
// itself holds nothing to read.
func lockFile(f *os.File) error {
	ol := &windows.Overlapped{Offset: 1 << 30}
	return windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK, 0, 1, 0, ol)
}
