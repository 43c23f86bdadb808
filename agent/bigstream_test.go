package agent

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/repo"
)

// A file past the bound a restore takes (repo.MaxStreamSize) is refused at
// backup by name, the pass failing (agent --once exits non-zero), with
// nothing of it uploaded past what went up before it grew: restore would
// refuse the whole stream, and with it the session. The sessions beside it
// still go up. Files are sparse: a size past the bound without the disk.
func TestStreamPastLimitRefused(t *testing.T) {
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, c)
	e.writeRename(ompRel, corpus(t, ompFile))
	art := strings.TrimSuffix(ompRel, ".jsonl") + "/bash-1.log"
	e.write(art, []byte("early output\n"))
	e.once()
	stream := repo.ArtifactStream("bash-1.log")
	if got, _ := e.remoteStream(ompID, stream); string(got) != "early output\n" {
		t.Fatalf("artifact on the remote: %q", got)
	}

	// The artifact grows past the bound.
	if err := os.Truncate(e.path(art), repo.MaxStreamSize+1); err != nil {
		t.Fatal(err)
	}
	err = e.tryOnce()
	if err == nil || !strings.Contains(err.Error(), art) || !strings.Contains(err.Error(), "more than restore takes (a file: at most 1073741824 bytes)") || !strings.Contains(err.Error(), "add it to exclude") {
		t.Fatalf("pass with an artifact past the bound: %v, want an error naming it", err)
	}
	if gens := e.generations(ompID, stream); len(gens) != 1 {
		t.Fatalf("artifact has %d generations on the remote, want the one uploaded before it grew", len(gens))
	}
	if got, _ := e.remoteStream(ompID, stream); string(got) != "early output\n" {
		t.Fatalf("artifact on the remote after it grew past the bound: %d bytes, want the 13 uploaded before", len(got))
	}
	e.assertRemoteEquals(ompRel, ompID)

	// A session file past the bound from the start: nothing of it goes up.
	const id2 = "01a114cf-3468-75b3-a966-2e83bd99529d"
	rel2 := "sessions/-.omp-work/2026-10-07T00-45-41-000Z_" + id2 + ".jsonl"
	e.write(rel2, corpus(t, "omp-v18-title-slot-vietnamese-unicode_01a114cf.jsonl"))
	if err := os.Truncate(e.path(rel2), repo.MaxStreamSize+1); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(e.path(art), 13); err != nil { // back as it was: only the session fails
		t.Fatal(err)
	}
	err = e.tryOnce()
	if err == nil || !strings.Contains(err.Error(), rel2) || !strings.Contains(err.Error(), "more than restore takes") {
		t.Fatalf("pass with a session past the bound: %v, want an error naming it", err)
	}
	if gens := e.generations(id2, repo.SessionStream); len(gens) != 0 {
		t.Fatalf("session past the bound: %d generations on the remote, want none", len(gens))
	}
}

// A file past the bound stays past it until someone acts: one running
// agent says so once (then a reminder now and then), not at every pass.
func TestStreamPastLimitSaidOnce(t *testing.T) {
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, c)
	e.writeRename(ompRel, corpus(t, ompFile))
	if err := os.Truncate(e.path(ompRel), repo.MaxStreamSize+1); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	e.opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i := range 4 {
		if err := a.Once(t.Context()); err == nil || !strings.Contains(err.Error(), "more than restore takes") {
			t.Fatalf("pass %d: %v, want the file refused", i, err)
		}
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 || !strings.Contains(logs.String(), `msg="cannot back up; its backup stays as it was`) {
		t.Fatalf("%d ERROR lines over 4 passes, want 1 saying it cannot be backed up:\n%s", n, logs.String())
	}
}
