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
		if c := time.Unix(st.Ctimespec.Unix()); c.After(fi.ModTime()) {
			return c
		}
	}
	return fi.ModTime()
}
