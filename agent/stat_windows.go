package agent

import (
	"io/fs"
	"time"
)

// changedAt is the file's mtime: Windows keeps no ctime in what Stat
// returns, so a file given an old mtime counts as changed then.
func changedAt(fi fs.FileInfo) time.Time { return fi.ModTime() }

// inodeOf is 0 on Windows, where Stat gives no file index: a file's
// identity is then its path and contents alone.
func inodeOf(fs.FileInfo) uint64 { return 0 }
