package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// lockDir takes an exclusive lock on the state dir's lock file (flock;
// LockFileEx on Windows); the kernel releases it when the process dies, even
// by SIGKILL. The file holds the pid, for the message of an agent refused.
func lockDir(dir string) (*os.File, error) {
	name := filepath.Join(dir, "lock")
	f, err := lockPID(name, "open lock file", "lock state dir")
	if errors.Is(err, errWouldBlock) {
		b, _ := os.ReadFile(name)
		return nil, fmt.Errorf("%w on state dir %s (pid %s): stop it first, or give this one another state_dir", ErrLocked, dir, strings.TrimSpace(string(b)))
	}
	return f, err
}

// lockPID takes the lock of the lock file at name without waiting
// (errWouldBlock while another process holds it) and writes this
// process's pid in it; open and take say what failed otherwise.
func lockPID(name, open, take string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", open, err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, errWouldBlock
		}
		return nil, fmt.Errorf("%s: %w", take, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// TryLockState takes the agent's lock on the state dir without waiting, for
// a command that must not change what the agent owns behind its back
// (prune's catalog): it fails while an agent runs. A state dir that does
// not exist has no agent.
func TryLockState(dir string) (unlock func(), err error) {
	f, err := lockPID(filepath.Join(dir, "lock"), "open lock file", "lock state dir")
	switch {
	case errors.Is(err, os.ErrNotExist):
		return func() {}, nil
	case errors.Is(err, errWouldBlock):
		return nil, errors.New("an agent is running")
	case err != nil:
		return nil, err
	}
	return func() { f.Close() }, nil
}

// maintenanceLock names the lock file held by whatever deletes this
// machine's objects on the remote: the agent's compaction and retention,
// and the compact, prune and rekey commands. Two of them at once could
// each take a chunk the other has just verified and relies on.
const maintenanceLock = "maintenance.lock"

// tryLockMaintenance takes the state dir's maintenance lock without
// waiting; ok is false while another process holds it.
func tryLockMaintenance(dir string) (unlock func(), ok bool, err error) {
	f, err := lockPID(filepath.Join(dir, maintenanceLock), "open maintenance lock", "take maintenance lock")
	if errors.Is(err, errWouldBlock) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return func() { f.Close() }, true, nil
}

// LockMaintenance takes the state dir's maintenance lock, waiting while
// another maintainer holds it (the agent's compaction ends by itself);
// waiting is called once, with the holder's pid, when it has to wait.
// A state dir that does not exist yet is made: the lock must exist for
// an agent started meanwhile to see it.
func LockMaintenance(ctx context.Context, dir string, waiting func(pid string)) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make state dir: %w", err)
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for said := false; ; {
		unlock, ok, err := tryLockMaintenance(dir)
		if ok || err != nil {
			return unlock, err
		}
		if !said && waiting != nil {
			b, _ := os.ReadFile(filepath.Join(dir, maintenanceLock))
			waiting(strings.TrimSpace(string(b)))
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
