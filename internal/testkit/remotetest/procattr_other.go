//go:build !linux

package remotetest

import "syscall"

// procAttr: elsewhere a test binary that dies may leave versitygw running.
func procAttr() *syscall.SysProcAttr { return nil }
