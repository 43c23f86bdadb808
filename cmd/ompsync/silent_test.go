package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote/backend"
)

// Pull on a new machine starts as soon as it is configured: the agent
// makes the agent dir, which the client has not made yet, and pulls the
// other machine's session into it.
func TestPullMakesAgentDirOnNewMachine(t *testing.T) {
	url := "file://" + t.TempDir()
	laptop := newMachineEnv(t, url, backend.S3Options{}, "laptop")
	desk := newMachineEnv(t, url, backend.S3Options{}, "desk")
	id := "01a113d2-be76-73c7-986b-d3ac6e3f0037"
	laptop.newSession(id, entry("a1", "", "from the laptop"))
	if code, out := laptop.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("laptop agent --once: exit %d\n%s", code, out)
	}
	if err := os.RemoveAll(desk.agentDir); err != nil {
		t.Fatal(err)
	}
	cmd, out := desk.start("agent", "--pull", "--interval", "100ms", "--sync-pull-interval", "200ms")
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	want := laptop.readSession(id)
	waitUntil(t, "the laptop's session pulled into a new agent dir", func() bool { return bytes.Equal(desk.readSession(id), want) })
	if !strings.Contains(out.String(), "made the agent dir") {
		t.Errorf("the agent did not say it made the agent dir:\n%s", out)
	}
}

// A session deleted while the agent runs and restored with `ompsync
// restore` is on the remote already: once the agent ran a pass, status
// --max-lag passes, and stays passing (it was a backlog that grew for ever).
func TestStatusAfterDeleteAndRestore(t *testing.T) {
	m := newMachineEnv(t, "file://"+t.TempDir(), backend.S3Options{}, "laptop")
	id := "01a113d2-be76-73c7-986b-d3ac6e3f0038"
	p := m.newSession(id, entry("a1", "", "kept"))
	cmd, out := m.start("agent", "--interval", "100ms", "--reconcile-interval", "300ms")
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	waitUntil(t, "the session uploaded", func() bool { code, _ := m.ompsync("status", "--max-lag", "0s"); return code == 0 })
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the deletion recorded", func() bool { return strings.Contains(out.String(), "session deleted locally") })
	if code, rout := m.ompsync("restore", "--force", id[:13]); code != 0 {
		t.Fatalf("restore: exit %d\n%s", code, rout)
	}
	restored := time.Now()
	mark := filepath.Join(m.home, "state", "uptodate")
	// --max-lag 1s checked after 2s is --max-lag 30s after 31s, faster.
	waitUntil(t, "a pass after the restore, 2s after it", func() bool {
		fi, err := os.Stat(mark)
		return err == nil && fi.ModTime().After(restored) && time.Since(restored) > 2*time.Second
	})
	if code, sout := m.ompsync("status", "--max-lag", "1s"); code != 0 {
		t.Fatalf("status --max-lag 1s after a restore and a pass: exit %d\n%s\nagent:\n%s", code, sout, out)
	}
}

// prune exits 1 when it could not do what retention asks, and says why:
// a machine with no catalog (a typo in machine), and expired sessions left
// in the catalog because an agent holds the lock.
func TestPruneSaysWhatItCouldNotDo(t *testing.T) {
	url := "file://" + t.TempDir()
	m := newMachineEnv(t, url, backend.S3Options{}, "laptop")
	id := "01a113d2-be76-73c7-986b-d3ac6e3f0039"
	p := m.newSession(id, entry("a1", "", "to be deleted"))
	m.newSession("01a113d2-be76-73c7-986b-d3ac6e3f0040", entry("b1", "", "kept"))
	if code, out := m.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("agent --once: exit %d\n%s", code, out)
	}
	typo := newMachineEnv(t, url, backend.S3Options{}, "lapt0p")
	code, out := typo.ompsync("prune", "--retention-deleted", "1ms")
	if code != 1 || !strings.Contains(out, `machine "lapt0p" has no catalog`) || !strings.Contains(out, "laptop") {
		t.Fatalf("prune for a machine with no catalog: exit %d\n%s", code, out)
	}

	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if code, out := m.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("agent --once after the deletion: exit %d\n%s", code, out)
	}
	cmd, aout := m.start("agent", "--interval", "100ms")
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	waitUntil(t, "the agent started", func() bool { return strings.Contains(aout.String(), "agent started") })
	code, out = m.ompsync("prune", "--retention-deleted", "1ms")
	if code != 1 || !strings.Contains(out, "stay listed in the catalog") || !strings.Contains(out, "an agent is running") {
		t.Fatalf("prune while an agent runs: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "deleted ") {
		t.Errorf("prune did not say what it deleted:\n%s", out)
	}
}
