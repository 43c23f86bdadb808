package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/internal/testkit/tmpfstest"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
)

// The three identities of issue 14, through the real binary, on every
// remote: the state belongs to one remote, a machine name to one state
// dir, and "deleted" means this state saw the file go.

// writeSessions writes n sessions on m, ids from the given number, and
// returns their bytes by id.
func (m *machineEnv) writeSessions(from, n int) map[string][]byte {
	m.t.Helper()
	out := map[string][]byte{}
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("019a0000-0000-7000-8000-%012d", i)
		p := m.newSession(id, entry(fmt.Sprintf("%08x", i), "", fmt.Sprintf("work in session %d on %s", i, m.machine)))
		b, err := os.ReadFile(p)
		if err != nil {
			m.t.Fatal(err)
		}
		out[id] = b
	}
	return out
}

// mustRun runs an ompsync command on m and fails unless it exits with want.
func (m *machineEnv) mustRun(want int, args ...string) string {
	m.t.Helper()
	code, out := m.ompsync(args...)
	if code != want {
		m.t.Fatalf("ompsync %s on %s: exit %d, want %d\n%s", strings.Join(args, " "), m.machine, code, want, out)
	}
	return out
}

// lsStates is what `ompsync ls --json` says of each session.
func (m *machineEnv) lsStates() map[string]string {
	m.t.Helper()
	cmd := exec.Command(ompsyncBin, "ls", "--json")
	cmd.Env = m.environ()
	out, err := cmd.Output()
	if err != nil {
		m.t.Fatalf("ls --json: %v\n%s", err, out)
	}
	states := map[string]string{}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var l struct{ ID, State string }
		if err := json.Unmarshal(line, &l); err != nil {
			m.t.Fatalf("ls --json line %q: %v", line, err)
		}
		states[l.ID] = l.State
	}
	return states
}

// restoredAll checks that `restore --all` into a new agent dir gives back
// exactly want, byte for byte, and ends with its totals line.
func restoredAll(t *testing.T, m *machineEnv, want map[string][]byte) {
	t.Helper()
	to := filepath.Join(t.TempDir(), "agent")
	out := m.mustRun(0, "restore", "--all", "--to", to)
	if !strings.Contains(out, fmt.Sprintf("%d restored", len(want))) {
		t.Errorf("restore --all does not end with '%d restored':\n%s", len(want), out)
	}
	got := map[string][]byte{}
	matches, _ := filepath.Glob(filepath.Join(to, "sessions", "*", "*.jsonl"))
	for _, p := range matches {
		b, _ := os.ReadFile(p)
		got[idOf(p)] = b
	}
	if !maps.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("restore --all gave %d sessions, want %d byte for byte", len(got), len(want))
	}
}

// Story 1: the remote changes under a state dir (from the default folder to
// an S3 bucket, another folder, a recreated bucket). status says the state
// describes another remote; the next agent --once checks every file
// against the new remote, says why in one line, and uploads what it lacks;
// the new remote then restores every file byte for byte.
func TestSwitchRemoteSameStateDir(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		t.Parallel() // each backend is a remote of its own
		m := newMachineEnv(t, "file://"+filepath.Join(t.TempDir(), "first"), backend.S3Options{}, "laptop")
		want := m.writeSessions(0, 3)
		m.mustRun(0, "agent", "--once")
		m.mustRun(0, "status")

		m.remote, m.s3 = b.URL, b.S3
		out := m.mustRun(1, "status")
		if !strings.Contains(lastLine(out), "describes another remote") {
			t.Fatalf("status after the remote changed:\n%s", out)
		}
		out = m.mustRun(0, "agent", "--once")
		if n := strings.Count(out, "not trusting the local state"); n != 1 {
			t.Fatalf("%d lines say why the state is not trusted, want 1:\n%s", n, out)
		}
		m.mustRun(0, "status")
		restoredAll(t, m, want)

		// The remote emptied (a bucket deleted and made again).
		ctx := context.Background()
		for k := range remotetest.Objects(t, b.Client) {
			if err := b.Client.Delete(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
		if out := m.mustRun(1, "status"); !strings.Contains(lastLine(out), "holds no ompsync repository") {
			t.Fatalf("status with the remote emptied:\n%s", out)
		}
		if b.Name == "file" {
			// An emptied folder is what a disk not mounted looks like: the
			// agent refuses it until the state dir is moved aside.
			out := m.mustRun(1, "agent", "--once")
			if !strings.Contains(lastLine(out), "is its disk mounted?") || !strings.Contains(lastLine(out), "move the state dir") {
				t.Fatalf("agent --once with the remote folder emptied:\n%s", out)
			}
			state := filepath.Join(m.home, "state")
			if err := os.Rename(state, state+".old"); err != nil {
				t.Fatal(err)
			}
		}
		m.mustRun(0, "agent", "--once")
		if out := m.mustRun(0, "agent", "--once"); strings.Contains(out, "not trusting") {
			t.Fatalf("the state was not trusted after its reconcile:\n%s", out)
		}
		restoredAll(t, m, want)
	})
}

