package agent

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/notify"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
)

// alerts is a notify.url endpoint on 127.0.0.1 and a notify.command's
// log, both recording the events they got.
type alerts struct {
	mu   sync.Mutex
	urls []string
	file string
	srv  *httptest.Server
}

func newAlerts(t *testing.T) *alerts {
	al := &alerts{file: filepath.Join(t.TempDir(), "events")}
	al.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		al.mu.Lock()
		al.urls = append(al.urls, r.URL.Path+" "+string(b))
		al.mu.Unlock()
	}))
	t.Cleanup(al.srv.Close)
	return al
}

func (al *alerts) notifier(t *testing.T, grace time.Duration, log *slog.Logger) *notify.Notifier {
	n := notify.New(notify.Options{URL: al.srv.URL + "/check", Command: `echo "$OMPSYNC_EVENT $OMPSYNC_MACHINE $OMPSYNC_MESSAGE" >> ` + al.file,
		Machine: "laptop", Grace: grace, Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go n.Run(ctx)
	return n
}

// got reports whether both the URL and the command got ev: the URL's
// /fail for failing, the URL itself for recovered.
func (al *alerts) got(ev string) bool {
	b, _ := os.ReadFile(al.file)
	cmd := strings.Contains(string(b), ev+" laptop ")
	al.mu.Lock()
	defer al.mu.Unlock()
	for _, u := range al.urls {
		switch {
		case ev == "failing" && strings.HasPrefix(u, "/check/fail backup failing"):
			return cmd
		case ev == "recovered" && strings.HasPrefix(u, "/check backup recovered"):
			return cmd
		}
	}
	return false
}

// The S3 server stops while the agent runs, or is down when it starts:
// within two intervals a WARN names the remote; the metrics show the bytes
// that wait and an age that grows; notify.url and notify.command get
// "failing" once notify.grace has passed and "recovered" once the server
// is back; and everything is uploaded.
func TestOutageIsSaidAndAlerted(t *testing.T) {
	for _, when := range []string{"mid-run", "at start"} {
		t.Run(when, func(t *testing.T) {
			srv := remotetest.StartServer(t)
			raw, err := backend.OpenRaw(t.Context(), "s3://"+srv.NewBucket(t), backend.S3Options{
				Endpoint: srv.Endpoint, Region: "us-east-1", PathStyle: true,
				AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey,
			})
			if err != nil {
				t.Fatal(err)
			}
			c := remote.WithRetry(raw, remote.RetryPolicy{MaxAttempts: 2, Base: 20 * time.Millisecond, Max: 50 * time.Millisecond})
			e := newEnv(t, c)
			var logs lockedBuffer
			e.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			e.opts.Interval = 200 * time.Millisecond
			e.opts.Remote = "s3://the-backup-bucket"
			reg := prometheus.NewRegistry()
			e.opts.Metrics = NewMetrics(reg)
			al := newAlerts(t)
			e.opts.Notifier = al.notifier(t, 2*time.Second, e.opts.Logger)
			e.writeRename(ompRel, corpus(t, ompFile))
			var stopped time.Time
			if when == "mid-run" {
				e.runAgent()
				waitFor(t, "first upload", func() bool { n, _ := e.remoteSize(ompID); return n == int64(len(e.read(ompRel))) })
				stopped = time.Now()
				srv.Stop()
			} else {
				e.once() // a state that knows the file, then the remote is down
				srv.Stop()
				stopped = time.Now()
			}
			e.appendTo(ompRel, entryLine("b0b0b0b0", "", "written while the remote is away"))
			if when == "at start" {
				e.runAgent()
			}
			waitFor(t, "a WARN naming the remote", func() bool {
				return strings.Contains(logs.String(), `level=WARN msg="remote unreachable`) && strings.Contains(logs.String(), "remote=s3://the-backup-bucket")
			})
			// Two intervals, and the retries' and a request's timeouts.
			if d := time.Since(stopped); d > 2*e.opts.Interval+5*time.Second {
				t.Errorf("the outage was said after %v", d)
			}
			waitFor(t, "the pending bytes in the gauge", func() bool { return gauge(t, reg, "ompsync_bytes_pending") > 0 })
			age := gauge(t, reg, "ompsync_oldest_pending_seconds")
			waitFor(t, "a growing age", func() bool { return gauge(t, reg, "ompsync_oldest_pending_seconds") >= age+0.5 })
			waitFor(t, "failing after notify.grace", func() bool { return al.got("failing") })
			if d := time.Since(stopped); d < 2*time.Second {
				t.Errorf("failing was sent %v after the outage began, before the grace of 2s", d)
			}
			if al.got("recovered") {
				t.Fatal("recovered sent while the remote is away")
			}

			srv.Start(t)
			want := int64(len(e.read(ompRel)))
			waitFor(t, "catch-up", func() bool { n, _ := e.remoteSize(ompID); return n == want })
			e.assertRemoteEquals(ompRel, ompID)
			waitFor(t, "recovered", func() bool { return al.got("recovered") })
			waitFor(t, "the gauge back to 0", func() bool { return gauge(t, reg, "ompsync_bytes_pending") == 0 })
			if n := strings.Count(logs.String(), `msg="remote unreachable`); n != 1 {
				t.Errorf("%d first WARNs for one outage:\n%s", n, logs.String())
			}
		})
	}
}

// A notifier that hangs (a URL that never answers, a command that never
// ends) delays no upload.
func TestHangingNotifierDelaysNoUpload(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	e := newEnv(t, newFileClient(t))
	e.opts.Interval = 50 * time.Millisecond
	n := notify.New(notify.Options{URL: srv.URL, Command: "sleep 60", Grace: time.Millisecond, PingInterval: time.Millisecond, Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	e.opts.Notifier = &flipping{n: n}
	e.writeRename(ompRel, corpus(t, ompFile))
	e.runAgent()
	waitFor(t, "first upload", func() bool { n, _ := e.remoteSize(ompID); return n == int64(len(e.read(ompRel))) })
	for i := range 5 {
		e.appendTo(ompRel, entryLine("c0c0c0c"+string(rune('0'+i)), "", "while the notifier hangs"))
		start := time.Now()
		want := int64(len(e.read(ompRel)))
		waitFor(t, "the append uploaded", func() bool { n, _ := e.remoteSize(ompID); return n == want })
		if d := time.Since(start); d > 40*e.opts.Interval {
			t.Errorf("append %d took %v to upload with a hanging notifier", i, d)
		}
	}
}

// flipping tells the notifier the backup fails and recovers by turns, so
// that every channel is busy (and hangs) all the time.
type flipping struct {
	n   *notify.Notifier
	bad bool
}

func (f *flipping) Observe(now time.Time, h notify.Health) {
	f.bad = !f.bad
	if f.bad {
		h = notify.Health{Failing: "made up", FailingSince: now.Add(-time.Hour)}
	}
	f.n.Observe(now, h)
}
