package clienttest

import "syscall"

// procAttr puts the client in its own process group, so a kill reaches the
// tool shells it started, and makes the kernel stop it when the test binary
// dies without cleaning up (a test timeout panics past deferred stops).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
