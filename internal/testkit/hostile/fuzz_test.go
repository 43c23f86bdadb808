package hostile

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/compact"
	"github.com/ompsync/ompsync/openfiles"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
)

// restoreAll restores --all into a fresh folder and returns the results
// by session and the files it holds afterwards.
func restoreAll(t *testing.T, r *repo.Repo) (map[string]restore.Result, []string, string) {
	t.Helper()
	to := t.TempDir()
	rep, err := restore.Run(t.Context(), r, nil, restore.Options{All: true, AgentDir: to, OpenFiles: &openfiles.Snapshot{}})
	if err != nil {
		t.Fatalf("restore --all beside a good catalog: %v", err)
	}
	byID := map[string]restore.Result{}
	for _, res := range rep.Results {
		byID[res.ID] = res
	}
	var files []string
	filepath.WalkDir(to, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(to, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(files)
	return byID, files, to
}

// A remote generated from the input, against restore, verify and compact
// in process: nothing panics; the good session beside the damage is
// restored whole; the damaged session is refused or restored as exactly
// the bytes it was written with, or the lines before the chunks a remote
// lost from there on when its catalog claims no more (FuzzWant.Allows); nothing is written
// but those and blobs whose bytes are their names, no temp file is left; compaction
// never makes a readable session unreadable; and the whole costs less than
// 1 GiB of allocation whatever the remote claims.
func FuzzHostileRemote(f *testing.F) {
	for _, seed := range [][]byte{
		nil,
		{0, 1, 0}, // a valid session referencing its blob
		{0, 1, 1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},              // the catalog claims 2^62
		{0, 1, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4}, // a zero bomb behind a claimed range
		{0, 1, 2, 4, 1, 6, 1, 4, 2, 5, 0},                                         // reference chains, deep and circular
		{0, 0, 2, 8, 1, 0, 0, 0, 2, 10, 0, 0, 0, 4},                               // blob and catalog bombs
		{0, 1, 3, 3, 1, 7, 1, 7, 6, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 30},    // hashes, gaps, frames
		{0, 1, 0, 2},             // format 2: the meta in the first chunk
		{0, 1, 0, 3},             // format 2: a first chunk without its meta
		{0, 1, 1, 3, 0, 0, 0, 3}, // format 2: the first chunk changed, and no meta
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		ctx := context.Background()
		c := fastRemote(t)
		h, want := Fuzzed(input)
		if err := h.Build(ctx, c); err != nil {
			t.Fatal(err)
		}
		r := repo.New(c, repo.NewZstd())
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)

		check := func(when string) bool {
			got, files, to := restoreAll(t, r)
			good, _ := GoodSession()
			if res := got[GoodID]; res.Action != restore.Created {
				t.Fatalf("%s: the good session: %+v", when, res)
			}
			if b, err := os.ReadFile(filepath.Join(to, GoodRel)); err != nil || !bytes.Equal(b, good) {
				t.Fatalf("%s: the good session restored wrong: %v", when, err)
			}
			allowed := map[string]bool{GoodRel: true}
			bad := got[BadID]
			if bad.OK() {
				b, err := os.ReadFile(filepath.Join(to, bad.Path))
				if err != nil || !want.Allows(b) {
					t.Fatalf("%s: the damaged session was restored as %d bytes that are not the %d it was written with, nor the lines before a chunk the remote lost (%v)", when, len(b), len(want.Data), err)
				}
				allowed[bad.Path] = true
			} else if bad.Action != "" && bad.Action != restore.Refused {
				t.Fatalf("%s: the damaged session: %s %s", when, bad.Action, bad.Error)
			} else if bad.Action == restore.Refused && !strings.Contains(bad.Error, BadID) {
				t.Errorf("%s: the refusal does not name the session: %s", when, bad.Error)
			}
			for _, p := range files {
				// --all brings back every blob on the remote whose bytes
				// are its name, whatever references it.
				if name, ok := strings.CutPrefix(p, "blobs/"); ok {
					if b, err := os.ReadFile(filepath.Join(to, p)); err == nil && repo.HashHex(b) == name {
						continue
					}
				}
				if !allowed[p] {
					t.Errorf("%s: restore wrote %s", when, p)
				}
			}
			return bad.OK()
		}
		readable := check("before compaction")
		if _, _, err := restore.Verify(ctx, r, nil, restore.Options{AgentDir: t.TempDir(), OpenFiles: &openfiles.Snapshot{}}); err != nil {
			t.Fatalf("verify: %v", err)
		}
		// Errors are the damage refused; what matters is what is left.
		compact.Machine(ctx, r, EvilMachine, nil, compact.Policy{Idle: time.Nanosecond}, false)
		if again := check("after compaction"); readable && !again {
			t.Error("compaction made a readable session unreadable")
		}
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<30 {
			t.Errorf("restore, verify, compact and restore allocated %d MiB", n>>20)
		}
	})
}

func fastRemote(t *testing.T) remote.Client {
	t.Helper()
	c, err := NewFastRemote(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
