//go:build unix

package main

import (
	"os"
	"syscall"
)

// deviceOf is the file system that holds path.
func deviceOf(path string) (uint64, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Dev), true // an int32 on darwin
}
