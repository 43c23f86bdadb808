//go:build unix

package agent

import (
	"io/fs"
	"syscall"
	"time"
)

// changedAt is the later of a file's mtime and ctime: a file renamed into
// place or given an old mtime (as restore does) changed when that happened.
func changedAt(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if c := ctimeOf(st); c.After(fi.ModTime()) {
			return c
		}
	}
	return fi.ModTime()
}

func inodeOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
