package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
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

// The real binary against versitygw that stops while the agent runs: a
// WARN naming the remote, the pending gauges scraped with the bytes that
// wait and an age that grows, notify.command and notify.url (a listener
// on 127.0.0.1) told "failing" after notify.grace and "recovered" once the
// server is back; everything uploaded after it.
func TestAgentOutageAlerts(t *testing.T) {
	t.Parallel()
	srv := remotetest.StartServer(t)
	m := newMachineEnv(t, "s3://"+srv.NewBucket(t), s3Options(srv, "", srv.Endpoint), "laptop")
	var mu sync.Mutex
	var hits []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		hits = append(hits, r.URL.Path+" "+string(b))
		mu.Unlock()
	}))
	defer hook.Close()
	hooked := func(prefix string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(hits, func(h string) bool { return strings.HasPrefix(h, prefix) })
	}
	events := filepath.Join(t.TempDir(), "events")
	evented := func(ev string) bool {
		b, _ := os.ReadFile(events)
		return strings.Contains(string(b), ev+" laptop ")
	}
	addr := freeAddr(t)
	scrape := func(name string) float64 {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for l := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+" "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		return -1
	}
	id := "01a113d2-be76-73c7-986b-d3ac6e3f0041"
	m.newSession(id, entry("a1", "", "before the outage"))
	cmd, out := m.startWith([]string{
		"OMPSYNC_NOTIFY_URL=" + hook.URL + "/ping/check",
		`OMPSYNC_NOTIFY_COMMAND=echo "$OMPSYNC_EVENT $OMPSYNC_MACHINE $OMPSYNC_MESSAGE" >> ` + events,
		"OMPSYNC_NOTIFY_GRACE=2s",
		"OMPSYNC_S3_ENDPOINT=" + srv.Endpoint,
	}, "agent", "--interval", "200ms", "--metrics-addr", addr)
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	r := openTestRepo(t, m.remote, m.s3)
	waitUntil(t, "the first upload", func() bool { return remoteSize(t, r, id, "laptop") == int64(len(m.readSession(id))) })
	waitUntil(t, "the first ping", func() bool { return hooked("/ping/check ") })

	srv.Stop()
	m.appendSession(id, entry("a2", "a1", "while the server is down"))
	waitUntil(t, "a WARN naming the remote", func() bool {
		return strings.Contains(out.String(), `level=WARN msg="remote unreachable`) && strings.Contains(out.String(), "remote="+m.remote)
	})
	waitUntil(t, "the pending bytes scraped", func() bool { return scrape("ompsync_bytes_pending") > 0 })
	age := scrape("ompsync_oldest_pending_seconds")
	waitUntil(t, "a growing age", func() bool { return scrape("ompsync_oldest_pending_seconds") >= age+1 })
	waitUntil(t, "failing to the URL and the command", func() bool { return hooked("/ping/check/fail backup failing") && evented("failing") })

	srv.Start(t)
	waitUntil(t, "recovered to the URL and the command", func() bool { return hooked("/ping/check backup recovered") && evented("recovered") })
	waitUntil(t, "everything uploaded", func() bool { return remoteSize(t, r, id, "laptop") == int64(len(m.readSession(id))) })
	if strings.Contains(out.String(), srv.SecretKey) {
		t.Error("the secret key is in the log")
	}
}

// verify that finds damage tells notify.command, so that a verify run from
// cron alerts as the agent does.
func TestVerifyDamagedNotifies(t *testing.T) {
	url := "file://" + t.TempDir()
	m := newMachineEnv(t, url, backend.S3Options{}, "laptop")
	id := "01a113d2-be76-73c7-986b-d3ac6e3f0042"
	p := m.newSession(id, entry("a1", "", "first"))
	if code, out := m.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("agent --once: exit %d\n%s", code, out)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	m.appendSession(id, entry("a2", "a1", "second"))
	if code, out := m.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("agent --once: exit %d\n%s", code, out)
	}
	damageLastChunk(t, url, id, int(fi.Size()))
	events := filepath.Join(t.TempDir(), "events")
	code, out := m.startWithWait([]string{`OMPSYNC_NOTIFY_COMMAND=echo "$OMPSYNC_EVENT $OMPSYNC_MACHINE $OMPSYNC_MESSAGE" > ` + events}, "verify")
	if code != 1 {
		t.Fatalf("verify of a damaged chunk: exit %d\n%s", code, out)
	}
	b, _ := os.ReadFile(events)
	if !strings.HasPrefix(string(b), "damaged laptop verify found 1 of 1 sessions damaged") {
		t.Fatalf("notify.command got %q\n%s", b, out)
	}
}
