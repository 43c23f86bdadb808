package main

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote/backend"
)

// An agent dir that already holds archived sessions when ompsync is first
// installed: omp's gc moved a session's artifact folder, uncompressed,
// beside its gzip, and older omp archived a plain .jsonl. The first backup
// takes all of it, a session archived after its artifacts went up uploads
// none of their bytes again, and restore --all gives back every file byte
// for byte (artifacts with their mtimes), beside the session files under
// sessions/.
func TestArchivedArtifactsBackedUp(t *testing.T) {
	t.Parallel()
	e := newRestoreEnv(t, "file://"+filepath.Join(t.TempDir(), "remote"), backend.S3Options{}, "laptop")
	files := corpusSessions(t)
	if len(files) < 3 {
		t.Fatalf("%d corpus sessions, want 3", len(files))
	}
	old := time.Now().Add(-40 * 24 * time.Hour).Truncate(time.Second)
	want := map[string][]byte{}         // rel under the restored agent dir: bytes
	wantMtime := map[string]time.Time{} // the artifacts'
	artifact := func(folder, inner, body string, mtime time.Time) {
		e.write(folder+"/"+inner, []byte(body), mtime)
		rel := strings.TrimPrefix(folder, "archive/") + "/" + inner
		want[rel], wantMtime[rel] = []byte(body), mtime
	}
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}

	// Archived by omp's gc: a gzip and its artifact folder beside it.
	s0 := files[0]
	a0 := "archive/" + s0.rel + ".gz"
	e.write(a0, gz(s0.data), old)
	want[s0.rel] = s0.data
	artifact("archive/"+strings.TrimSuffix(s0.rel, ".jsonl"), "bash-1.log", "tool output that matters\n", old)
	artifact("archive/"+strings.TrimSuffix(s0.rel, ".jsonl"), "sub/0-task.jsonl", "{\"type\":\"session\"}\n", old.Add(time.Minute))
	// Archived by older omp: plain.
	s1 := files[1]
	e.write("archive/"+s1.rel, s1.data, old)
	want[s1.rel] = s1.data
	// Live, with an artifact: archived after its first backup.
	s2 := files[2]
	e.write(s2.rel, s2.data, old)
	want[s2.rel] = s2.data
	artifact(strings.TrimSuffix(s2.rel, ".jsonl"), "bash-2.log", strings.Repeat("later archived\n", 1000), old)

	if r := e.run("agent", "--once"); r.code != 0 {
		t.Fatalf("agent --once: %d %s", r.code, r.stderr)
	}
	remoteDir := strings.TrimPrefix(e.url, "file://")
	chunks := func(id string) []string {
		var out []string
		filepath.WalkDir(filepath.Join(remoteDir, "v1", "sessions", id), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.Contains(p, "/artifacts/") && d.Name() != "meta" {
				out = append(out, p)
			}
			return nil
		})
		sort.Strings(out)
		return out
	}
	if got := chunks(s0.id); len(got) < 2 {
		t.Fatalf("archived session's artifacts on the remote: %q, want both files' chunks", got)
	}
	before := chunks(s2.id)
	if len(before) == 0 {
		t.Fatal("the live session's artifact is not on the remote")
	}

	// omp gc archives s2: its file gzipped, its artifact folder moved.
	e.write("archive/"+s2.rel+".gz", gz(s2.data), old)
	if err := os.Remove(e.path(s2.rel)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(e.path(strings.TrimSuffix(s2.rel, ".jsonl")), e.path("archive/"+strings.TrimSuffix(s2.rel, ".jsonl"))); err != nil {
		t.Fatal(err)
	}
	if r := e.run("agent", "--once"); r.code != 0 {
		t.Fatalf("agent --once after gc: %d %s", r.code, r.stderr)
	}
	if after := chunks(s2.id); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("artifact chunks after the session was archived:\n%s\nwant those uploaded while live:\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}

	to := t.TempDir()
	if r := e.run("restore", "--all", "--to", to); r.code != 0 {
		t.Fatalf("restore --all: %d %s %s", r.code, r.stdout, r.stderr)
	}
	got := map[string]bool{}
	filepath.WalkDir(to, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(to, p)
			got[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	for rel, data := range want {
		b, err := os.ReadFile(filepath.Join(to, filepath.FromSlash(rel)))
		if err != nil || !bytes.Equal(b, data) {
			t.Errorf("%s restored: %d bytes (%v), want its %d", rel, len(b), err, len(data))
			continue
		}
		if m, ok := wantMtime[rel]; ok {
			if fi, _ := os.Stat(filepath.Join(to, filepath.FromSlash(rel))); !fi.ModTime().Equal(m) {
				t.Errorf("%s restored with mtime %v, want %v", rel, fi.ModTime(), m)
			}
		}
		delete(got, rel)
	}
	for rel := range got {
		t.Errorf("restore wrote %s, which the agent dir did not hold", rel)
	}
}
