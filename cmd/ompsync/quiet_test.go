package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote/backend"
)

// Moves that used to back up nothing, or not everything, and exit 0: each
// is now a non-zero exit with one line saying what is wrong and what to do.

// A file remote on a disk that is not mounted: its folder is not made again
// on the disk below (the parent missing is an error naming it), and a
// folder there that holds no repository, though the state backed up to one
// there, is refused by agent --once and by the running agent, with nothing
// written. Mounted again, the backup goes on.
func TestFileRemoteUnmounted(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	mount := filepath.Join(t.TempDir(), "media", "usb")
	if err := os.MkdirAll(mount, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mount, "backup")
	m := newMachineEnv(t, "file://"+dir, backend.S3Options{}, "laptop")
	want := m.writeSessions(0, 2)
	m.mustRun(0, "agent", "--once")

	// Unmounted: the mount point is there, empty.
	disk := filepath.Join(filepath.Dir(mount), "disk")
	if err := os.Rename(mount, disk); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(mount, 0o700); err != nil {
		t.Fatal(err)
	}
	m.writeSessions(2, 1)
	for _, args := range [][]string{{"agent", "--once"}, {"agent", "--interval", "100ms"}, {"status"}} {
		out := m.mustRun(1, args...)
		line := lastLine(out)
		for _, w := range []string{"remote folder " + dir + " holds no ompsync repository, though this machine backed up to repository ", "is its disk mounted?", "move the state dir " + filepath.Join(m.home, "state") + " aside"} {
			if !strings.Contains(line, w) {
				t.Errorf("ompsync %s with the disk unmounted: last line does not say %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the agent wrote %d entries into the folder below the mount point", len(ents))
	}

	// The whole mount path gone: nothing is made.
	if err := os.RemoveAll(mount); err != nil {
		t.Fatal(err)
	}
	out := m.mustRun(1, "agent", "--once")
	if !strings.Contains(lastLine(out), mount+" does not exist: is the disk mounted?") {
		t.Errorf("agent --once with the mount point gone:\n%s", out)
	}
	if _, err := os.Stat(mount); !os.IsNotExist(err) {
		t.Errorf("%s after agent --once: %v, want it still missing", mount, err)
	}

	// Mounted again: the backup goes on where it was.
	if err := os.Rename(disk, mount); err != nil {
		t.Fatal(err)
	}
	out = m.mustRun(0, "agent", "--once")
	if strings.Contains(out, "not trusting") {
		t.Errorf("the state was not trusted on its own remote:\n%s", out)
	}
	r := openTestRepo(t, m.remote, m.s3)
	for id, data := range want {
		if got := remoteCopy(t, r, id, "laptop"); !bytes.Equal(got, data) {
			t.Errorf("%s on the remote: %d bytes, want %d", id, len(got), len(data))
		}
	}
}

// SIGTERM when the last upload fails (the remote stopped taking writes):
// the agent exits non-zero with one line saying what was not uploaded;
// with the remote back, the next start uploads the rest.
func TestSIGTERMFlushFails(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	dir := filepath.Join(t.TempDir(), "remote")
	m := newMachineEnv(t, "file://"+dir, backend.S3Options{}, "termy")
	m.writeSessions(0, 1)
	id := "019a0000-0000-7000-8000-000000000000"
	cmd, out := m.start("agent", "--interval", "1h")
	r := openTestRepo(t, m.remote, m.s3)
	waitUntil(t, "the first pass", func() bool { return remoteSize(t, r, id, "termy") > 0 })

	// The remote stops taking writes: a file where its folder was, as the
	// reviewer's probe did.
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	m.appendSession(id, entry("0000000a", "00000000", "written just before the stop"))
	time.Sleep(100 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() == 0 {
		t.Fatalf("agent after SIGTERM with the flush failing: %v, want a non-zero exit\n%s", err, out)
	}
	line := lastLine(out.String())
	if !strings.HasPrefix(line, "ompsync: ") || !strings.Contains(line, "stopped before everything was uploaded: ") || !strings.Contains(line, "the next start uploads the rest") {
		t.Errorf("last line after the failed flush: %q\n%s", line, out)
	}

	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir+".away", dir); err != nil {
		t.Fatal(err)
	}
	m.mustRun(0, "agent", "--once")
	data := m.readSession(id)
	if got := remoteCopy(t, r, id, "termy"); !bytes.Equal(got, data) {
		t.Errorf("after the next start the remote holds %d bytes, want %d", len(got), len(data))
	}
}
