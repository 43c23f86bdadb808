package agent

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

var errWouldBlock = windows.ERROR_LOCK_VIOLATION

// lockOffset is where the locked byte lies: past the pid the file holds,
// since Windows locks are mandatory and a locked range cannot be read by
// the ompsync that wants to name the agent holding it.
const lockOffset = 1 << 30

// lockFile takes an exclusive LockFileEx lock on f without waiting:
// errWouldBlock when another process holds it.
func lockFile(f *os.File) error {
	ol := &windows.Overlapped{Offset: lockOffset}
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_IO_PENDING) { // an asynchronous handle's way of saying so
		return errWouldBlock
	}
	return err
}

// processAlive reports whether a process with this pid is running. One of
// another user's that cannot be opened counts as running.
func processAlive(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return errors.Is(err, windows.ERROR_ACCESS_DENIED)
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		return true
	}
	const stillActive = 259 // STILL_ACTIVE
	return code == stillActive
}
