package clienttest

import (
	"os/exec"
	"syscall"
)

// procAttr: Windows has no process groups to set here; the real clients'
// tests run on Linux.
func procAttr() *syscall.SysProcAttr { return nil }

// killGroup ends the client (Windows has no process group to signal).
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}