// ageCatalog moves a machine's catalog d into the past, as if its agent
// had last written it then.
func ageCatalog(t *testing.T, r *repo.Repo, machine string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	base, recent, err := r.GetCatalogParts(ctx, machine)
	if err != nil {
		t.Fatal(err)
	}
	base.Updated = base.Updated.Add(-d)
	if _, err := r.PutCatalog(ctx, base); err != nil {
		t.Fatal(err)
	}
	if recent != nil {
		recent.Base, recent.Updated = base.Updated, recent.Updated.Add(-d)
		if err := r.PutRecent(ctx, *recent, repo.IndexCatalog(base.Sessions)); err != nil {
			t.Fatal(err)
		}
	}
}

// Story 2: a new laptop with the old one's name and an empty agent dir.
// While the old one may still be writing, the new one refuses; once the
// old one has been silent (or with --take-over-machine) it takes the name
// over, its first pass records nothing as deleted, ls shows nothing
// deleted, and restore --all brings every session back byte for byte,
// after which the agent goes on from the remote copies.
func TestNewLaptopSameName(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		t.Parallel() // each backend is a remote of its own
		old := newMachineEnv(t, b.URL, b.S3, "laptop")
		want := old.writeSessions(0, 6)
		old.mustRun(0, "agent", "--once")

		laptop := newMachineEnv(t, b.URL, b.S3, "laptop")
		out := laptop.mustRun(1, "agent", "--once")
		msg := lastLine(out)
		for _, w := range []string{`machine "laptop" is in use`, filepath.Join(old.home, "state"), "--take-over-machine", "set machine"} {
			if !strings.Contains(msg, w) {
				t.Errorf("the refusal does not say %q:\n%s", w, msg)
			}
		}

		ageCatalog(t, openTestRepo(t, b.URL, b.S3), "laptop", time.Hour) // the old laptop is gone
		out = laptop.mustRun(0, "agent", "--once")
		if !strings.Contains(out, "taking over the machine name") {
			t.Errorf("no line says the name was taken over:\n%s", out)
		}
		states := laptop.lsStates()
		if len(states) != len(want) {
			t.Fatalf("ls lists %d sessions, want %d", len(states), len(want))
		}
		for id, st := range states {
			if st != repo.StatePresent {
				t.Errorf("ls says %s is %s after the new laptop's first pass", id, st)
			}
		}

		to := laptop.agentDir
		out = laptop.mustRun(0, "restore", "--all")
		if !strings.Contains(out, "6 restored") {
			t.Errorf("restore --all does not say '6 restored':\n%s", out)
		}
		for id, data := range want {
			if got := laptop.readSession(id); !bytes.Equal(got, data) {
				t.Errorf("%s restored into %s: %d bytes, want %d", id, to, len(got), len(data))
			}
		}
		laptop.mustRun(0, "agent", "--once")
		r := openTestRepo(t, b.URL, b.S3)
		for id, data := range want {
			if got := remoteCopy(t, r, id, "laptop"); !bytes.Equal(got, data) {
				t.Errorf("%s on the remote after the new laptop's pass: %d bytes, want %d", id, len(got), len(data))
			}
		}
		for id, st := range laptop.lsStates() {
			if st != repo.StatePresent {
				t.Errorf("ls says %s is %s", id, st)
			}
		}
	})
}

