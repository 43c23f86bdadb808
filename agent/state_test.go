package agent

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ompsync/ompsync/atomicfile"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// The state is a cache: when it is lost, the agent rebuilds it from the
// remote without uploading again what is already there, and goes on
// appending to the same generation.
func TestLostStateRebuiltFromRemote(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		e.writeRename(ompRel, corpus(t, ompFile))
		art := strings.TrimSuffix(ompRel, ".jsonl") + "/subagents/1.jsonl"
		e.write(art, corpus(t, "pi-v3-small-compactions_agent-sessions-fixture.jsonl"))
		gone := "sessions/-x/2026-01-01T00-00-00-000Z_gone0000-0000-0000-0000-000000000000.jsonl"
		e.writeRename(gone, corpus(t, "pi-v3-small-compactions_agent-sessions-fixture.jsonl"))
		e.once()
		os.Remove(e.path(gone))
		e.once()
		e.client.takePuts()

		if err := os.RemoveAll(e.stateDir); err != nil {
			t.Fatal(err)
		}
		e.appendTo(ompRel, entryLine("beef0001", "", "after the state was lost"))
		e.once()
		puts := e.client.takePuts()
		if ch := chunkPuts(puts); len(ch) != 1 {
			t.Fatalf("after losing the state, uploaded chunks %v; want only the appended range", ch)
		}
		e.assertRemoteEquals(ompRel, ompID)
		if n := len(e.generations(ompID, repo.SessionStream)); n != 1 {
			t.Fatalf("%d generations after a state rebuild, want 1", n)
		}
		if st := e.catalogEntry("019e19b4-eb48-746a-aa6b-8dfcfa37954b").State; st != repo.StateDeleted {
			t.Fatalf("the deleted session is %q after the rebuild, want deleted", st)
		}
	})
}

