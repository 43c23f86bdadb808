package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ompsync/ompsync/compact"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// runAgent starts a long-running agent; stop cancels it and waits for its
// flush.
func (e *env) runAgent() (stop func()) {
	e.t.Helper()
	a, err := New(e.repo, e.opts)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("agent run: %v", err)
			}
			a.Close()
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitUpTo(t, what, 60*time.Second, cond)
}

// waitUpTo is waitFor with a deadline of its own, for work whose time
// follows the machine's load (megabytes to upload under -race).
func waitUpTo(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An active session makes at most one upload per interval, however often omp
// appends; when the agent stops, everything settled is on the remote.
func TestRunAtMostOneUploadPerInterval(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		e.opts.Interval = 300 * time.Millisecond
		e.writeRename(ompRel, corpus(t, ompFile))
		stop := e.runAgent()
		waitFor(t, "first upload", func() bool { return len(chunkPuts(e.client.takePutsKeep())) > 0 })
		e.client.takePuts()

		start := time.Now()
		for i := 0; i < 100; i++ {
			e.appendTo(ompRel, entryLine("a"+string(rune('a'+i%26))+"000000", "", "tick"))
			time.Sleep(15 * time.Millisecond)
		}
		stop()
		elapsed := time.Since(start)
		chunks := chunkPuts(e.client.takePuts())
		// One per interval while appending, plus the flush on stop.
		limit := int(elapsed/e.opts.Interval) + 2
		if len(chunks) > limit || len(chunks) == 0 {
			t.Fatalf("%d chunk uploads in %v at interval %v; want 1..%d", len(chunks), elapsed, e.opts.Interval, limit)
		}
		e.assertRemoteEquals(ompRel, ompID)
	})
}

// While a session keeps growing, the catalog goes up once every few
// intervals, not every interval; it catches up when the growth stops, and
// a stop puts what waited.
func TestRunBatchesCatalogPuts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		e.opts.Interval = 100 * time.Millisecond
		e.writeRename(ompRel, corpus(t, ompFile))
		stop := e.runAgent()
		waitFor(t, "the first catalog", func() bool { return len(catalogPuts(e.client.takePutsKeep())) > 0 })
		e.client.takePuts()

		start := time.Now()
		for i := 0; time.Since(start) < 2*time.Second; i++ {
			e.appendTo(ompRel, entryLine(fmt.Sprintf("c%07d", i), "", "tick"))
			time.Sleep(15 * time.Millisecond)
		}
		elapsed := time.Since(start)
		cats := catalogPuts(e.client.takePuts())
		// A put every catalogBatch intervals, each perhaps a catalog
		// rewritten whole and the recent object after it.
		limit := 2 * (int(elapsed/(catalogBatch*e.opts.Interval)) + 1)
		if len(cats) == 0 || len(cats) > limit {
			t.Fatalf("%d catalog puts in %v of growth at interval %v; want 1..%d: %v", len(cats), elapsed, e.opts.Interval, limit, cats)
		}
		want := int64(len(e.read(ompRel)))
		waitFor(t, "the catalog to catch up", func() bool {
			c, err := e.repo.GetCatalog(t.Context(), e.machine)
			return err == nil && len(c.Sessions) == 1 && c.Sessions[0].Size == want
		})

		e.appendTo(ompRel, entryLine("d0000000", "", "last"))
		stop()
		if got, want := e.catalogEntry(ompID).Size, int64(len(e.read(ompRel))); got != want {
			t.Fatalf("after stop the catalog records %d bytes; the file has %d", got, want)
		}
	})
}

func catalogPuts(keys []string) []string {
	var out []string
	for _, k := range keys {
		if k == repo.CatalogKey("laptop") || k == repo.RecentKey("laptop") {
			out = append(out, k)
		}
	}
	return out
}

