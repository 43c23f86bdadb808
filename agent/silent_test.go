package agent

import (
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/ompsync/ompsync/compact"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// downClient fails every request with a transient error while down is
// set, as a remote does while the network is gone.
type downClient struct {
	remote.Client
	down atomic.Bool
}

func (d *downClient) fail(op, key string) error {
	if d.down.Load() {
		return &remote.Error{Op: op, Key: key, Transient: true, Err: syscall.ECONNREFUSED}
	}
	return nil
}

func (d *downClient) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	if err := d.fail("put", key); err != nil {
		return err
	}
	return d.Client.Put(ctx, key, data, opts)
}

func (d *downClient) PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts remote.PutOptions) error {
	if err := d.fail("put", key); err != nil {
		return err
	}
	return d.Client.PutReader(ctx, key, r, size, opts)
}

func (d *downClient) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := d.fail("get", key); err != nil {
		return nil, err
	}
	return d.Client.Get(ctx, key, off, n)
}

func (d *downClient) Stat(ctx context.Context, key string) (remote.ObjectInfo, error) {
	if err := d.fail("stat", key); err != nil {
		return remote.ObjectInfo{}, err
	}
	return d.Client.Stat(ctx, key)
}

func (d *downClient) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	if err := d.fail("list", prefix); err != nil {
		return func(yield func(remote.ObjectInfo, error) bool) { yield(remote.ObjectInfo{}, err) }
	}
	return d.Client.List(ctx, prefix, opts)
}

func (d *downClient) Delete(ctx context.Context, key string) error {
	if err := d.fail("delete", key); err != nil {
		return err
	}
	return d.Client.Delete(ctx, key)
}

// fakeClock is the agent's clock in tests that jump hours ahead.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// gauge reads a gauge as a scrape would.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// startAgent runs a; stop cancels it and returns Run's error.
func startAgent(t *testing.T, a *Agent) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
			a.Close()
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// The remote goes away on a laptop that slept past the 10-minute owner
// check: the owner check's failure is the outage's WARN (naming the remote
// and what to check), said once and then as a reminder with a count; the
// gauges show the bytes that wait and an age that grows; the remote's
// return is one line, and everything is uploaded after it.
func TestOwnerCheckOutageIsSaid(t *testing.T) {
	clk := newFakeClock()
	dc := &downClient{Client: newFileClient(t)}
	e := newEnv(t, dc)
	var logs lockedBuffer
	e.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	e.opts.Now = clk.Now
	e.opts.Interval = 20 * time.Millisecond
	e.opts.Remote = "s3://backups/ompsync"
	// Idle compaction falls due during the outage: it must not WARN at
	// every tick, as it did.
	e.opts.Compaction = compact.Policy{Idle: time.Minute}
	reg := prometheus.NewRegistry()
	e.opts.Metrics = NewMetrics(reg)
	e.writeRename(ompRel, corpus(t, ompFile))
	e.runAgent()
	waitFor(t, "first upload", func() bool { return len(chunkPuts(e.client.takePutsKeep())) > 0 })
	waitFor(t, "the first pass's mark", func() bool { return !readUpToDate(e.stateDir).IsZero() })

	dc.down.Store(true)
	clk.Add(heartbeatEvery + time.Minute) // asleep: the owner check is due
	var appended int
	for i := range 20 {
		line := []byte(fmt.Sprintf(`{"type":"message","id":"%08x","parentId":null,"text":"while away"}`+"\n", i))
		e.appendTo(ompRel, line)
		appended += len(line)
	}
	waitFor(t, "a WARN naming the remote", func() bool {
		clk.Add(time.Second) // past the backoff
		out := logs.String()
		return strings.Contains(out, `level=WARN msg="remote unreachable`) && strings.Contains(out, "remote=s3://backups/ompsync")
	})
	waitFor(t, "the pending bytes in the gauge", func() bool {
		clk.Add(time.Second)
		return gauge(t, reg, "ompsync_bytes_pending") == float64(appended)
	})
	age := gauge(t, reg, "ompsync_oldest_pending_seconds")
	if age < (heartbeatEvery + time.Minute).Seconds() {
		t.Errorf("oldest pending %.0fs, want at least the %v the agent was asleep", age, heartbeatEvery+time.Minute)
	}
	clk.Add(time.Hour)
	if got := gauge(t, reg, "ompsync_oldest_pending_seconds"); got < age+3600 {
		t.Errorf("oldest pending %.0fs an hour after %.0fs: the age does not grow", got, age)
	}
	waitFor(t, "a reminder with a count", func() bool {
		clk.Add(time.Second)
		return strings.Contains(logs.String(), `msg="remote still unreachable`)
	})
	if out := logs.String(); strings.Count(out, `msg="remote unreachable`) != 1 || !strings.Contains(out, "failures=") {
		t.Errorf("want one first WARN and a reminder with a count:\n%s", out)
	}
	if out := logs.String(); strings.Contains(out, "compaction failed") {
		t.Errorf("compaction failures logged during an outage the remote's WARN already says:\n%s", out)
	}

	dc.down.Store(false)
	want := int64(len(e.read(ompRel)))
	waitFor(t, "catch-up", func() bool {
		clk.Add(time.Second)
		n, _ := e.remoteSize(ompID)
		return n == want
	})
	e.assertRemoteEquals(ompRel, ompID)
	waitFor(t, "one line on recovery", func() bool { return strings.Contains(logs.String(), "remote reachable again") })
	waitFor(t, "the gauge back to 0", func() bool { return gauge(t, reg, "ompsync_bytes_pending") == 0 })
	if n := strings.Count(logs.String(), "level=WARN"); n > 6 {
		t.Errorf("%d WARN lines for one outage:\n%s", n, logs.String())
	}
}

