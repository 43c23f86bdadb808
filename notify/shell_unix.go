//go:build !windows

package notify

import (
	"context"
	"os/exec"
	"syscall"
)

// shellCommand runs command through /bin/sh in its own process group,
// killed whole at ctx's end: a child that hangs (a mailer, a sleep) does
// not outlive it.
func shellCommand(ctx context.Context, command string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}
