package omptest

import "syscall"

// procAttr puts omp in its own process group, so a kill reaches the tool
// shells it started, and makes the kernel stop omp when the test binary dies
// without cleaning up (a test timeout panics past deferred stops). The
// signal follows the thread that started the process; Go only ends threads
// locked by a goroutine, which ours is not.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
