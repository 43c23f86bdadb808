// Package tmpfstest mounts small tmpfs file systems for tests that fill a
// disk: restore and pull onto a full disk must leave every file as it was.
package tmpfstest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Mount mounts a tmpfs of size ("4m") on a new temp folder for the test and
// returns it, unmounted when the test ends. It needs root: elsewhere the
// test is skipped with the reason, and fails under CI=true, which runs as
// root.
func Mount(t testing.TB, size string) string {
	t.Helper()
	dir := t.TempDir()
	why := ""
	if os.Geteuid() != 0 {
		why = "mounting a small tmpfs needs root"
	} else if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		why = "mount tmpfs: " + strings.TrimSpace(string(out))
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %s", why)
		}
		t.Skip(why)
	}
	// Registered after TempDir's cleanup, so it runs first: the folder is
	// unmounted before it is removed.
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}
