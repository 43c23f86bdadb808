package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A sessions folder that is a symlink is backed up as the folder; a
// symlink loop inside it is not followed, is named once however many
// passes see it, and is counted in the totals line of each run.
func TestSessionsRootSymlinkAndLoop(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	disk2 := filepath.Join(t.TempDir(), "sessions")
	if err := os.Rename(e.path("sessions"), disk2); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(disk2, e.path("sessions")); err != nil {
		t.Fatal(err)
	}
	ids := e.writeSessions(3)
	// A cwd folder linking back to the sessions folder: a loop.
	if err := os.Symlink(disk2, filepath.Join(disk2, "-loop")); err != nil {
		t.Fatal(err)
	}
	logs := e.logTo()
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for range 3 {
		if err := a.Once(context.Background()); err != nil {
			t.Fatalf("agent --once: %v", err)
		}
	}
	for rel, id := range ids {
		e.assertRemoteEquals(rel, id)
	}
	if n := strings.Count(logs.String(), "not following a symlink"); n != 1 || !strings.Contains(logs.String(), "path=sessions/-loop") {
		t.Errorf("%d lines say the loop is not followed, want 1 naming it:\n%s", n, logs)
	}
	if tot := a.Totals(); !strings.HasSuffix(tot, "; 1 symlink not followed (see above)") {
		t.Errorf("totals line: %q", tot)
	}
}
