package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote/backend"
)

// A restore that could not bring back part of a session (here a blob the
// remote lost) exits 1 with a line that says so: "restored" would be a
// backup that says safe when it is not.
func TestRestoreIncompleteExitsNonZero(t *testing.T) {
	t.Parallel()
	remoteDir := filepath.Join(t.TempDir(), "remote")
	m := newMachineEnv(t, "file://"+remoteDir, backend.S3Options{}, "laptop")
	blob := []byte("\x89PNG an image the remote will lose")
	sum := sha256.Sum256(blob)
	name := hex.EncodeToString(sum[:])
	if err := os.MkdirAll(filepath.Join(m.agentDir, "blobs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.agentDir, "blobs", name), blob, 0o600); err != nil {
		t.Fatal(err)
	}
	const id = "019ad000-0000-7000-8000-00000000b10b"
	m.newSession(id, fmt.Sprintf(`{"type":"message","id":"0000b10b","parentId":null,"timestamp":"2026-11-30T00:00:01Z","message":{"role":"user","content":[{"type":"image","data":"blob:sha256:%s"}]}}`+"\n", name))
	if code, out := m.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("agent --once: exit %d\n%s", code, out)
	}
	if err := os.Remove(filepath.Join(remoteDir, "v1", "blobs", name)); err != nil {
		t.Fatal(err)
	}
	to := t.TempDir()
	code, out := m.ompsync("restore", "--all", "--to", to)
	if code != 1 || !strings.Contains(out, "not restored: blob "+name+" was backed up but is no longer on the remote") ||
		!strings.Contains(out, "1 of 1 sessions restored incomplete") {
		t.Fatalf("restore with a lost blob: exit %d, want 1 and the blob named\n%s", code, out)
	}
	if matches, _ := filepath.Glob(filepath.Join(to, "sessions", "*", "*_"+id+".jsonl")); len(matches) != 1 {
		t.Fatalf("the session file itself was not restored: %v", matches)
	}

	// A pulling agent says so at WARN, once, and keeps trying.
	desk := newMachineEnv(t, "file://"+remoteDir, backend.S3Options{}, "desk")
	cmd, pout := desk.start("agent", "--pull", "--interval", "100ms", "--sync-pull-interval", "200ms")
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	const warn = `level=WARN msg="pull: session merged, but part of what the backup holds was not written; will retry"`
	waitUntil(t, "the pull's warning", func() bool { return strings.Contains(pout.String(), warn) })
	waitUntil(t, "a later pull", func() bool {
		return strings.Count(pout.String(), "pull: session merged, but part of what the backup holds") > 1
	})
	if n := strings.Count(pout.String(), warn); n != 1 {
		t.Errorf("the warning came %d times, want once\n%s", n, pout)
	}
	if !strings.Contains(pout.String(), name) {
		t.Errorf("the warning does not name the blob\n%s", pout)
	}
}
