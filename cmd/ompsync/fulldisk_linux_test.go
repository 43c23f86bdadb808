package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/tmpfstest"
	"github.com/ompsync/ompsync/remote/backend"
)

// A running `agent --pull` whose agent dir fills up while it pulls another
// machine's longer copy of a session: the local file stays byte for byte
// and mtime what it was (no torn line for omp to glue its next one onto),
// the log says why, nothing is left behind, and once there is room the
// same agent completes the file.
func TestPullOntoFullDisk(t *testing.T) {
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	desk := newMachineEnv(t, url, backend.S3Options{}, "desk")
	const id = "019ad000-0000-7000-8000-00000000f011"
	var lines []string
	for i := range 2000 {
		lines = append(lines, entry(fmt.Sprintf("%08x", i+1), "", strings.Repeat(fmt.Sprintf("line %d of a long session ", i), 16)))
	}
	deskFile := desk.newSession(id, lines...)
	if code, out := desk.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("desk agent --once: exit %d\n%s", code, out)
	}
	full, err := os.ReadFile(deskFile)
	if err != nil {
		t.Fatal(err)
	}

	laptop := newMachineEnv(t, url, backend.S3Options{}, "laptop")
	laptop.agentDir = tmpfstest.Mount(t, "4m")
	rel, _ := filepath.Rel(desk.agentDir, deskFile)
	local := filepath.Join(laptop.agentDir, rel)
	prefix := full[:bytes.IndexByte(full[len(full)/4:], '\n')+len(full)/4+1]
	if err := os.MkdirAll(filepath.Dir(local), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local, prefix, 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(local, old, old); err != nil {
		t.Fatal(err)
	}
	// Room for less than the other machine's copy, which restore streams
	// to a verified temp file beside the session before it appends.
	var st syscall.Statfs_t
	if err := syscall.Statfs(laptop.agentDir, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(laptop.agentDir, "filler")
	if err := os.WriteFile(filler, make([]byte, int64(st.Bavail)*st.Bsize-int64(len(full))/2), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd, out := laptop.start("agent", "--pull", "--interval", "100ms", "--sync-pull-interval", "300ms")
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitUntil(t, "the pull to fail on the full disk", func() bool {
		return strings.Contains(out.String(), "pull: session not merged") && strings.Contains(out.String(), "no space left")
	})
	time.Sleep(time.Second) // a few more pulls that fail
	if got, err := os.ReadFile(local); err != nil || !bytes.Equal(got, prefix) {
		t.Fatalf("after pulls onto a full disk the file has %d bytes (%v), want the %d it had\n%s", len(got), err, len(prefix), out)
	}
	if fi, err := os.Stat(local); err != nil || !fi.ModTime().Equal(old) {
		t.Fatalf("after pulls onto a full disk: mtime %v (%v), want %v", fi.ModTime(), err, old)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the pull to complete the file once there is room", func() bool {
		got, err := os.ReadFile(local)
		return err == nil && bytes.Equal(got, full)
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent --pull after SIGTERM: %v\n%s", err, out)
	}
	var left []string
	_ = filepath.WalkDir(laptop.agentDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".ompsync-") {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("temp files left in the agent dir: %v", left)
	}
}
