package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/restore"
)

// A running agent's pull finds a checkout cloned after it started, once
// its index of checkouts is older than project.CacheAge; a fresh index is
// not scanned again.
func TestPullRescansOldIndex(t *testing.T) {
	roots := []string{t.TempDir()}
	state := t.TempDir()
	old := &project.Index{Scanned: time.Now().Add(-project.CacheAge - time.Minute), Roots: roots}
	c := &restoreMerger{stateDir: state, roots: roots, pl: &project.Placer{Index: old}, opts: restore.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}

	clone := filepath.Join(roots[0], "code", "app")
	if out, err := exec.Command("git", "init", "-q", clone).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	if out, err := exec.Command("git", "-C", clone, "remote", "add", "origin", "http://127.0.0.1/me/app.git").CombinedOutput(); err != nil {
		t.Fatalf("git remote add: %v %s", err, out)
	}
	pl := c.placer(context.Background())
	if pl == c.pl && pl.Index == old {
		t.Fatal("an index older than an hour was used as it was")
	}
	if len(pl.Index.Of("127.0.0.1/me/app")) != 1 {
		t.Fatalf("the rescan found %+v, want the clone %s", pl.Index.Checkouts, clone)
	}
	if again := c.placer(context.Background()); again != pl {
		t.Error("a fresh index was scanned again")
	}
}

// A session of acme/app recorded in a's ~/src/app, pulled and restored on
// b, whose ~/src/app is a checkout of another repository, is not put there
// (b's agent would continue it in the wrong repository): it stays in the
// folder it recorded, said in a note, in b's agent's folder of that one.
func TestPlaceSkipsHomeFolderOfAnotherRepository(t *testing.T) {
	t.Parallel()
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	a := newMachineEnv(t, url, backend.S3Options{}, "a")
	aCwd := filepath.Join(a.home, "src", "app")
	gitCheckout(t, aCwd, "git@github.com:acme/app.git")
	const id = "019a0000-0000-7000-8000-0000000a0a0a"
	name := "2026-11-30T00-00-00-000Z_" + id + ".jsonl"
	data := titleSlotLine("") + fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-11-30T00:00:00Z","cwd":%q}`+"\n", id, aCwd) + entry("0000a0a0", "", "work in acme/app")
	writeFile(t, filepath.Join(a.agentDir, "sessions", "-src-app", name), data, 0o600)
	a.mustRun(0, "agent", "--once")
	away(t, filepath.Dir(aCwd)) // a's folders are not on b

	b := newMachineEnv(t, url, backend.S3Options{}, "b")
	gitCheckout(t, filepath.Join(b.home, "src", "app"), "git@github.com:other/unrelated.git")
	asRecorded := filepath.Join("sessions", "--"+strings.ReplaceAll(strings.TrimPrefix(aCwd, "/"), "/", "-")+"--", name)
	out := b.mustRun(0, "agent", "--once", "--pull")
	if !strings.Contains(out, "no checkout of github.com/acme/app") || strings.Contains(out, "home folder") {
		t.Errorf("the pull does not leave the session where it was recorded, with the note:\n%s", out)
	}
	if got := readFile(t, filepath.Join(b.agentDir, asRecorded)); string(got) != data {
		t.Errorf("the pulled session is not a's, in %s:\n%s", asRecorded, got)
	}
	if _, err := os.Stat(filepath.Join(b.agentDir, "sessions", "-src-app")); err == nil {
		t.Error("the session is in sessions/-src-app, where b's omp keeps the sessions of b's ~/src/app")
	}

	c := newMachineEnv(t, url, backend.S3Options{}, "c")
	gitCheckout(t, filepath.Join(c.home, "src", "app"), "git@github.com:other/unrelated.git")
	out = c.mustRun(0, "restore", id[:8])
	if !strings.Contains(out, "created      "+id+"  "+asRecorded) || !strings.Contains(out, "note: no checkout of github.com/acme/app") {
		t.Errorf("restore does not leave the session where it was recorded, with the note:\n%s", out)
	}
}

// A session whose local file records a folder not on this machine (its
// checkout moved away) gets another machine's new turns by restore, and a
// resume hint that points at no note when none is printed.
func TestResumeHintWithoutNote(t *testing.T) {
	t.Parallel()
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	a := newMachineEnv(t, url, backend.S3Options{}, "a")
	cwd := filepath.Join(a.home, "moved", "app")
	const id = "019a0000-0000-7000-8000-0000000b0b0b"
	writeFile(t, filepath.Join(a.agentDir, "sessions", "-moved-app", "2026-11-30T00-00-00-000Z_"+id+".jsonl"),
		titleSlotLine("")+fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-11-30T00:00:00Z","cwd":%q}`+"\n", id, cwd)+entry("0000b0b0", "", "first"), 0o600)
	a.mustRun(0, "agent", "--once")
	b := newMachineEnv(t, url, backend.S3Options{}, "b")
	b.mustRun(0, "agent", "--once", "--pull")
	old := time.Now().Add(-time.Hour) // not "changed just now"
	if err := os.Chtimes(b.sessionFile(id), old, old); err != nil {
		t.Fatal(err)
	}
	a.appendSession(id, entry("0000b0b1", "0000b0b0", "more on a"))
	a.mustRun(0, "agent", "--once")

	out := b.mustRun(0, "restore", id[:8])
	want := "resume it with: omp --resume " + id + ", once its folder " + cwd + " is on this machine\n"
	if !strings.Contains(out, "appended") || !strings.Contains(out, want) || strings.Contains(out, "note") {
		t.Errorf("restore into a local file whose folder is gone does not end with %q (and no note):\n%s", want, out)
	}
}
