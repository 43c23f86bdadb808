package omptest

import (
	"os/exec"
	"syscall"
)

// procAttr: Windows has no process groups to set here; the real omp tests
// run on Linux.
func procAttr() *syscall.SysProcAttr { return nil }

// killGroup ends omp (Windows has no process group to signal).
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}
