package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
)

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SIGTERM while sessions grow: the agent exits 0 and every settled line is
// on the remote afterwards, though its interval had not come round.
func TestSIGTERMFlushes(t *testing.T) {
	t.Parallel()
	forEachRemote(t, func(t *testing.T, url string, s3 backend.S3Options) {
		m := newMachineEnv(t, url, s3, "termy")
		w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 3, 3)
		if err != nil {
			t.Fatal(err)
		}
		cmd, out := m.start("agent", "--interval", "1h")
		waitUntil(t, "agent start", func() bool { return strings.Contains(out.String(), "agent started") })
		for range 200 {
			if err := w.step(); err != nil {
				t.Fatal(err)
			}
		}
		// A half-written line stays local: only settled lines must be up.
		f, _ := os.OpenFile(w.files[0], os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString(`{"type":"message","id":"half`)
		f.Close()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("agent after SIGTERM: %v\n%s", err, out)
		}
		r := openTestRepo(t, url, s3)
		for _, p := range w.files {
			b, _ := os.ReadFile(p)
			want := b[:bytes.LastIndexByte(b, '\n')+1]
			if got := remoteCopy(t, r, idOf(p), "termy"); !bytes.Equal(got, want) {
				t.Fatalf("%s: remote %d bytes, settled %d", filepath.Base(p), len(got), len(want))
			}
		}
	})
}

// SIGHUP re-reads the configuration: a shorter interval takes effect
// without a restart.
func TestSIGHUPReloadsInterval(t *testing.T) {
	m := newMachineEnv(t, "file://"+t.TempDir(), backend.S3Options{}, "huppy")
	cfgFile := filepath.Join(m.home, "config.yaml")
	if err := os.WriteFile(cfgFile, []byte("interval: 1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	cmd, out := m.start("agent", "--config", cfgFile)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	waitUntil(t, "agent start", func() bool { return strings.Contains(out.String(), "agent started") })
	r := openTestRepo(t, m.remote, m.s3)
	waitUntil(t, "first pass", func() bool { return remoteSize(t, r, idOf(w.files[0]), "huppy") > 0 })
	w.step()
	time.Sleep(500 * time.Millisecond)
	if err := os.WriteFile(cfgFile, []byte("interval: 100ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(w.files[0])
	waitUntil(t, "the append uploaded at the new interval", func() bool {
		return remoteSize(t, r, idOf(w.files[0]), "huppy") == int64(len(b))
	})
	if !strings.Contains(out.String(), "configuration reloaded") {
		t.Fatalf("no reload in the log:\n%s", out)
	}
}

func idOf(p string) string {
	name := strings.TrimSuffix(filepath.Base(p), ".jsonl")
	return name[strings.LastIndexByte(name, '_')+1:]
}

func openTestRepo(t *testing.T, url string, s3 backend.S3Options) *repo.Repo {
	t.Helper()
	c, err := backend.Open(context.Background(), url, s3)
	if err != nil {
		t.Fatal(err)
	}
	return repo.New(c, repo.NewZstd())
}

// remoteSize is how far the newest generation of a session reaches.
func remoteSize(t *testing.T, r *repo.Repo, id, machine string) int64 {
	invs, err := r.Inventory(context.Background(), id, machine)
	if err != nil {
		return 0
	}
	for _, inv := range invs {
		if g := inv.Newest(); g != nil && inv.Stream.Name == repo.SessionStream {
			_, covered := repo.Cover(g.Chunks)
			return covered
		}
	}
	return 0
}
