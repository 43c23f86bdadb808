package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ompsync/ompsync/notify"
	"github.com/ompsync/ompsync/remote"
)

// Once a day the agent reads back a sample of what it uploaded, every hash
// checked: a chunk damaged on the remote after the upload was acknowledged
// is said at WARN, with what to do, and sent as a damaged alert. On the
// agent's clock: nothing is read before the day is up.
func TestReadBackFindsDamage(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, newFileClient(t))
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	e.opts.Logger = log
	e.opts.Now = clk.Now
	e.opts.Interval = 20 * time.Millisecond
	e.opts.ReadBackBytes = 1 << 20
	al := newAlerts(t)
	passes := &countingNotifier{Notifier: al.notifier(t, time.Hour, log)}
	e.opts.Notifier = passes
	e.writeRename(ompRel, corpus(t, ompFile))
	e.runAgent()
	want := int64(len(e.read(ompRel)))
	waitFor(t, "the upload", func() bool { n, _ := e.remoteSize(ompID); return n == want })
	waitFor(t, "the first pass's mark", func() bool { return !readUpToDate(e.stateDir).IsZero() })

	// Flip a byte of the first chunk on the remote, behind the agent's back.
	var key string
	for obj, err := range e.client.List(context.Background(), "", remote.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if chunkPuts([]string{obj.Key}) != nil && key == "" {
			key = obj.Key
		}
	}
	rc, err := e.client.Get(context.Background(), key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := e.client.Put(context.Background(), key, b, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	n := passes.n.Load()
	waitFor(t, "three passes on the same day", func() bool { return passes.n.Load() >= n+3 })
	if strings.Contains(logs.String(), "is damaged on the remote") {
		t.Fatalf("read back before the day was up:\n%s", logs.String())
	}
	clk.Add(readBackEvery + time.Minute)
	waitFor(t, "the WARN naming the damage and the fix", func() bool {
		out := logs.String()
		return strings.Contains(out, `level=WARN msg="a copy this machine backed up is damaged on the remote`) &&
			strings.Contains(out, "ompsync verify --repair") && strings.Contains(out, "what=\"copy of "+ompRel)
	})
	waitFor(t, "the damaged alert", func() bool {
		b, _ := os.ReadFile(al.file)
		return strings.Contains(string(b), "damaged laptop the backed-up copy of "+ompRel+" is damaged on the remote")
	})
	if n := strings.Count(logs.String(), "is damaged on the remote"); n != 1 {
		t.Errorf("the damage said %d times, want once", n)
	}
}

// countingNotifier counts the passes the agent reports.
type countingNotifier struct {
	*notify.Notifier
	n atomic.Int64
}

func (c *countingNotifier) Observe(now time.Time, h notify.Health) {
	c.n.Add(1)
	c.Notifier.Observe(now, h)
}