// Story 3: two machines with one name on one remote. The second refuses,
// running or --once, with one line naming the first's state dir and the
// fixes, and changes nothing on the remote; the first goes on. Taken over
// on purpose, the first is the one refused, and nothing of it is deleted.
func TestTwoMachinesOneName(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		t.Parallel() // each backend is a remote of its own
		first := newMachineEnv(t, b.URL, b.S3, "box")
		firstWant := first.writeSessions(0, 2)
		cmd, log := first.start("agent", "--interval", "100ms", "--reconcile-interval", "300ms")
		defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
		r := openTestRepo(t, b.URL, b.S3)
		for id, data := range firstWant {
			waitUntil(t, "the first machine's upload", func() bool { return remoteSize(t, r, id, "box") == int64(len(data)) })
		}
		waitUntil(t, "the first machine's catalog", func() bool { _, err := r.GetCatalog(context.Background(), "box"); return err == nil })
		time.Sleep(500 * time.Millisecond) // its confirming passes done
		before := remotetest.Objects(t, b.Client)

		second := newMachineEnv(t, b.URL, b.S3, "box")
		second.writeSessions(10, 3)
		out := second.mustRun(1, "agent", "--once")
		msg := lastLine(out)
		for _, w := range []string{`machine "box" is in use by another ompsync`, filepath.Join(first.home, "state"), "set machine", "--take-over-machine"} {
			if !strings.Contains(msg, w) {
				t.Errorf("the refusal does not say %q:\n%s", w, msg)
			}
		}
		if !strings.HasPrefix(msg, "ompsync: ") {
			t.Errorf("the refusal is not an ompsync error line: %q", msg)
		}
		runOut := second.mustRun(1, "agent")
		if !strings.Contains(lastLine(runOut), `machine "box" is in use`) {
			t.Errorf("the running agent's refusal:\n%s", runOut)
		}
		if after := remotetest.Objects(t, b.Client); !maps.EqualFunc(after, before, bytes.Equal) {
			t.Fatalf("the refused agent changed the remote\nfirst's log:\n%s", log)
		}

		// The first goes on.
		id0 := fmt.Sprintf("019a0000-0000-7000-8000-%012d", 0)
		first.appendSession(id0, entry("0000abcd", "00000000", "more on the first"))
		data := first.readSession(id0)
		waitUntil(t, "the first machine's next upload", func() bool { return remoteSize(t, r, id0, "box") == int64(len(data)) })
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()

		// Taken over on purpose: the second writes, the first is refused.
		second.mustRun(0, "agent", "--once", "--take-over-machine")
		out = first.mustRun(1, "agent", "--once")
		if !strings.Contains(lastLine(out), filepath.Join(second.home, "state")) {
			t.Errorf("the first machine's refusal does not name the second's state dir:\n%s", out)
		}
		for id, st := range second.lsStates() {
			if st != repo.StatePresent {
				t.Errorf("after the takeover ls says %s is %s", id, st)
			}
		}
	})
}