// A damaged state file is set aside with a clear log line and rebuilt.
func TestDamagedStateRebuilt(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	e.writeRename(ompRel, corpus(t, ompFile))
	e.once()
	if err := os.WriteFile(filepath.Join(e.stateDir, stateFile), []byte(`{"v":1,"streams":{"x`), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	e.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	e.client.takePuts()
	e.appendTo(ompRel, entryLine("beef0002", "", "x"))
	e.once()
	if !strings.Contains(logs.String(), "local state is damaged") {
		t.Fatalf("no message about the damaged state:\n%s", logs.String())
	}
	if _, err := os.Stat(filepath.Join(e.stateDir, stateFile+".damaged")); err != nil {
		t.Fatalf("damaged state not kept aside: %v", err)
	}
	if ch := chunkPuts(e.client.takePuts()); len(ch) != 1 {
		t.Fatalf("uploaded %v, want only the appended range", ch)
	}
	e.assertRemoteEquals(ompRel, ompID)
}

// status compares what is on disk with what was uploaded.
func TestStatus(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	e.writeRename(ompRel, corpus(t, ompFile))
	e.once()
	st, err := Status(StatusOptions{AgentDir: e.agentDir, StateDir: e.stateDir, Now: time.Now()})
	if err != nil || len(st) != 1 || st[0].Pending != 0 || st[0].Uploaded != int64(len(corpus(t, ompFile))) {
		t.Fatalf("status after a pass: %+v, %v", st, err)
	}
	line := entryLine("beef0003", "", "pending")
	e.appendTo(ompRel, line)
	st, _ = Status(StatusOptions{AgentDir: e.agentDir, StateDir: e.stateDir, Now: time.Now().Add(10 * time.Minute)})
	if st[0].Pending != int64(len(line)) || st[0].PendingAge < 10*time.Minute {
		t.Fatalf("status with pending bytes: %+v", st[0])
	}
	if _, err := Status(StatusOptions{AgentDir: e.agentDir, StateDir: t.TempDir(), Now: time.Now()}); err == nil || !strings.Contains(err.Error(), "no agent state") {
		t.Fatalf("status without state: %v", err)
	}
	// Its sessions folder gone (a disk not mounted): not "nothing pending".
	if err := os.Rename(filepath.Join(e.agentDir, "sessions"), filepath.Join(e.agentDir, "sessions.away")); err != nil {
		t.Fatal(err)
	}
	st, err = Status(StatusOptions{AgentDir: e.agentDir, StateDir: e.stateDir, Now: time.Now()})
	if err == nil || !strings.Contains(err.Error(), "has no sessions/ folder, though the agent backed up files from it") {
		t.Fatalf("status with the sessions folder gone: %+v, %v", st, err)
	}
}

// A session idle for a day after its upload, then written to, has waited
// since the agent was last up to date, not since the upload: status (and
// the pending metric) raised a day-old alarm over a line written seconds
// before. A pass that fails is not up to date: the bytes it left behind
// count from the last pass that was.
func TestPendingSinceUpToDate(t *testing.T) {
	var allowed atomic.Int64
	allowed.Store(1 << 30)
	e := newEnv(t, chunkCutter{newFileClient(t), &allowed})
	e.writeRename(ompRel, corpus(t, ompFile))
	synced := time.Now().Truncate(time.Second)
	e.opts.Now = func() time.Time { return synced }
	e.once()
	idle := synced.Add(24 * time.Hour) // a day of passes with nothing to do
	e.opts.Now = func() time.Time { return idle }
	e.once()

	line := entryLine("beef0004", "", "written a day after the upload")
	e.appendTo(ompRel, line)
	st, err := Status(StatusOptions{AgentDir: e.agentDir, StateDir: e.stateDir, Now: idle.Add(10 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if want := 10*time.Second + upToDateSlack; st[0].Pending != int64(len(line)) || !st[0].LastSynced.Equal(synced) || st[0].PendingAge != want || st[0].UnfinishedLine {
		t.Fatalf("status of a line written 10 s ago: pending %d, last synced %v, pending for %v; want %d, %v, %v",
			st[0].Pending, st[0].LastSynced, st[0].PendingAge, len(line), synced, want)
	}

	// The line cannot go up an hour later: still pending since the day before.
	allowed.Store(0)
	e.opts.Now = func() time.Time { return idle.Add(time.Hour) }
	if err := e.tryOnce(); err == nil {
		t.Fatal("agent --once succeeded with chunk puts failing")
	}
	st, err = Status(StatusOptions{AgentDir: e.agentDir, StateDir: e.stateDir, Now: idle.Add(time.Hour + 10*time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Hour + 10*time.Second + upToDateSlack; st[0].PendingAge != want {
		t.Fatalf("after a failed pass: pending for %v, want %v", st[0].PendingAge, want)
	}
}

// A partial last line is not settled, so the passes that leave it are up
// to date; it has still waited since before them, and status says so.
func TestPendingPartialLineNotUpToDate(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	data := corpus(t, ompFile)
	partial := []byte(`{"type":"message","id":"beef0005","parentId":null,"message":{"role":"assistant","content":"still being wri`)
	e.writeRename(ompRel, append(bytes.Clone(data), partial...))
	synced := time.Now().Truncate(time.Second)
	e.opts.Now = func() time.Time { return synced }
	e.once()
	idle := synced.Add(24 * time.Hour)
	e.opts.Now = func() time.Time { return idle }
	e.once()
	st, err := Status(StatusOptions{AgentDir: e.agentDir, StateDir: e.stateDir, Now: idle.Add(10 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if want := 24*time.Hour + 10*time.Second; st[0].Pending != int64(len(partial)) || st[0].PendingAge != want || !st[0].UnfinishedLine {
		t.Fatalf("a partial line left a day: pending %d for %v (unfinished line %v), want %d for %v, an unfinished line",
			st[0].Pending, st[0].PendingAge, st[0].UnfinishedLine, len(partial), want)
	}
}

// The running agent's idle passes mark it up to date only while every
// folder is watched: with one that is not, a change there shows only at
// a full scan, and a pass with no event to follow proves nothing.
func TestIdlePassesUpToDateOnlyWhenWatched(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	e.opts.Interval = 20 * time.Millisecond
	e.opts.ReconcileInterval = time.Hour
	e.writeRename(ompRel, corpus(t, ompFile))
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent run: %v", err)
		}
		a.Close()
	}()
	mark := func() time.Time { return readUpToDate(e.stateDir) }
	waitFor(t, "the first mark", func() bool { return !mark().IsZero() })
	first := mark()
	waitFor(t, "idle passes moving the mark", func() bool { return mark().After(first) })

	a.watchGaps.Store(true)         // as when a folder could not be watched
	time.Sleep(5 * e.opts.Interval) // a pass under way may still mark
	held := mark()
	time.Sleep(20 * e.opts.Interval)
	if got := mark(); !got.Equal(held) {
		t.Errorf("idle passes moved the mark from %v to %v with a folder not watched", held, got)
	}
}

// A state dir other users can read is used, with a warning.
func TestStateDirPermissionsWarned(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	if err := os.Chmod(e.stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	e.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	e.once()
	if !strings.Contains(logs.String(), "can be read by other users") {
		t.Fatalf("no warning for a 0755 state dir:\n%s", logs.String())
	}
}

// The state file holds each stream once: it is read at every start, and
// a stream written twice doubled the file and its load time.
func TestStateFileHoldsEachStreamOnce(t *testing.T) {
	dir := t.TempDir()
	s := newState("laptop")
	for i := range 3 {
		id := fmt.Sprintf("01a113d2-0000-7000-986b-d3ac6e3f000%d", i)
		s.Streams[streamKey(id, repo.SessionStream)] = &FileState{SessionID: id, Stream: repo.SessionStream, Path: "sessions/x/" + id + ".jsonl", Offset: 10}
	}
	if err := s.save(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	for k := range s.Streams {
		if n := bytes.Count(b, []byte(`"`+k+`"`)); n != 1 {
			t.Errorf("stream %s is %d times in the state file", k, n)
		}
	}
	got, err := LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Streams) != len(s.Streams) {
		t.Fatalf("loaded %d streams, saved %d", len(got.Streams), len(s.Streams))
	}
}

// An agent starting after one killed mid-save removes the state's temp
// file that run left once it is a day old; a younger one stays.
func TestStaleStateTempRemoved(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	e.writeRename(ompRel, corpus(t, ompFile))
	e.once()
	stale := filepath.Join(e.stateDir, ".ompsync-state.json.123.tmp")
	young := filepath.Join(e.stateDir, ".ompsync-state.json.456.tmp")
	for _, p := range []string{stale, young} {
		if err := os.WriteFile(p, []byte(`{"half":`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-atomicfile.StaleAfter - time.Minute)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	e.once()
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("the day-old temp file is still there")
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("the young temp file was removed: %v", err)
	}

	// A temp folder that links to another disk stays a link; what a
	// crashed process left there goes.
	elsewhere := t.TempDir()
	leftover := filepath.Join(elsewhere, "leftover")
	if err := os.WriteFile(leftover, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(e.stateDir, "tmp")
	if err := os.RemoveAll(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, tmp); err != nil {
		t.Fatal(err)
	}
	e.once()
	if fi, err := os.Lstat(tmp); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the linked temp folder was not kept as a link: %v", err)
	}
	if _, err := os.Stat(leftover); err == nil {
		t.Errorf("what a crashed process left in the linked temp folder is still there")
	}
}
