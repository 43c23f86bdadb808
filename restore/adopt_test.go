package restore

import (
	"bytes"
	"crypto/sha256"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/mergeref"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/session"
)

// A copy that already holds every line (a merge made on another machine)
// is taken as it is, not merged again; when the local file holds every
// line too, in another order, both machines keep the one whose lines hash
// smaller, so they converge on the same bytes whichever runs the restore.
func TestRestoreAdoptsCompleteCopy(t *testing.T) {
	f := corpus(t)[0]
	common := data4(t, f.data) // past a comparison buffer: read through
	last := lastEntryID(t, common)
	a := entry("aaaa9001", last, base.Add(time.Hour), "work here")
	b := entry("bbbb9001", last, base.Add(2*time.Hour), "work there")
	ab := append(append(bytes.Clone(common), a...), b...)
	ba := append(append(bytes.Clone(common), b...), a...)
	mine := append(bytes.Clone(common), a...)
	rel := sessionPath("-w", f.id, 1)
	body := func(d []byte) [32]byte { return sha256.Sum256(d[session.SlotLen(d):]) }
	smaller := ab
	if sa, sb := body(ab), body(ba); bytes.Compare(sb[:], sa[:]) < 0 {
		smaller = ba
	}
	for _, tc := range []struct {
		name          string
		local, remote []byte
		want          []byte
		action        Action
	}{
		{"the remote holds every line", mine, ba, ba, Merged},
		{"both hold every line", ab, ba, smaller, map[bool]Action{true: Unchanged, false: Merged}[bytes.Equal(smaller, ab)]},
		{"both hold every line, the other way", ba, ab, smaller, map[bool]Action{true: Unchanged, false: Merged}[bytes.Equal(smaller, ba)]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fileRemote(t)
			_, gen := putSession(t, r, "desk", f.id, rel, tc.remote)
			putCatalog(t, r, "desk", repo.CatalogEntry{ID: f.id, Path: rel, Generation: gen, Size: int64(len(tc.remote)), Mtime: base, State: repo.StatePresent, Changed: base})
			m := newMachine(t, r, "laptop")
			m.write(rel, tc.local, base.Add(-time.Hour))
			res := m.restoreOK([]string{f.id}, Options{}).Results[0]
			if got := m.read(rel); res.Action != tc.action || !bytes.Equal(got, tc.want) {
				t.Fatalf("%s, %d bytes; want %s and the bytes of the copy taken (%d)", res.Action, len(got), tc.action, len(tc.want))
			}
			noTempFiles(t, m.agentDir)
		})
	}
}

// A dry run of copies that diverged merges them as a restore would (the
// merge's temp file in the system's temp folder) to say what it would
// write, and leaves the agent dir and the temp folder as they were.
func TestRestoreDryRunMerge(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	common := data4(t, f.data)
	mine, theirs := diverged(t, common)
	rel := sessionPath("-w", f.id, 1)
	putDesk(t, r, f.id, rel, theirs)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	b := newMachine(t, r, "laptop")
	b.write(rel, mine, base.Add(-time.Hour))
	before := snapshot(t, b.agentDir)
	want, err := mergeref.OMP(mine, theirs)
	if err != nil {
		t.Fatal(err)
	}
	res := b.restoreOK([]string{f.id}, Options{DryRun: true}).Results[0]
	if res.Action != Merged || res.Bytes != int64(len(want)) {
		t.Fatalf("dry run: %+v, want merged, %d bytes", res, len(want))
	}
	sameTree(t, before, snapshot(t, b.agentDir), func(string) bool { return true }, "sessions")
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("left in the temp folder: %v", left)
	}
}

// A copy of millions of tiny lines that went on apart from the local file
// (as a damaged or hostile remote may hold) costs the merge no more than
// its bound: the index stops at restore.max_merge_size with the one-line
// error, having allocated about that much, not what the lines' count
// would take, and the local file is untouched.
func TestRestoreMergeOfTinyLinesBounded(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	mine := append(bytes.Clone(f.data), entry("aaaa9001", lastEntryID(t, f.data), base.Add(time.Hour), "work here")...)
	theirs := append(bytes.Clone(f.data), bytes.Repeat([]byte("{}\n"), 8<<20)...) // 24 MiB, 8 million lines
	rel := sessionPath("-w", f.id, 1)
	putDesk(t, r, f.id, rel, theirs)

	b := newMachine(t, r, "laptop")
	b.write(rel, mine, base.Add(-time.Hour))
	const bound = 16 << 20
	var rep *Report
	alloc := allocated(func() {
		var err error
		if rep, err = b.restore([]string{f.id}, Options{MaxMergeSize: bound}); err != nil {
			t.Fatal(err)
		}
	})
	res := rep.Results[0]
	if rep.OK() || res.Action != Failed || !strings.Contains(res.Error, "restore.max_merge_size") || strings.Contains(res.Error, "\n") {
		t.Fatalf("a merge of 8 million lines within 16 MiB: %+v", res)
	}
	t.Logf("allocated %d MiB", alloc>>20)
	if alloc > 4*bound+uint64(len(theirs)) {
		t.Errorf("the refused merge allocated %d MiB, bound %d MiB", alloc>>20, bound>>20)
	}
	if got := b.read(rel); !bytes.Equal(got, mine) {
		t.Fatal("the local file changed")
	}
	noTempFiles(t, b.agentDir)
}
