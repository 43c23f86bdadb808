package notify

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// hook is a health-check endpoint on 127.0.0.1 that records what it got.
type hook struct {
	mu   sync.Mutex
	got  []string // "<path> <body>"
	srv  *httptest.Server
	hang chan struct{} // while open, requests hang
}

func newHook(t *testing.T) *hook {
	h := &hook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got = append(h.got, r.Method+" "+r.URL.Path+" "+string(b))
		hang := h.hang
		h.mu.Unlock()
		if hang != nil {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// commandLog is a notify.command that appends its environment to a file.
func commandLog(t *testing.T) (cmd, file string) {
	file = filepath.Join(t.TempDir(), "events")
	return `printf '%s|%s|%s\n' "$OMPSYNC_EVENT" "$OMPSYNC_MACHINE" "$OMPSYNC_MESSAGE" >> ` + file, file
}

func lines(file string) []string {
	b, _ := os.ReadFile(file)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// A failure is said once it has lasted the grace period, to the URL's
// /fail and to the command; recovery pings the URL and runs the command;
// a good pass pings at most every ping interval.
func TestFailingThenRecovered(t *testing.T) {
	h := newHook(t)
	cmd, file := commandLog(t)
	n := New(Options{URL: h.srv.URL + "/uuid", Command: cmd, Machine: "laptop", Grace: 15 * time.Minute, PingInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	t0 := time.Now()
	n.Observe(t0, Health{Good: true})
	waitFor(t, "the first ping", func() bool { return len(h.calls()) == 1 })
	n.Observe(t0.Add(time.Minute), Health{Good: true}) // within the ping interval: nothing
	down := Health{Failing: "remote s3://b unreachable: connection refused", FailingSince: t0.Add(2 * time.Minute), Pending: 10, PendingSince: t0}
	n.Observe(t0.Add(10*time.Minute), down) // within the grace period
	n.Observe(t0.Add(17*time.Minute), down)
	n.Observe(t0.Add(18*time.Minute), down) // said once
	waitFor(t, "the failing event", func() bool { return len(h.calls()) == 2 && len(lines(file)) == 1 })
	n.Observe(t0.Add(20*time.Minute), Health{Good: true})
	waitFor(t, "the recovered event", func() bool { return len(h.calls()) == 3 && len(lines(file)) == 2 })
	n.Flush(time.Second)
	got := h.calls()
	if got[0] != "POST /uuid " || !strings.HasPrefix(got[1], "POST /uuid/fail backup failing for 15m0s: remote s3://b unreachable") || got[2] != "POST /uuid backup recovered: everything is uploaded again" {
		t.Errorf("the URL got %q", got)
	}
	ev := lines(file)
	if !strings.HasPrefix(ev[0], "failing|laptop|backup failing for 15m0s: remote s3://b") || !strings.HasPrefix(ev[1], "recovered|laptop|") {
		t.Errorf("the command got %q", ev)
	}
	n.Observe(t0.Add(30*time.Minute), Health{Good: true}) // pinged at recovery
	n.Observe(t0.Add(81*time.Minute), Health{Good: true})
	waitFor(t, "the hourly ping", func() bool { return len(h.calls()) == 4 })
}

// Bytes that wait past the grace period while nothing fails are lagging.
func TestLagging(t *testing.T) {
	cmd, file := commandLog(t)
	n := New(Options{Command: cmd, Machine: "m", Grace: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	t0 := time.Now()
	n.Observe(t0, Health{Good: true, Pending: 100, PendingSince: t0.Add(-2 * time.Minute)})
	waitFor(t, "the lagging event", func() bool { return strings.HasPrefix(lines(file)[0], "lagging|m|100 bytes have waited 2m0s") })
}

// A notifier that hangs never blocks Observe, is cut at its timeout, and is
// reported once at WARN however often it fails.
func TestHangingNotifierIsBounded(t *testing.T) {
	h := newHook(t)
	h.hang = make(chan struct{})
	defer close(h.hang)
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) }), nil))
	n := New(Options{URL: h.srv.URL, Command: "sleep 30", Grace: time.Millisecond, Timeout: 200 * time.Millisecond, Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	start := time.Now()
	t0 := time.Now()
	for i := range 1000 {
		bad := Health{Failing: "x", FailingSince: t0}
		if i%2 == 1 {
			bad = Health{Good: true}
		}
		n.Observe(t0.Add(time.Duration(i)*time.Second), bad)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("1000 observations took %v with a hanging notifier", d)
	}
	read := func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
	waitFor(t, "both failures said", func() bool {
		out := read()
		return strings.Contains(out, "notify.url failed") && strings.Contains(out, "notify.command failed")
	})
	n.Flush(5 * time.Second)
	out := read()
	if strings.Count(out, "notify.url failed") != 1 || strings.Count(out, "notify.command failed") != 1 {
		t.Errorf("want each failure said once:\n%s", out)
	}
	if strings.Contains(out, h.srv.URL) {
		t.Errorf("the URL, a credential, is in the log:\n%s", out)
	}
	if c := len(h.calls()); c > 10 {
		t.Errorf("%d deliveries of 1000 events: a queue, not the latest", c)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A Flush that gives up (Run has stopped, the event stays queued) leaves no
// goroutine behind.
func TestFlushAfterRunLeavesNoGoroutine(t *testing.T) {
	n := New(Options{Command: "true", Grace: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n.Run(ctx) // stopped at once
	n.Report(Damaged, "x")
	n.Flush(10 * time.Millisecond)
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "(*Notifier).Flush") {
		t.Errorf("a goroutine of Flush outlived it:\n%s", stacks)
	}
}

// Events that arrive while Flush waits neither panic nor race (run with
// -race): the wait of one Flush and the queueing of the next event overlap.
func TestEventsDuringFlush(t *testing.T) {
	cmd, _ := commandLog(t)
	n := New(Options{Command: cmd, Grace: time.Millisecond, Timeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 200 {
			n.Report(Damaged, "x")
		}
	}()
	for range 200 {
		n.Flush(time.Second)
	}
	wg.Wait()
	n.Flush(5 * time.Second)
}
