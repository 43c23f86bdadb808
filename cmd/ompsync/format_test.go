package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote/backend"
)

// The real binary: a first backup into an empty folder makes a format-2
// repository with no meta object (each session's first chunk carries it),
// restore brings every byte back, and a repository of another format (a
// later one, or format 1 of development builds) is refused by every
// command with one line saying what to do.
func TestRepositoryFormat(t *testing.T) {
	remoteDir := filepath.Join(t.TempDir(), "remote")
	m := newMachineEnv(t, "file://"+remoteDir, backend.S3Options{}, "laptop")
	ids := []string{"019ad000-0000-7000-8000-0000000f0201", "019ad000-0000-7000-8000-0000000f0202"}
	var files []string
	for _, id := range ids {
		files = append(files, m.newSession(id, `{"type":"message","id":"0000f201","parentId":null,"timestamp":"2026-11-30T00:00:01Z","message":{"role":"user","content":[{"type":"text","text":"hello"}]}}`+"\n"))
	}
	if code, out := m.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("agent --once: exit %d\n%s", code, out)
	}
	b, err := os.ReadFile(filepath.Join(remoteDir, "ompsync.json"))
	var marker struct{ Format int }
	if err != nil || json.Unmarshal(b, &marker) != nil || marker.Format != 2 {
		t.Fatalf("marker %s (%v): want format 2", b, err)
	}
	var objects []string
	filepath.WalkDir(filepath.Join(remoteDir, "v1", "sessions"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			objects = append(objects, p)
		}
		return nil
	})
	if len(objects) != len(ids) {
		t.Fatalf("the remote holds %d session objects, want %d (one chunk each, no meta): %v", len(objects), len(ids), objects)
	}
	to := t.TempDir()
	if code, out := m.ompsync("restore", "--all", "--to", to); code != 0 {
		t.Fatalf("restore --all: exit %d\n%s", code, out)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(m.agentDir, f)
		got, err := os.ReadFile(filepath.Join(to, rel))
		want, _ := os.ReadFile(f)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("restored %s: %v, %d bytes, want %d", rel, err, len(got), len(want))
		}
	}

	for format, want := range map[int]string{
		3: "repository has format 3; this ompsync reads format 2: upgrade ompsync",
		1: "repository has format 1, written by a development build of ompsync before 0.1.0; this ompsync reads format 2 only: back up to a new, empty remote",
	} {
		if err := os.WriteFile(filepath.Join(remoteDir, "ompsync.json"), fmt.Appendf(nil, `{"format":%d,"created":"2027-01-01T00:00:00Z"}`, format), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"restore", "--all", "--to", t.TempDir()}, {"verify"}, {"agent", "--once"}} {
			code, out := m.ompsync(args...)
			var errs []string // stdout's summary aside
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "ompsync: ") {
					errs = append(errs, l)
				}
			}
			if code == 0 || len(errs) != 1 || !strings.Contains(errs[0], want) {
				t.Errorf("%s on format %d: exit %d, want non-zero and one line with %q:\n%s", strings.Join(args, " "), format, code, want, out)
			}
		}
	}
}
