package main

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/faultproxy"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
)

// A remote that answers its catalogs and listings but then no more (every
// read of a session's objects reset) has said nothing of what it holds:
// verify exits 1 calling the sessions not checked, never DAMAGED, and
// restore exits 1 calling them not fetched, never refused, writing
// nothing; both say to try again once the remote answers, and then do
// their work. (Mostly the client's backoff: run beside the other tests.)
func TestUnansweredRemoteIsNotDamage(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	t.Parallel()
	srv := remotetest.SharedServer(t)
	p, err := faultproxy.Start(srv.Endpoint, faultproxy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m := newMachineEnv(t, "s3://"+srv.NewBucket(t), s3Options(srv, "", p.URL), "laptop")
	w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 61, 1)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := w.step(); err != nil {
			t.Fatal(err)
		}
	}
	if code, out := m.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("agent --once: exit %d\n%s", code, out)
	}
	want, err := os.ReadFile(w.files[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(w.files[0]); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSuffix(filepath.Base(w.files[0]), ".jsonl")
	id = id[strings.LastIndexByte(id, '_')+1:]

	if err := p.SetConfig(faultproxy.Config{ResetRequest: 1, Match: func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/session/")
	}}); err != nil {
		t.Fatal(err)
	}
	code, out := m.ompsync("verify", id[:13])
	last := lastLine(out)
	if code != 1 || strings.Contains(out, "DAMAGED") || !strings.Contains(out, "UNCHECKED") ||
		!strings.Contains(last, "could not be checked: the remote did not answer") || !strings.Contains(last, "again") {
		t.Errorf("verify with the remote not answering: exit %d, want 1, sessions UNCHECKED (not DAMAGED) and a last line saying to try again\n%s", code, out)
	}
	code, out = m.ompsync("restore", id[:13])
	last = lastLine(out)
	if code != 1 || strings.Contains(out, "refused") || !strings.Contains(out, "not fetched") ||
		!strings.Contains(last, "the remote did not answer") || !strings.Contains(last, "again") {
		t.Errorf("restore with the remote not answering: exit %d, want 1, the session not fetched (not refused) and a last line saying to try again\n%s", code, out)
	}
	if _, err := os.Lstat(w.files[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("restore with the remote not answering left a file: %v", err)
	}

	if err := p.SetConfig(faultproxy.Config{}); err != nil {
		t.Fatal(err)
	}
	if code, out := m.ompsync("verify", id[:13]); code != 0 {
		t.Errorf("verify once the remote answers: exit %d\n%s", code, out)
	}
	if code, out := m.ompsync("restore", id[:13]); code != 0 {
		t.Fatalf("restore once the remote answers: exit %d\n%s", code, out)
	}
	if got, err := os.ReadFile(w.files[0]); err != nil || !bytes.Equal(got, want) {
		t.Errorf("restore once the remote answers: %v, %d bytes, want the %d backed up", err, len(got), len(want))
	}
}

// A laptop offline: a command that reads the remote exits 1 with one line
// that says the remote did not answer and what to check, not a bare
// "connect: connection refused".
func TestOfflineCommandSaysWhatToCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	t.Parallel()
	srv := remotetest.SharedServer(t)
	p, err := faultproxy.Start(srv.Endpoint, faultproxy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := newMachineEnv(t, "s3://"+srv.NewBucket(t), s3Options(srv, "", p.URL), "laptop")
	m.writeSessions(0, 1)
	m.mustRun(0, "agent", "--once")
	p.Close()
	for _, args := range [][]string{{"ls"}, {"grep", "work"}} {
		out := m.mustRun(1, args...)
		if line := lastLine(out); !strings.Contains(line, "the remote did not answer: check the network, the remote's address and that it is up") {
			t.Errorf("ompsync %s offline: last line %q does not say what to check", strings.Join(args, " "), line)
		}
	}
}