// An agent dir that vanishes while the agent runs (renamed, unmounted):
// one loud ERROR line, no deletion recorded however long it is away, and
// the sessions back up as before once it is back.
func TestAgentDirVanishesWhileRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	m := newMachineEnv(t, "file://"+filepath.Join(t.TempDir(), "remote"), backend.S3Options{}, "box")
	want := m.writeSessions(0, 6)
	cmd, log := m.start("agent", "--interval", "100ms", "--reconcile-interval", "200ms")
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	r := openTestRepo(t, m.remote, m.s3)
	for id, data := range want {
		waitUntil(t, "the first uploads", func() bool { return remoteSize(t, r, id, "box") == int64(len(data)) })
	}
	away := m.agentDir + ".away"
	if err := os.Rename(m.agentDir, away); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the error", func() bool { return strings.Contains(log.String(), "vanished in one pass") })
	time.Sleep(time.Second) // several more passes
	errors := 0
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, "vanished in one pass") {
			errors++
		}
	}
	if errors != 1 {
		t.Errorf("%d ERROR lines about the vanished folder in a second of passes, want 1:\n%s", errors, log)
	}
	for id, st := range m.lsStates() {
		if st != repo.StatePresent {
			t.Fatalf("with the agent dir away, ls says %s is %s\n%s", id, st, log)
		}
	}
	if err := os.Rename(away, m.agentDir); err != nil {
		t.Fatal(err)
	}
	id0 := fmt.Sprintf("019a0000-0000-7000-8000-%012d", 0)
	m.appendSession(id0, entry("0000abcd", "00000000", "after the folder came back"))
	data := m.readSession(id0)
	waitUntil(t, "an upload once the folder is back", func() bool { return remoteSize(t, r, id0, "box") == int64(len(data)) })
	for id, st := range m.lsStates() {
		if st != repo.StatePresent {
			t.Fatalf("after the folder came back, ls says %s is %s", id, st)
		}
	}
}

// Every command that acts on sessions ends with a totals line: a restore
// --all that restores nothing says why.
func TestTotalsLines(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	m := newMachineEnv(t, "file://"+filepath.Join(t.TempDir(), "remote"), backend.S3Options{}, "box")
	want := m.writeSessions(0, 2)
	if got := lastLine(m.mustRun(0, "agent", "--once")); got != "2 files checked: 2 uploaded, 0 already up to date" {
		t.Errorf("agent --once ends with %q", got)
	}
	if got := lastLine(m.mustRun(0, "verify")); got != "2 sessions checked: 2 ok" {
		t.Errorf("verify ends with %q", got)
	}
	for id := range want {
		os.Remove(m.sessionFile(id))
	}
	if got := lastLine(m.mustRun(0, "agent", "--once")); got != "0 files checked: 0 uploaded, 0 already up to date; 2 recorded as deleted" {
		t.Errorf("agent --once after two deletions ends with %q", got)
	}
	to := filepath.Join(t.TempDir(), "agent")
	out := m.mustRun(0, "restore", "--all", "--to", to)
	if got := lastLine(out); got != "0 restored; 2 recorded as deleted (add --include-deleted)" {
		t.Fatalf("restore --all of deleted sessions ends with %q\n%s", got, out)
	}
	out = m.mustRun(0, "restore", "--all", "--include-deleted", "--to", to, "--json")
	if got := lastLine(out); got != "2 restored" {
		t.Fatalf("restore --all --include-deleted --json ends with %q\n%s", got, out)
	}
	out = m.mustRun(0, "restore", "--all", "--include-deleted", "--force", "--to", to) // written a moment ago
	if got := lastLine(out); got != "0 restored; 2 already up to date" {
		t.Fatalf("restore again ends with %q\n%s", got, out)
	}
}

