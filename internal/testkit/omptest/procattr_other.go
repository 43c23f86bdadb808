//go:build !linux && !windows

package omptest

import "syscall"

// procAttr: elsewhere a test binary that dies may leave omp running.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
