package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// lockDir takes an exclusive lock on the state dir's lock file (flock;
// LockFileEx on Windows); the kernel releases it when the process dies, even
// by SIGKILL. The file holds the pid, for the message of an agent refused.
func lockDir(dir string) (*os.File, error) {
	name := filepath.Join(dir, "lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := lockFile(f); err != nil {
		b, _ := os.ReadFile(name)
		f.Close()
		if errors.Is(err, errWouldBlock) {
			pid := strings.TrimSpace(string(b))
			return nil, fmt.Errorf("%w on state dir %s (pid %s): stop it first, or give this one another state_dir", ErrLocked, dir, pid)
		}
		return nil, fmt.Errorf("lock state dir: %w", err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// TryLockFile takes the lock an agent holds on its state dir's lock file f,
// without waiting: ErrLocked while an agent holds it. Commands that must not
// run beside the agent (prune) take it; closing f releases it.
func TryLockFile(f *os.File) error {
	if err := lockFile(f); err != nil {
		if errors.Is(err, errWouldBlock) {
			return ErrLocked
		}
		return fmt.Errorf("lock state dir: %w", err)
	}
	return nil
}
