package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// smallSession is session i of a test: a title slot, a header and a line.
func smallSession(i int) (rel, id string, data []byte) {
	id = fmt.Sprintf("019a0000-0000-7000-8000-%012d", i)
	rel = fmt.Sprintf("sessions/-work-%d/2026-11-30T00-00-00-000Z_%s.jsonl", i%3, id)
	data = append(titleSlot(fmt.Sprintf("session %d", i)), fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-11-30T00:00:00Z","cwd":"/w"}`+"\n", id)...)
	data = append(data, entryLine(fmt.Sprintf("%08x", i), "", fmt.Sprintf("work in session %d", i))...)
	return rel, id, data
}

// writeSessions writes sessions 0..n-1 and returns their ids by path.
func (e *env) writeSessions(n int) map[string]string { return e.writeSessionsFrom(0, n) }

// writeSessionsFrom writes sessions from..from+n-1.
func (e *env) writeSessionsFrom(from, n int) map[string]string {
	ids := map[string]string{}
	for i := from; i < from+n; i++ {
		rel, id, data := smallSession(i)
		e.writeRename(rel, data)
		ids[rel] = id
	}
	return ids
}

// logTo makes e's agents log into a buffer as well as the test log.
func (e *env) logTo() *syncLog {
	l := &syncLog{}
	e.opts.Logger = slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return l
}

// syncLog is a log the agent writes while the test reads it.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// states returns every session's state in this machine's catalog.
func (e *env) states() map[string]string {
	e.t.Helper()
	c, err := e.repo.GetCatalog(context.Background(), e.machine)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range c.Sessions {
		out[s.ID] = s.State
	}
	return out
}

func countState(states map[string]string, want string) int {
	n := 0
	for _, s := range states {
		if s == want {
			n++
		}
	}
	return n
}

// The remote changes under a state dir (another bucket, prefix or folder;
// a bucket recreated): the agent does not believe its state, checks every
// file against the new remote and uploads what is missing, in one
// --once, saying why in one line; the new remote then holds every file.
func TestStateOfAnotherRemote(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, newFileClient(t))
		ids := e.writeSessions(4)
		blob := bytes.Repeat([]byte("blob"), 100)
		blobName := repo.HashHex(blob)
		e.write("blobs/"+blobName, blob)
		gone, goneID, goneData := smallSession(9)
		e.writeRename(gone, goneData)
		e.once()
		os.Remove(e.path(gone))
		e.once() // recorded as deleted on the first remote

		// The same state dir, another remote.
		e.client = &countingClient{Client: c}
		e.repo = repo.New(e.client, repo.NewZstd())
		logs := e.logTo()
		e.once()
		if n := strings.Count(logs.String(), "not trusting the local state"); n != 1 {
			t.Fatalf("%d lines say why the state is not trusted, want 1:\n%s", n, logs)
		}
		if !strings.Contains(logs.String(), "describes another remote") {
			t.Errorf("the reason does not say the state describes another remote:\n%s", logs)
		}
		for rel, id := range ids {
			e.assertRemoteEquals(rel, id)
		}
		if b, err := e.repo.GetBlob(context.Background(), blobName, 1<<20); err != nil || !bytes.Equal(b, blob) {
			t.Errorf("blob on the new remote: %v", err)
		}
		st := e.states()
		if len(st) != len(ids) || countState(st, repo.StatePresent) != len(ids) {
			t.Errorf("new remote's catalog: %v; want the %d present sessions (a session deleted before is on the other remote)", st, len(ids))
		}
		if _, ok := st[goneID]; ok {
			t.Errorf("the catalog lists %s, whose bytes are on the other remote only", goneID)
		}
		// Trusted from now on: an unchanged pass uploads nothing.
		e.client.takePuts()
		e.once()
		if p := chunkPuts(e.client.takePuts()); len(p) != 0 {
			t.Errorf("a second pass uploaded %v", p)
		}
	})
}

