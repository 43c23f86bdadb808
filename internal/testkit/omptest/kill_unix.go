//go:build unix

package omptest

import (
	"os/exec"
	"syscall"
)

// killGroup ends omp and what it started (tool shells share its group).
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	return cmd.Process.Kill()
}
