package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote/backend"
)

// A chunk of this machine's session flipped on the remote: verify exits 1,
// verify --repair puts it back from the local file and exits 0, verify
// exits 0 after; once the local file changed too, --repair says so and
// exits 1.
func TestVerifyRepairChunk(t *testing.T) {
	remoteDir := filepath.Join(t.TempDir(), "remote")
	m := newMachineEnv(t, "file://"+remoteDir, backend.S3Options{}, "laptop")
	const id = "019ad000-0000-7000-8000-0000000e9a17"
	m.newSession(id, entry("0000e9a1", "", "first"))
	m.mustRun(0, "agent", "--once")
	m.appendSession(id, entry("0000e9a2", "0000e9a1", "second"))
	m.mustRun(0, "agent", "--once")
	m.appendSession(id, entry("0000e9a3", "0000e9a2", "third"))
	m.mustRun(0, "agent", "--once")

	var chunks []string
	err := filepath.Walk(filepath.Join(remoteDir, "v1", "sessions", id, "laptop", "session"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.Contains(filepath.Base(p), "-") && filepath.Base(p) != "meta" && filepath.Base(p) != "head" {
			chunks = append(chunks, p)
		}
		return err
	})
	if err != nil || len(chunks) < 3 {
		t.Fatalf("want 3 chunks on the remote: %v %v", err, chunks)
	}
	flipFile(t, chunks[1], 0xff)
	m.mustRun(1, "verify")
	if out := m.mustRun(0, "verify", "--repair"); !strings.Contains(out, "repaired  "+id) {
		t.Errorf("verify --repair says nothing of what it put back:\n%s", out)
	}
	m.mustRun(0, "verify")
	to := t.TempDir()
	m.mustRun(0, "restore", "--all", "--to", to)
	rel, _ := filepath.Rel(m.agentDir, m.sessionFile(id))
	if got := readFile(t, filepath.Join(to, rel)); !bytes.Equal(got, m.readSession(id)) {
		t.Errorf("the restore after the repair differs from the local file")
	}

	flipFile(t, chunks[1], 0xff)
	flipFile(t, m.sessionFile(id), 1)
	if out := m.mustRun(1, "verify", "--repair"); !strings.Contains(out, "local copy changed") {
		t.Errorf("verify --repair with the local copy changed:\n%s", out)
	}
}

// flipFile damages the file at p: the bits of mask flipped in its middle
// byte.
func flipFile(t *testing.T, p string, mask byte) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= mask
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