// The remote lost this machine's catalog and objects while the state says
// they are up: the agent notices at start and uploads them again.
func TestCatalogLostReconciled(t *testing.T) {
	c := newFileClient(t)
	e := newEnv(t, c)
	ids := e.writeSessions(3)
	e.once()
	ctx := context.Background()
	for k := range remotetest.Objects(t, c) {
		if k != repo.MarkerKey {
			if err := c.Delete(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
	}
	logs := e.logTo()
	e.once()
	if !strings.Contains(logs.String(), "holds no catalog of this machine") {
		t.Errorf("no line says why:\n%s", logs)
	}
	for rel, id := range ids {
		e.assertRemoteEquals(rel, id)
	}
}

// A catalog older than the one this state wrote (the remote lost the
// newer recent object) is not trusted either.
func TestCatalogOlderThanStateReconciled(t *testing.T) {
	c := newFileClient(t)
	e := newEnv(t, c)
	ids := e.writeSessions(2)
	e.once()
	ctx := context.Background()
	before := remotetest.Objects(t, c)
	e.writeSessions(3) // one more session
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Once(ctx); err != nil {
		t.Fatal(err)
	}
	a.state.changed.all = true // as a later whole save does: it records CatalogAt
	if err := a.state.persist(e.stateDir); err != nil {
		t.Fatal(err)
	}
	a.Close()
	// The remote goes back to what it held after the first pass.
	for k := range remotetest.Objects(t, c) {
		if b, ok := before[k]; ok {
			if err := c.Put(ctx, k, b, remote.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		} else if err := c.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	logs := e.logTo()
	e.once()
	if !strings.Contains(logs.String(), "is older than the one this state wrote") {
		t.Errorf("no line says why:\n%s", logs)
	}
	rel, id, _ := smallSession(2)
	ids[rel] = id
	for rel, id := range ids {
		e.assertRemoteEquals(rel, id)
	}
}

// A new laptop with the old one's name and an empty agent dir: its first
// pass records nothing as deleted, the catalog still lists every session
// as the old laptop left it, and a session it then sees and loses is a
// deletion.
func TestRebuiltStateDeletesNothing(t *testing.T) {
	c := newFileClient(t)
	old := newEnv(t, c)
	ids := old.writeSessions(6)
	old.once()
	before := old.states()

	// The new laptop has sessions of its own, more than the old one's.
	laptop := newEnv(t, c)
	own := laptop.writeSessionsFrom(100, 10)
	laptop.opts.TakeOverMachine = true
	laptop.once()
	for _, id := range own {
		before[id] = repo.StatePresent
	}
	if got := laptop.states(); !maps.Equal(got, before) {
		t.Fatalf("after the new laptop's first pass the catalog says %v, want %v", got, before)
	}
	laptop.opts.TakeOverMachine = false
	laptop.once()
	if got := laptop.states(); !maps.Equal(got, before) {
		t.Fatalf("after a second pass: %v", got)
	}
	st, err := Status(StatusOptions{AgentDir: laptop.agentDir, StateDir: laptop.stateDir, Now: time.Now()})
	if err != nil || len(st) != len(own) {
		t.Fatalf("status lists %d files, want this machine's %d (not the old laptop's): %v", len(st), len(own), err)
	}
	// One comes back (restored), then is deleted: that is a deletion.
	var rel, id string
	for rel, id = range ids {
		break
	}
	laptop.writeRename(rel, old.read(rel))
	laptop.once()
	os.Remove(laptop.path(rel))
	laptop.once()
	if got := laptop.states()[id]; got != repo.StateDeleted {
		t.Fatalf("a session seen here and then removed is %q, want deleted", got)
	}
	if n := countState(laptop.states(), repo.StateDeleted); n != 1 {
		t.Fatalf("%d sessions recorded as deleted, want 1", n)
	}
}

// Two agents with one machine name: the second refuses before writing
// anything, naming the other host and state dir and both ways out; the
// first goes on. Taking the name over is explicit, and then the first one
// is the one refused.
func TestMachineInUse(t *testing.T) {
	c := newFileClient(t)
	a := newEnv(t, c)
	a.opts.Hostname = "laptop-a"
	a.writeSessions(2)
	a.once()

	b := newEnv(t, c)
	b.opts.Hostname = "laptop-b"
	b.writeSessions(4)
	snap := remotetest.Objects(t, c)
	err := b.tryOnce()
	if !errors.Is(err, ErrMachineInUse) {
		t.Fatalf("second agent with the same name: %v, want ErrMachineInUse", err)
	}
	for _, want := range []string{`machine "laptop"`, `host "laptop-a"`, a.stateDir, "set machine", "--take-over-machine"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the error is not one line: %q", err)
	}
	if after := remotetest.Objects(t, c); !maps.EqualFunc(after, snap, bytes.Equal) {
		t.Fatalf("the refused agent changed the remote")
	}
	a.once() // the first one is not disturbed

	// Taken over on purpose: b writes, a is refused from then on.
	b.opts.TakeOverMachine = true
	b.once()
	b.opts.TakeOverMachine = false
	b.once()
	if err := a.tryOnce(); !errors.Is(err, ErrMachineInUse) || !strings.Contains(err.Error(), `host "laptop-b"`) {
		t.Fatalf("the agent whose name was taken: %v", err)
	}
	if n := countState(b.states(), repo.StateDeleted); n != 0 {
		t.Fatalf("the takeover recorded %d deletions", n)
	}
}

// A new state dir takes over a name whose last writer has been silent for
// longer than a running agent ever is, without being asked.
func TestMachineTakenOverAfterSilence(t *testing.T) {
	c := newFileClient(t)
	a := newEnv(t, c)
	a.opts.Hostname = "old-laptop"
	a.writeSessions(2)
	a.once()
	b := newEnv(t, c)
	b.opts.Now = func() time.Time { return time.Now().Add(inUseWindow - time.Minute) }
	if err := b.tryOnce(); !errors.Is(err, ErrMachineInUse) {
		t.Fatalf("%v after the last write: %v, want refused", inUseWindow-time.Minute, err)
	}
	b.opts.Now = func() time.Time { return time.Now().Add(inUseWindow + time.Minute) }
	logs := b.logTo()
	if err := b.tryOnce(); err != nil {
		t.Fatalf("%v after the last write: %v", inUseWindow+time.Minute, err)
	}
	if !strings.Contains(logs.String(), "taking over the machine name") {
		t.Errorf("no line says the name was taken over:\n%s", logs)
	}
	w, _, err := b.repo.CatalogWriter(context.Background(), "laptop")
	if err != nil || w == nil || w.StateDir != b.stateDir {
		t.Fatalf("catalog writer after the takeover: %+v, %v", w, err)
	}
}

// runThenTakeName runs a's agent until its first pass, then has an agent
// on host "intruder" take its name on c; what the running agent's Run
// returns comes on done.
func runThenTakeName(t *testing.T, a *env, c remote.Client) (done <-chan error) {
	t.Helper()
	ag, err := New(a.repo, a.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ag.Close() })
	ran := make(chan error, 1)
	go func() { ran <- ag.Run(t.Context()) }()
	waitFor(t, "the first pass", func() bool { _, err := a.repo.GetCatalog(t.Context(), "laptop"); return err == nil })

	b := newEnv(t, c)
	b.opts.Hostname = "intruder"
	b.opts.TakeOverMachine = true
	b.once()
	return ran
}

// A running agent reads back, once per heartbeat, who last wrote its
// catalog: when another agent took the name, it stops with the error.
func TestRunningAgentStopsWhenNameTaken(t *testing.T) {
	c := newFileClient(t)
	a := newEnv(t, c)
	a.writeSessions(2)
	a.opts.Interval = 20 * time.Millisecond
	a.opts.ReconcileInterval = 50 * time.Millisecond
	var skew atomic.Int64
	a.opts.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	done := runThenTakeName(t, a, c)
	skew.Store(int64(heartbeatEvery + time.Minute))
	select {
	case err := <-done:
		if !errors.Is(err, ErrMachineInUse) || !strings.Contains(err.Error(), `"intruder"`) {
			t.Fatalf("the running agent stopped with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the running agent did not notice another agent took its name")
	}
}

// A running agent puts its recent object once per heartbeat, even idle,
// so another state dir can tell it is running.
func TestHeartbeat(t *testing.T) {
	c := newFileClient(t)
	e := newEnv(t, c)
	e.writeSessions(1)
	e.once()
	_, at1, err := e.repo.CatalogWriter(t.Context(), "laptop")
	if err != nil {
		t.Fatal(err)
	}
	e.opts.Now = func() time.Time { return time.Now().Add(heartbeatEvery + time.Minute) }
	e.client.takePuts()
	e.once()
	w, at2, err := e.repo.CatalogWriter(t.Context(), "laptop")
	if err != nil || w == nil || !at2.After(at1) {
		t.Fatalf("an idle pass a heartbeat later: writer %+v at %v (before %v), %v", w, at2, at1, err)
	}
	if p := chunkPuts(e.client.takePuts()); len(p) != 0 {
		t.Fatalf("the heartbeat uploaded chunks %v", p)
	}
	// Within the heartbeat, an idle pass puts nothing.
	e.opts.Now = nil
	e.once()
	if p := e.client.takePuts(); len(p) != 0 {
		t.Fatalf("an idle pass within the heartbeat put %v", p)
	}
}

// Most sessions vanish in one pass (the sessions folder renamed, most of
// it gone): nothing is recorded as deleted, the pass fails with one clear
// error, and the sessions are simply there again when the folder is back.
// Deleted on purpose, the user confirms; a few at a time are deletions.
func TestVanishedTree(t *testing.T) {
	c := newFileClient(t)
	e := newEnv(t, c)
	ids := e.writeSessions(10)
	e.once()
	sessions := e.path("sessions")
	if err := os.Rename(sessions, sessions+".away"); err != nil {
		t.Fatal(err)
	}
	logs := e.logTo()
	err := e.tryOnce()
	if !errors.Is(err, ErrVanished) || !strings.Contains(err.Error(), "--confirm-deletions") || !strings.Contains(err.Error(), sessions) {
		t.Fatalf("pass with the sessions folder gone: %v", err)
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
		t.Errorf("%d ERROR lines, want 1:\n%s", n, logs)
	}
	if n := countState(e.states(), repo.StateDeleted); n != 0 {
		t.Fatalf("%d sessions recorded as deleted with their folder gone", n)
	}
	if err := os.Rename(sessions+".away", sessions); err != nil {
		t.Fatal(err)
	}
	e.once()
	if n := countState(e.states(), repo.StatePresent); n != len(ids) {
		t.Fatalf("%d sessions present once the folder is back, want %d", n, len(ids))
	}

	// Seven of ten gone at once with their folders (-work-0 and -work-1):
	// refused. Confirmed, they are deletions.
	for _, d := range []string{"sessions/-work-0", "sessions/-work-1"} {
		if err := os.RemoveAll(e.path(d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.tryOnce(); !errors.Is(err, ErrVanished) || !strings.Contains(err.Error(), "7 of the 10 sessions") {
		t.Fatalf("seven of ten sessions gone at once with their folders: %v", err)
	}
	if n := countState(e.states(), repo.StateDeleted); n != 0 {
		t.Fatalf("%d deletions recorded from a vanished tree", n)
	}
	e.opts.ConfirmDeletions = true
	e.once()
	e.opts.ConfirmDeletions = false
	if n := countState(e.states(), repo.StateDeleted); n != 7 {
		t.Fatalf("confirmed: %d deletions, want 7", n)
	}
	e.writeSessionsFrom(10, 6) // now 9 present, all in -work-*
	e.once()
	// Files deleted from folders that are still there are deletions,
	// however many go at once (omp's /delete, a user's rm).
	var gone []string
	for i := 10; i < 16; i++ {
		rel, id, _ := smallSession(i)
		os.Remove(e.path(rel))
		gone = append(gone, id)
	}
	e.once()
	st := e.states()
	for _, id := range gone {
		if st[id] != repo.StateDeleted {
			t.Errorf("%s removed from its folder is %q, want deleted", id, st[id])
		}
	}
}

// A file the agent cannot reach for another reason than "it does not
// exist" (here its folder replaced by a file: ENOTDIR; the process tests
// cover permissions) is an error for that path, reported once, and never
// a deletion.
func TestUnreachableIsNotGone(t *testing.T) {
	c := newFileClient(t)
	e := newEnv(t, c)
	ids := e.writeSessions(6)
	e.once()
	rel, _, _ := smallSession(0)
	dir := e.path(rel[:strings.LastIndexByte(rel, '/')])
	aside := e.path("aside")
	if err := os.Rename(dir, aside); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a folder"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := e.logTo()
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	err1 := a.Once(context.Background())
	err2 := a.pass(context.Background(), true)
	a.Close()
	for _, err := range []error{err1, err2} {
		if err == nil || !strings.Contains(err.Error(), "not a directory") || !strings.Contains(err.Error(), dir) {
			t.Fatalf("pass with a session's folder replaced by a file: %v\n%s", err, logs)
		}
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n == 0 || n > 2 {
		t.Errorf("%d ERROR lines over two passes, want each path once:\n%s", n, logs)
	}
	if n := countState(e.states(), repo.StateDeleted); n != 0 {
		t.Fatalf("%d sessions recorded as deleted", n)
	}
	os.Remove(dir)
	if err := os.Rename(aside, dir); err != nil {
		t.Fatal(err)
	}
	e.once()
	if n := countState(e.states(), repo.StatePresent); n != len(ids) {
		t.Fatalf("%d present once reachable again, want %d", n, len(ids))
	}
}

// StateOrigin names the remote a state describes.
func TestStateOrigin(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	e.opts.Remote = "file:///somewhere"
	e.writeSessions(1)
	e.once()
	o, err := StateOrigin(e.stateDir)
	if err != nil || o.Remote != "file:///somewhere" || o.RepoID != e.repo.ID() || o.RepoID == "" {
		t.Fatalf("origin %+v, %v; want the remote and id %q", o, err, e.repo.ID())
	}
}

// A running agent that reads its catalog back (confirmCatalog) and finds
// another agent's stamp there takes it as the name taken, not as a lost
// put: it stops at its next pass, long before the heartbeat, and never
// writes over the other agent's catalog.
func TestReadBackFindsNameTaken(t *testing.T) {
	c := newFileClient(t)
	a := newEnv(t, c)
	a.writeSessions(2)
	a.opts.Interval = 20 * time.Millisecond
	a.opts.ReconcileInterval = 50 * time.Millisecond
	a.opts.AuditInterval = 100 * time.Millisecond // read back at every reconcile
	done := runThenTakeName(t, a, c)
	select {
	case err := <-done:
		if !errors.Is(err, ErrMachineInUse) || !strings.Contains(err.Error(), `"intruder"`) {
			t.Fatalf("the running agent stopped with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the running agent did not notice, reading its catalog back, that another agent took its name")
	}
	w, _, err := a.repo.CatalogWriter(t.Context(), "laptop")
	if err != nil || w == nil || w.Host != "intruder" {
		t.Fatalf("the catalog's last writer: %+v, %v; want the intruder's, not written over", w, err)
	}
}
