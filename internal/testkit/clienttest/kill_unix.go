//go:build unix

package clienttest

import (
	"os/exec"
	"syscall"
)

// killGroup ends the client and what it started (its process group).
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	return cmd.Process.Kill()
}
