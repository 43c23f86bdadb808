//go:build unix

package file

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// lockRoot takes the remote's lock (flock, which other processes and
// machines sharing the folder over NFS honour too) and returns its release.
func lockRoot(r *os.Root) (func(), error) {
	f, err := r.OpenFile(lockName, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the remote: %w", err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// etag names a version of an object: a replacement is a new file (a rename
// over it), so its inode, size and modification time change together.
func etag(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%x-%x-%x", st.Ino, fi.Size(), fi.ModTime().UnixNano())
}
