package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
)

// onTerminal runs ompsync args on a pseudo-terminal, waits until its
// output shows want (the remote held by g meanwhile, so the work is still
// under way), then lets the remote answer and returns the exit code and
// everything the terminal showed.
func onTerminal(t *testing.T, m *machineEnv, g *gate, want string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(ompsyncBin, args...)
	cmd.Env = m.environ()
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	out := &syncBuffer{}
	copied := make(chan struct{})
	go func() { io.Copy(out, tty); close(copied) }() // ends with EIO once the process is gone
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("%s: the terminal never showed %q:\n%q", args, want, out)
		}
	}
	g.release()
	err = cmd.Wait()
	<-copied
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String()
}

// noBar checks that output holds no progress bar: no cursor movement, no
// rate or time left.
func noBar(t *testing.T, what, out string) {
	t.Helper()
	for _, bad := range []string{"\x1b[", "\r", " left", "/s  "} {
		if strings.Contains(out, bad) {
			t.Errorf("%s: the output holds a progress bar (%q):\n%s", what, bad, out)
		}
	}
}

// Long work shows its progress on a terminal: agent --once (files and
// bytes of the total), restore (sessions and bytes), verify (sessions, and
// the bytes checked); never without a terminal, with --json or with -q.
func TestProgress(t *testing.T) {
	t.Parallel()
	srv := remotetest.SharedServer(t)
	bucket := srv.NewBucket(t)
	// The sessions' objects, not the marker or catalogs that start-up and
	// planning read and write first.
	holdPuts := func(r *http.Request) bool {
		return r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/session/")
	}
	holdChunks := func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/session/") && !r.URL.Query().Has("list-type")
	}
	machine := func(g *gate) *machineEnv {
		return newMachineEnv(t, "s3://"+bucket, s3Options(srv, "", g.URL), "barry")
	}
	g := newGate(t, srv.Endpoint, holdPuts)
	m := machine(g)
	first := m
	w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 71, 3)
	if err != nil {
		t.Fatal(err)
	}
	for range 30 {
		if err := w.step(); err != nil {
			t.Fatal(err)
		}
	}
	code, out := onTerminal(t, m, g, "/3 files", "agent", "--once")
	if code != 0 || !strings.Contains(out, "3 files checked") || !strings.Contains(out, " left") {
		t.Fatalf("agent --once on a terminal: exit %d, want 0, a bar and the totals:\n%q", code, out)
	}
	if !strings.Contains(out, "first run") {
		t.Errorf("a brand-new setup is not called the first run:\n%s", out)
	}

	// The third session's chunks held: the bar shows the other two done,
	// and the bytes they brought.
	held := fmt.Sprintf("/0190%04x-0000-7000-8000-%012x/", 2, 71)
	g = newGate(t, srv.Endpoint, func(r *http.Request) bool { return holdChunks(r) && strings.Contains(r.URL.Path, held) })
	m = machine(g)
	code, out = onTerminal(t, m, g, "2/3 sessions", "restore", "--all", "--to", filepath.Join(t.TempDir(), "restored"))
	if code != 0 || !strings.Contains(out, "3 restored") || !strings.Contains(out, "B/") || !strings.Contains(out, " left") {
		t.Fatalf("restore on a terminal: exit %d, want 0, a bar with sessions and bytes, and the totals:\n%q", code, out)
	}
	if frame := out[strings.Index(out, "2/3 sessions"):]; strings.HasPrefix(frame, "2/3 sessions  0 B/") {
		t.Errorf("restore's bar counts no bytes with two sessions of three restored:\n%q", out)
	}
	g = newGate(t, srv.Endpoint, holdChunks)
	m = machine(g)
	code, out = onTerminal(t, m, g, "/3 sessions", "verify")
	if code != 0 || !strings.Contains(out, "B checked") || !strings.Contains(out, "3 sessions checked") {
		t.Fatalf("verify on a terminal: exit %d, want 0, a bar counting what it checks, and the totals:\n%q", code, out)
	}

	// Without a terminal, with --json, with -q: no bar.
	direct := *first // the same machine (its state dir), straight to the server
	direct.s3 = s3Options(srv, "", srv.Endpoint)
	m = &direct
	for _, args := range [][]string{{"agent", "--once"}, {"restore", "--all", "--to", filepath.Join(t.TempDir(), "r2")}, {"verify"}} {
		code, out := m.ompsync(args...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", args, code, out)
		}
		noBar(t, strings.Join(args, " ")+" without a terminal", out)
	}
	for _, args := range [][]string{{"verify", "--json"}, {"-q", "verify"}, {"restore", "--all", "--dry-run", "--json"}} {
		g := newGate(t, srv.Endpoint, func(*http.Request) bool { return false })
		m := machine(g)
		cmd := exec.Command(ompsyncBin, args...)
		cmd.Env = m.environ()
		tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tty) // until the process is gone
		cmd.Wait()
		tty.Close()
		out := strings.ReplaceAll(string(b), "\r\n", "\n") // the terminal's own line ends
		noBar(t, strings.Join(args, " ")+" on a terminal", out)
		if args[0] == "-q" && strings.TrimSpace(out) != "" {
			t.Errorf("-q verify printed %q, want nothing", out)
		}
	}
}
