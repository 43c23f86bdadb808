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
	for _, args := range [][]string{{"agent", "--once"}, {"agent", "--interval", "100ms"}, {"status"}, {"ls"}} {
		out := m.mustRun(1, args...)
		line := lastLine(out)
		for _, w := range []string{"remote folder " + dir + " holds no ompsync repository, though this machine backed up to repository ", "is its disk mounted?", "move the state dir " + filepath.Join(m.home, "state") + " aside"} {
			if !strings.Contains(line, w) {
				t.Errorf("ompsync %s with the disk unmounted: last line does not say %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the remote folder was made again below the mount point: %v", err)
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
	t.Parallel()
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
	if !ok || ee.ExitCode() != exitInterrupted {
		t.Fatalf("agent after SIGTERM with the flush failing: %v, want exit %d\n%s", err, exitInterrupted, out)
	}
	line := lastLine(out.String())
	if !strings.HasPrefix(line, "ompsync: interrupted: stopped before everything was uploaded: ") || !strings.HasSuffix(line, "; the next start uploads the rest") {
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

// A sessions folder that is a symlink (moved to another disk) is backed up
// as if it were the folder, by agent --once and by the running agent's
// watch; inside it, symlinks (a cwd folder, a session file) are not
// followed, and each is named once and counted in the totals line.
func TestSessionsFolderSymlink(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	m := newMachineEnv(t, "file://"+filepath.Join(t.TempDir(), "remote"), backend.S3Options{}, "laptop")
	sessions := filepath.Join(m.agentDir, "sessions")
	disk2 := filepath.Join(t.TempDir(), "disk2", "sessions")
	if err := os.MkdirAll(filepath.Dir(disk2), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sessions, disk2); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(disk2, sessions); err != nil {
		t.Fatal(err)
	}
	want := m.writeSessions(0, 2)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "2026-11-30T00-00-00-000Z_019a0000-0000-7000-8000-00000000000f.jsonl"), []byte(`{"type":"session","version":3,"id":"019a0000-0000-7000-8000-00000000000f","timestamp":"x","cwd":"/x"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(sessions, "-linked-cwd")); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(sessions, "-work", "2026-11-30T00-00-00-000Z_019a0000-0000-7000-8000-00000000000e.jsonl")
	if err := os.Symlink(filepath.Join(outside, "2026-11-30T00-00-00-000Z_019a0000-0000-7000-8000-00000000000f.jsonl"), linked); err != nil {
		t.Fatal(err)
	}

	out := m.mustRun(0, "agent", "--once")
	if !strings.Contains(out, "2 files checked: 2 uploaded, 0 already up to date; 2 symlinks not followed (see above)") {
		t.Errorf("totals line of agent --once:\n%s", out)
	}
	if n := strings.Count(out, "not following a symlink"); n != 2 {
		t.Errorf("%d lines say a symlink is not followed, want 2:\n%s", n, out)
	}
	for _, rel := range []string{"sessions/-linked-cwd", "sessions/-work/" + filepath.Base(linked)} {
		if !strings.Contains(out, "path="+rel) {
			t.Errorf("no line names the symlink %s:\n%s", rel, out)
		}
	}
	m.mustRun(0, "status", "--max-lag", "1s")
	if out := m.mustRun(0, "verify"); !strings.Contains(out, "2 sessions checked: 2 ok") {
		t.Errorf("verify:\n%s", out)
	}
	r := openTestRepo(t, m.remote, m.s3)
	for id, data := range want {
		if got := remoteCopy(t, r, id, "laptop"); !bytes.Equal(got, data) {
			t.Errorf("%s on the remote: %d bytes, want %d", id, len(got), len(data))
		}
	}

	// The running agent watches the folder the symlink leads to: a new
	// session is up within its interval, with no reconcile scan due.
	cmd, log := m.start("agent", "--interval", "100ms", "--reconcile-interval", "1h")
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitUntil(t, "agent start", func() bool { return strings.Contains(log.String(), "agent started") })
	time.Sleep(time.Second) // its first pass done: only the watch sees what comes next
	more := m.writeSessions(5, 1)
	for id, data := range more {
		waitUntil(t, "the new session uploaded", func() bool { return remoteSize(t, r, id, "laptop") == int64(len(data)) })
	}
}

// An agent dir that holds nothing to back up is never "all uploaded": one a
// level too high (agent_dir=~/.omp) is refused by agent --once, the
// running agent and status, naming the folder meant; one with no sessions
// folder at all fails agent --once, first run or not. An empty sessions
// folder is a machine with no sessions yet (issue 14's new laptop): exit 0.
func TestAgentDirWithoutSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	rdir := filepath.Join(t.TempDir(), "remote")
	m := newMachineEnv(t, "file://"+rdir, backend.S3Options{}, "laptop")
	m.writeSessions(0, 1)
	omp := filepath.Dir(m.agentDir)
	agentDir := m.agentDir
	m.agentDir = omp
	wantLine := "agent_dir " + omp + " has no sessions/ folder, but " + filepath.Join(agentDir, "sessions") + " exists: did you mean agent_dir=" + agentDir + "?"
	for _, args := range [][]string{{"agent", "--once"}, {"agent", "--interval", "100ms"}, {"status"}} {
		out := m.mustRun(1, args...)
		if !strings.Contains(lastLine(out), wantLine) {
			t.Errorf("ompsync %s with agent_dir one level too high: last line %q, want it to say %q", strings.Join(args, " "), lastLine(out), wantLine)
		}
	}
	if _, err := os.Stat(filepath.Join(rdir, "ompsync.json")); !os.IsNotExist(err) {
		t.Errorf("the remote was written to: %v", err)
	}

	// No sessions folder at all, on a first run (no state): refused before
	// the remote is written to.
	emptyRemote := filepath.Join(t.TempDir(), "remote")
	empty := newMachineEnv(t, "file://"+emptyRemote, backend.S3Options{}, "desk")
	if err := os.Remove(filepath.Join(empty.agentDir, "sessions")); err != nil {
		t.Fatal(err)
	}
	out := empty.mustRun(1, "agent", "--once")
	if !strings.Contains(lastLine(out), "agent_dir "+empty.agentDir+" has no sessions/ folder: nothing was backed up") {
		t.Errorf("agent --once with no sessions folder: %q", lastLine(out))
	}
	if _, err := os.Stat(filepath.Join(emptyRemote, "ompsync.json")); !os.IsNotExist(err) {
		t.Errorf("agent --once with no sessions folder wrote to the remote: %v", err)
	}
	if err := os.Mkdir(filepath.Join(empty.agentDir, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	empty.mustRun(0, "agent", "--once")

	// Another client found by its folder (agents unset) may never have
	// written a session: Claude Code's folder without projects/ is no
	// error. Named in agents, it is.
	if err := os.MkdirAll(filepath.Join(empty.home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	empty.writeSessions(0, 1)
	if out := empty.mustRun(0, "agent", "--once"); !strings.Contains(out, "claude: 0 files checked") {
		t.Errorf("agent --once with Claude Code's folder found and no projects/ in it:\n%s", out)
	}
	code, out := empty.startWithWait([]string{"OMPSYNC_AGENTS=omp,claude"}, "agent", "--once")
	if code != 1 || !strings.Contains(lastLine(out), "claude: claude.dir "+filepath.Join(empty.home, ".claude")+" has no projects/ folder: nothing was backed up") {
		t.Errorf("agent --once with claude named in agents and no projects/: exit %d\n%s", code, out)
	}
}
