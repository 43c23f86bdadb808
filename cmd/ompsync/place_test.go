package main

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ompsync/ompsync/project"
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