// Folders and files that appear while the agent runs are picked up by
// their events, without waiting for the reconcile scan.
func TestRunPicksUpNewFolders(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		e.opts.Interval = 100 * time.Millisecond
		e.opts.ReconcileInterval = time.Hour
		e.write("sessions/.keep", nil)
		e.runAgent()
		e.writeRename(ompRel, corpus(t, ompFile))
		waitFor(t, "the new session on the remote", func() bool { return len(chunkPuts(e.client.takePutsKeep())) > 0 })
		e.appendTo(ompRel, entryLine("abab0001", "", "x"))
		want := int64(len(e.read(ompRel)))
		waitFor(t, "the append on the remote", func() bool {
			n, _ := e.remoteSize(ompID)
			return n == want
		})
		e.assertRemoteEquals(ompRel, ompID)
	})
}

// remoteSize is how many bytes of the newest generation the remote covers.
func (e *env) remoteSize(id string) (int64, error) {
	invs, err := e.repo.Inventory(context.Background(), id, e.machine)
	if err != nil {
		return 0, err
	}
	for _, inv := range invs {
		if g := inv.Newest(); g != nil && inv.Stream.Name == "session" {
			var end int64
			for _, c := range g.Chunks {
				end = max(end, c.End)
			}
			return end, nil
		}
	}
	return 0, nil
}

// While another ompsync command holds the maintenance lock (a compact or
// prune from cron), the agent uploads but does not compact; it compacts
// once the lock is free.
func TestCompactionWaitsForTheMaintenanceLock(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	var logs lockedBuffer
	e.opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.opts.Interval = 20 * time.Millisecond
	e.opts.Compaction = compact.Policy{Idle: 50 * time.Millisecond}
	unlock, err := LockMaintenance(context.Background(), e.stateDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.writeRename(ompRel, corpus(t, ompFile))
	e.runAgent()
	for i := range 4 {
		e.appendTo(ompRel, entryLine(fmt.Sprintf("m%07d", i), "", "while locked"))
		want := int64(len(e.read(ompRel)))
		waitFor(t, "the append uploaded", func() bool { n, _ := e.remoteSize(ompID); return n == want })
	}
	waitFor(t, "compaction waiting for the lock", func() bool {
		return strings.Contains(logs.String(), "compaction and retention wait for another ompsync command holding the maintenance lock")
	})
	n, put := len(e.generations(ompID, repo.SessionStream)[0].Chunks), len(chunkPuts(e.client.takePutsKeep()))
	if n < 3 || n != put {
		t.Fatalf("%d chunks of %d put while the lock was held: compacted anyway", n, put)
	}
	unlock()
	waitFor(t, "compaction once the lock is free", func() bool {
		return len(e.generations(ompID, repo.SessionStream)[0].Chunks) < n
	})
	e.assertRemoteEquals(ompRel, ompID)
}

// The running agent compacts a busy stream's small chunks as it goes, and
// an idle stream's into few; the stream reassembles byte for byte.
func TestRunCompacts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		e.opts.Interval = 20 * time.Millisecond
		e.opts.Compaction = compact.Policy{MaxChunks: 8, Idle: 300 * time.Millisecond}
		e.writeRename(ompRel, corpus(t, ompFile))
		e.runAgent()
		for i := range 60 {
			e.appendTo(ompRel, entryLine(fmt.Sprintf("c%07d", i), "", "busy"))
			time.Sleep(25 * time.Millisecond)
		}
		want := int64(len(e.read(ompRel)))
		// Idle, the chunks fall in size at least by half each (the idle
		// level rule: each holds at least what all after it hold), so a
		// stream uploaded in some 60 chunks is left in a few.
		waitFor(t, "all appends up and compacted while idle", func() bool {
			gens := e.generations(ompID, repo.SessionStream)
			if len(gens) != 1 {
				return false
			}
			picked, covered := repo.Cover(gens[0].Chunks)
			if covered != want || len(gens[0].Chunks) != len(picked) || len(picked) > 6 {
				return false
			}
			for i := 1; i < len(picked)-1; i++ {
				if picked[i].End-picked[i].Start < want-picked[i].End {
					return false
				}
			}
			return true
		})
		e.assertRemoteEquals(ompRel, ompID)
	})
}
