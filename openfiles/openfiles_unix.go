//go:build linux || darwin

package openfiles

import "syscall"

// statID is the device and inode of the file at path (after symlinks).
func statID(path string) (fileID, bool) {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), st.Ino}, true
}