// A folder and a file the agent cannot read, after it backed them up (as a
// user who cannot read them, not root): nothing is recorded as deleted,
// --once exits 1 naming both paths, and once readable all is as before.
func TestUnreadableIsNotDeleted(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	dir, bin, cred := unprivileged(t)
	home := filepath.Join(dir, "home")
	m := &machineEnv{t: t, home: home, agentDir: filepath.Join(home, ".omp", "agent"), remote: "file://" + filepath.Join(home, "remote"), machine: "box"}
	want := m.writeSessions(0, 3)
	for i := 3; i < 6; i++ {
		id := fmt.Sprintf("019a0000-0000-7000-8000-%012d", i)
		p := filepath.Join(m.agentDir, "sessions", "-private", "2026-11-30T00-00-00-000Z_"+id+".jsonl")
		body := titleSlotLine("") + fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-11-30T00:00:00Z","cwd":"/p"}`+"\n", id) + entry("00000001", "", "private")
		writeFile(t, p, body, 0o600)
		want[id] = []byte(body)
	}
	if err := os.MkdirAll(filepath.Join(home, "remote"), 0o700); err != nil {
		t.Fatal(err)
	}
	chownAll(t, home, cred)
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = m.environ()
		runAs(cmd, cred)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	once := func() (int, string) { t.Helper(); return run("agent", "--once") }
	if code, out := once(); code != 0 {
		t.Fatalf("first pass: exit %d\n%s", code, out)
	}
	private := filepath.Join(m.agentDir, "sessions", "-private")
	locked := m.sessionFile(fmt.Sprintf("019a0000-0000-7000-8000-%012d", 0))
	if err := os.Chmod(private, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	// Changed while unreadable, so the agent must read it.
	if err := os.Chtimes(locked, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	code, out := once()
	if code != 1 {
		t.Errorf("agent --once with an unreadable folder and file: exit %d, want 1\n%s", code, out)
	}
	for _, w := range []string{private, locked, "permission denied"} {
		if !strings.Contains(out, w) {
			t.Errorf("the output does not name %q:\n%s", w, out)
		}
	}
	// status does not call what it cannot see "nothing pending".
	code, out = run("status")
	if code != 1 || !strings.Contains(out, "permission denied") || !strings.Contains(out, "status cannot tell what") {
		t.Errorf("status with an unreadable folder and file: exit %d, want 1 saying what it cannot read\n%s", code, out)
	}
	r := openTestRepo(t, m.remote, m.s3)
	states := func() map[string]string {
		c, err := r.GetCatalog(context.Background(), "box")
		if err != nil {
			t.Fatal(err)
		}
		st := map[string]string{}
		for _, e := range c.Sessions {
			st[e.ID] = e.State
		}
		return st
	}
	for id, st := range states() {
		if st != repo.StatePresent {
			t.Errorf("with its folder or file unreadable, %s is recorded %s", id, st)
		}
	}
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(locked, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := once(); code != 0 {
		t.Fatalf("once readable again: exit %d\n%s", code, out)
	}
	st := states()
	if len(st) != len(want) {
		t.Fatalf("catalog lists %d sessions, want %d", len(st), len(want))
	}
	for id, data := range want {
		if st[id] != repo.StatePresent {
			t.Errorf("%s is %s", id, st[id])
		}
		if got := remoteCopy(t, r, id, "box"); !bytes.Equal(got, data) {
			t.Errorf("%s on the remote: %d bytes, want %d", id, len(got), len(data))
		}
	}
}

// --confirm-deletions confirms the deletions of one pass: it goes with
// --once.
func TestConfirmDeletionsNeedsOnce(t *testing.T) {
	env, home := newEnv(t)
	env["OMPSYNC_AGENT_DIR"] = filepath.Join(home, "agent")
	r := runWith(t, env, "agent", "--confirm-deletions")
	if r.code != 2 || !strings.Contains(oneErrorLine(t, r), "--confirm-deletions goes with --once") {
		t.Fatalf("agent --confirm-deletions: exit %d, %q", r.code, r.stderr)
	}
}

// A remote set by mistake to a folder of other data, or to the home
// folder (which holds the agent's folder, and often only hidden names), is
// refused before anything is written into it: exit 1 and a line that
// names what is wrong and what to set. A new folder inside it works.
func TestAgentRefusesFolderOfOtherData(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	m := newMachineEnv(t, "", backend.S3Options{}, "box")
	want := m.writeSessions(0, 1)
	files := filepath.Join(m.home, "files")
	writeFile(t, filepath.Join(files, "Documents", "notes.txt"), "mine\n", 0o600)
	for _, tc := range []struct{ dir, why string }{
		{files, "the remote holds data that is not ompsync's, and no repository"},
		{m.home, "the remote folder " + m.home + " and omp's folder " + m.agentDir + " lie one inside the other"},
		{filepath.Join(m.agentDir, "backup"), "and omp's folder " + m.agentDir + " lie one inside the other"},
	} {
		m.remote = "file://" + tc.dir
		out := m.mustRun(1, "agent", "--once")
		if !strings.Contains(out, tc.why) {
			t.Errorf("agent --once with the remote %s says\n%s\nwhich lacks %q", tc.dir, out, tc.why)
		}
		for _, name := range []string{repo.MarkerKey, "v1"} {
			if _, err := os.Stat(filepath.Join(tc.dir, name)); !os.IsNotExist(err) {
				t.Errorf("%s written into %s: %v", name, tc.dir, err)
			}
		}
	}
	m.remote = "file://" + filepath.Join(m.home, "backups")
	m.mustRun(0, "agent", "--once")
	restoredAll(t, m, want)
}

// A file remote on the disk of the sessions (the default remote is one)
// keeps a deleted session, not a lost disk: the agent says so, and what to
// set. A remote on another disk is not remarked on.
func TestAgentSaysRemoteOnSameDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	m := newMachineEnv(t, "", backend.S3Options{}, "box")
	m.writeSessions(0, 1)
	const note = "is on the same disk (file system) as"
	m.remote = "file://" + filepath.Join(m.home, "remote")
	if out := m.mustRun(0, "agent", "--once"); !strings.Contains(out, note) || !strings.Contains(out, "set remote to a folder on another disk, or to an S3 bucket") {
		t.Errorf("agent --once with its remote beside the sessions says\n%s\nwhich lacks a note that it is on their disk", out)
	}
	m.remote = "file://" + filepath.Join(tmpfstest.Mount(t, "8m"), "remote")
	if out := m.mustRun(0, "agent", "--once"); strings.Contains(out, note) {
		t.Errorf("agent --once with its remote on another disk says\n%s", out)
	}
}

// A session whose last line lacks its newline (its writer stopped
// mid-line) is pending by that line, which the agent does not upload:
// status says so, and that it is the writer's, not the remote's.
func TestStatusUnfinishedLine(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	m := newMachineEnv(t, "file://"+filepath.Join(t.TempDir(), "remote"), backend.S3Options{}, "box")
	for id := range m.writeSessions(0, 1) {
		f, err := os.OpenFile(m.sessionFile(id), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(`{"type":"message","id":"beef0001","parentId":null,"message":{"role":"assistant","content":"cut sh`); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	m.mustRun(0, "agent", "--once")
	out := m.mustRun(1, "status", "--max-lag", "1ns")
	for _, w := range []string{"(last line unfinished)", "1 file(s) end in a line without its newline, pending for more than 1ns", "stopped mid-line"} {
		if !strings.Contains(out, w) {
			t.Errorf("status with an unfinished last line says\n%s\nwhich lacks %q", out, w)
		}
	}
}

// A new machine that pulls before its agent has ever run has no agent
// folder yet: `agent --once --pull` makes it and pulls the other machine's
// sessions into it, byte for byte (docs/GUIDE.md).
func TestPullMakesANewMachinesAgentFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	remoteURL := "file://" + t.TempDir()
	laptop := newMachineEnv(t, remoteURL, backend.S3Options{}, "laptop")
	want := laptop.writeSessions(0, 2)
	laptop.mustRun(0, "agent", "--once")
	desk := newMachineEnv(t, remoteURL, backend.S3Options{}, "desk")
	if err := os.RemoveAll(filepath.Join(desk.home, ".omp")); err != nil {
		t.Fatal(err)
	}
	desk.mustRun(0, "agent", "--once", "--pull")
	got := map[string][]byte{}
	matches, _ := filepath.Glob(filepath.Join(desk.agentDir, "sessions", "*", "*.jsonl"))
	for _, p := range matches {
		b, _ := os.ReadFile(p)
		got[idOf(p)] = b
	}
	if !maps.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("the pull put %d sessions into the new agent folder, want the laptop's %d byte for byte", len(got), len(want))
	}
}
