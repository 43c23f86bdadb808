package restore

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/mergeref"
	"github.com/ompsync/ompsync/internal/testkit/tmpfstest"
)

// A merge of diverged copies on a disk that fills up leaves the local file
// exactly as it was, whether the disk is too full for the merge's temp
// file or only for the pre-merge copy kept beside; with space the same
// restore merges to the reference merge's bytes.
func TestRestoreMergeOnFullDisk(t *testing.T) {
	f := corpus(t)[0]
	common, _ := grown(f.data, spillAt*3/2, "f2")
	mine, theirs := diverged(t, common)
	r := fileRemote(t)
	rel := sessionPath("-w", f.id, 1)
	putDesk(t, r, f.id, rel, theirs)

	b := newMachine(t, r, "laptop")
	b.agentDir = tmpfstest.Mount(t, "8m")
	b.write(rel, mine, base.Add(-time.Hour))
	filler := filepath.Join(b.agentDir, "filler")
	for _, tc := range []struct {
		name string
		free int64  // bytes left free
		want string // in the error
	}{
		// Room for the copy streamed from the remote, not for the merge.
		{"too full for the merge", int64(len(theirs)) * 3 / 2, "writing the merge failed, the local file left as it was"},
		// Room for the copy and the merge, not for the pre-merge copy.
		{"too full to keep the local file", int64(len(theirs))*2 + int64(len(mine))/2, "keep the pre-merge file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st syscall.Statfs_t
			if err := syscall.Statfs(b.agentDir, &st); err != nil {
				t.Fatal(err)
			}
			fill := int64(st.Bavail)*st.Bsize - tc.free
			if err := os.WriteFile(filler, make([]byte, fill), 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(filler)
			rep, err := b.restore([]string{f.id[:8]}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			res := rep.Results[0]
			if rep.OK() || res.Action != Failed || !strings.Contains(res.Error, tc.want) || strings.Contains(res.Error, "\n") {
				t.Fatalf("merge onto a full disk: %+v", res)
			}
			if got := b.read(rel); !bytes.Equal(got, mine) {
				t.Fatalf("after a failed merge the file has %d bytes, want the %d it had", len(got), len(mine))
			}
			if fi, err := os.Stat(b.path(rel)); err != nil || !fi.ModTime().Equal(base.Add(-time.Hour)) {
				t.Fatalf("after a failed merge: mtime %v (%v), want it unchanged", fi.ModTime(), err)
			}
			noTempFiles(t, b.agentDir)
			if left, _ := filepath.Glob(b.path(filepath.Dir(rel) + "/.*.pre-merge-*")); len(left) > 0 {
				t.Fatalf("a pre-merge file is left: %v", left)
			}
		})
	}

	res := b.restoreOK([]string{f.id[:8]}, Options{}).Results[0]
	want, err := mergeref.OMP(mine, theirs)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.read(rel); res.Action != Merged || !bytes.Equal(got, want) {
		t.Fatalf("with space: %+v, %d bytes, want %d", res, len(got), len(want))
	}
	noTempFiles(t, b.agentDir)
}
