package atomicfile

import (
	"fmt"
	"time"
)

// replaceRetrying renames tmp over name, trying again for up to wait while
// busy says the failure is another program holding name open. Windows
// refuses to rename over a file that is open without delete sharing (an
// agent writing its session, an editor, an antivirus scan), which is most
// often brief. Past wait it says what to do.
func replaceRetrying(tmp, name string, rename func(string, string) error, busy func(error) bool, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	pause := 10 * time.Millisecond
	for {
		err := rename(tmp, name)
		if err == nil || !busy(err) {
			return err
		}
		if time.Now().Add(pause).After(deadline) {
			return fmt.Errorf("another program has %s open, and Windows cannot replace a file while it is open: close it and run again: %w", name, err)
		}
		time.Sleep(pause) // the other program's, not ours, to end: nothing to wait on
		pause = min(2*pause, 200*time.Millisecond)
	}
}
