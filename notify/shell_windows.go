package notify

import (
	"context"
	"os/exec"
)

// shellCommand runs command through cmd.exe, killed at ctx's end.
func shellCommand(ctx context.Context, command string) *exec.Cmd {
	return exec.CommandContext(ctx, "cmd.exe", "/C", command)
}
