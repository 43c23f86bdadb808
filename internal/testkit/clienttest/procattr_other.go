//go:build !linux && !windows

package clienttest

import "syscall"

// procAttr: elsewhere a test binary that dies may leave a client running.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
