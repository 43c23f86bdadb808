package remotetest

import "syscall"

// procAttr makes the kernel stop versitygw when the test binary dies
// without cleaning up (a test timeout panics past deferred stops). The
// signal follows the thread that started the process; Go only ends threads
// locked by a goroutine, which ours is not.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
