package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote/backend"
)

// A machine whose catalog the remote lost (its recent changes and chunks
// still there) is not a machine with nothing: ls, restore --all and verify
// each exit 1 naming it and what to do, instead of an empty table and 0.
func TestLostCatalogIsNotNothing(t *testing.T) {
	t.Parallel()
	remoteDir := filepath.Join(t.TempDir(), "remote")
	m := newMachineEnv(t, "file://"+remoteDir, backend.S3Options{}, "laptop")
	m.newSession("019ad000-0000-7000-8000-00000000ca7a", entry("0000ca7a", "", "a session whose catalog goes"))
	if code, out := m.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("agent --once: exit %d\n%s", code, out)
	}
	if err := os.Remove(filepath.Join(remoteDir, "v1", "machines", "laptop", "catalog")); err != nil {
		t.Fatal(err)
	}
	const want = "the catalog of machine laptop is missing from the remote (its recent changes are there), so its sessions are not listed: run 'ompsync agent --once' on laptop to write it again"
	for _, args := range [][]string{{"ls"}, {"restore", "--all", "--to", t.TempDir()}, {"verify"}} {
		code, out := m.ompsync(args...)
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("%s with the catalog lost: exit %d, want 1 and the machine named\n%s", strings.Join(args, " "), code, out)
		}
	}
	// The fix it names works.
	if code, out := m.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("agent --once again: exit %d\n%s", code, out)
	}
	if code, out := m.ompsync("ls"); code != 0 || !strings.Contains(out, "019ad000") {
		t.Errorf("ls after the agent wrote the catalog again: exit %d\n%s", code, out)
	}

	// The machine's whole folder gone (catalog and recent changes):
	// verify still finds the sessions no catalog names.
	if err := os.RemoveAll(filepath.Join(remoteDir, "v1", "machines", "laptop")); err != nil {
		t.Fatal(err)
	}
	code, out := m.ompsync("verify")
	if code != 1 || !strings.Contains(out, "1 sessions on the remote are in no machine's catalog (019ad000-0000-7000-8000-00000000ca7a)") {
		t.Errorf("verify with the machine's folder gone: exit %d, want 1 and the session named\n%s", code, out)
	}
}
