package atomicfile

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/windows"
)

// replaceWait is how long a replace waits for another program to close the
// file it replaces.
const replaceWait = 2 * time.Second

// replace renames tmp over name (MoveFileEx, replacing), waiting a little
// while another program has name open.
func replace(tmp, name string) error {
	return replaceRetrying(tmp, name, os.Rename, sharingViolation, replaceWait)
}

// sharingViolation reports whether err is Windows refusing to replace a
// file another process has open.
func sharingViolation(err error) bool {
	return errors.Is(err, windows.ERROR_SHARING_VIOLATION) || errors.Is(err, windows.ERROR_ACCESS_DENIED) || errors.Is(err, windows.ERROR_LOCK_VIOLATION)
}
