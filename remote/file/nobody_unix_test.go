//go:build unix

package file_test

import (
	"os/exec"
	"syscall"
)

const nobody = 65534

// asNobody makes cmd run as the user nobody (the caller is root).
func asNobody(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
}