// A folder that cannot be watched (inotify's max_user_watches reached) is
// a WARN that says how to raise the limit, and its files are polled every
// interval: an append is uploaded long before the reconcile scan.
func TestWatchFailurePolls(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	var logs lockedBuffer
	e.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	e.opts.Interval = 50 * time.Millisecond
	e.opts.ReconcileInterval = time.Hour
	e.writeRename(ompRel, corpus(t, ompFile))
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	a.addWatch = func(dir string) error { return fmt.Errorf("inotify_add_watch %s: %w", dir, unix.ENOSPC) }
	stop := startAgent(t, a)
	waitFor(t, "first upload", func() bool { n, _ := e.remoteSize(ompID); return n == int64(len(e.read(ompRel))) })
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "fs.inotify.max_user_watches") {
		t.Fatalf("no WARN with the fix for a folder that cannot be watched:\n%s", out)
	}
	if n := strings.Count(out, "cannot watch"); n != 1 {
		t.Errorf("%d 'cannot watch' lines, want 1:\n%s", n, out)
	}
	start := time.Now()
	e.appendTo(ompRel, entryLine("a1b2c3d4", "", "polled"))
	want := int64(len(e.read(ompRel)))
	waitFor(t, "the append uploaded by polling", func() bool { n, _ := e.remoteSize(ompID); return n == want })
	if d := time.Since(start); d > 40*e.opts.Interval {
		t.Errorf("the append took %v to upload with an interval of %v", d, e.opts.Interval)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	e.assertRemoteEquals(ompRel, ompID)
}

// A session deleted while the agent runs and then put back as restore does
// (the same bytes, its old mtime) needs no upload, and is recorded as up
// to date: status shows nothing pending once the agent ran a pass, rather
// than a backlog that grows for ever.
func TestRestoredFileIsUpToDate(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	e.opts.Interval = 50 * time.Millisecond
	e.opts.ReconcileInterval = 200 * time.Millisecond
	data := corpus(t, ompFile)
	e.writeRename(ompRel, data)
	e.runAgent()
	waitFor(t, "first upload", func() bool { n, _ := e.remoteSize(ompID); return n == int64(len(data)) })
	fi, err := os.Stat(e.path(ompRel))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(e.path(ompRel)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deletion recorded", func() bool {
		st, err := LoadState(e.stateDir)
		if err != nil || st == nil {
			return false
		}
		for _, f := range st.Streams {
			if f.Path == ompRel && f.State == repo.StateDeleted {
				return true
			}
		}
		return false
	})
	e.writeRename(ompRel, data)
	if err := os.Chtimes(e.path(ompRel), fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	restored := time.Now()
	puts := len(e.client.takePutsKeep())
	waitFor(t, "a pass after the restore", func() bool { return readUpToDate(e.stateDir).After(restored) })
	// status --max-lag 30s, an hour later.
	st, err := Status(StatusOptions{AgentDir: e.agentDir, StateDir: e.stateDir, Now: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range st {
		if f.Pending > 0 && f.PendingAge > 30*time.Second {
			t.Errorf("%s: %d bytes pending for %v (state %s) after the restored file was found on the remote", f.Path, f.Pending, f.PendingAge, f.State)
		}
	}
	if got := chunkPuts(e.client.takePutsKeep()[puts:]); len(got) > 0 {
		t.Errorf("the restored file was uploaded again: %v", got)
	}
}

// A failure that is not a path's (a compaction, a pull, a catalog put) is
// a WARN once, at debug while it lasts, a reminder with a count every
// problemRelog, and one line when it works again.
func TestProblemsWarnOnceThenRemind(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var p problems
	t0 := time.Now()
	err := fmt.Errorf("put v1/x: AccessDenied")
	for i := range 150 { // a tick every 2s for 5 minutes
		p.warn(log, t0.Add(time.Duration(i)*2*time.Second), "compaction of a.jsonl", "compaction failed", err)
	}
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 1 {
		t.Fatalf("%d WARN lines in 5 minutes of failures, want 1:\n%s", n, out)
	}
	p.warn(log, t0.Add(problemRelog+time.Second), "compaction of a.jsonl", "compaction failed", err)
	if out := logs.String(); !strings.Contains(out, `msg="still: compaction failed"`) || !strings.Contains(out, "failures=150") {
		t.Fatalf("no reminder with a count:\n%s", out)
	}
	p.clear(log, "compaction of a.jsonl")
	p.clear(log, "compaction of a.jsonl")
	if n := strings.Count(logs.String(), "works again"); n != 1 {
		t.Fatalf("%d recovery lines, want 1:\n%s", n, logs.String())
	}
}
