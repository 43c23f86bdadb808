package restore

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/tmpfstest"
)

// Appending to a shorter local copy on a disk that fills up leaves the file
// exactly as it was (no torn last line for omp to glue onto), whether the
// disk is too full for the verified copy the tail comes from or only for
// the tail; the same restore with space completes it.
func TestRestoreAppendOnFullDisk(t *testing.T) {
	big := corpus(t)[0]
	// Past what a copy may hold in memory: it streams to a temp file.
	big.data, _ = grown(big.data, spillAt*3/2, "f1")
	r := fileRemote(t)
	rel := sessionPath("-.omp-work", big.id, 1)
	a := newMachine(t, r, "desktop")
	a.write(rel, big.data, base)
	a.backup()

	b := newMachine(t, r, "laptop")
	b.agentDir = tmpfstest.Mount(t, "8m")
	prefix := big.data[:bytes.IndexByte(big.data[4096:], '\n')+4097]
	b.write(rel, prefix, base.Add(-time.Hour))
	filler := filepath.Join(b.agentDir, "filler")
	older := retitled(t, big.data, "Older", "2020-01-01T00:00:00.000Z")
	for _, tc := range []struct {
		name  string
		local []byte
		free  int64  // bytes left free
		want  string // in the error
	}{
		{"too full for the copy", prefix, int64(len(big.data)) / 2, "no local file was touched"},
		{"too full for the tail", prefix, int64(len(big.data)) * 3 / 2, "append to"},
		// All there but an older title: the file is rewritten whole,
		// through a temp file there is no room for beside the copy.
		{"too full to retitle", older, int64(len(big.data)) * 3 / 2, "replacing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.write(rel, tc.local, base.Add(-time.Hour))
			var st syscall.Statfs_t
			if err := syscall.Statfs(b.agentDir, &st); err != nil {
				t.Fatal(err)
			}
			fill := int64(st.Bavail)*st.Bsize - tc.free
			if err := os.WriteFile(filler, make([]byte, fill), 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(filler)
			rep, err := b.restore([]string{big.id[:8]}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			res := rep.Results[0]
			if rep.OK() || res.Action != Failed || !strings.Contains(res.Error, tc.want) || !strings.Contains(res.Error, "left as it was") || !strings.Contains(res.Error, "free some space and restore again") {
				t.Fatalf("restore onto a full disk: %+v", res)
			}
			if got := b.read(rel); !bytes.Equal(got, tc.local) {
				t.Fatalf("after a failed write the file has %d bytes, want the %d it had", len(got), len(tc.local))
			}
			if fi, err := os.Stat(b.path(rel)); err != nil || !fi.ModTime().Equal(base.Add(-time.Hour)) {
				t.Fatalf("after a failed append: mtime %v (%v), want it unchanged", fi.ModTime(), err)
			}
			noTempFiles(t, b.agentDir)
		})
	}

	b.write(rel, prefix, base.Add(-time.Hour))
	if res := b.restoreOK([]string{big.id[:8]}, Options{}).Results[0]; res.Action != Appended {
		t.Fatalf("with space: %+v", res)
	}
	if got := b.read(rel); !bytes.Equal(got, big.data) {
		t.Fatalf("with space: %d bytes, want %d", len(got), len(big.data))
	}
}

// A new session on a disk too full for it fails with the disk's error:
// nothing appears under its name and no temp file is left; with room the
// same restore creates it.
func TestRestoreNewSessionOnFullDisk(t *testing.T) {
	f := corpus(t)[0]
	r := fileRemote(t)
	rel := sessionPath("-.omp-work", f.id, 1)
	a := newMachine(t, r, "desktop")
	a.write(rel, f.data, base)
	a.backup()

	b := newMachine(t, r, "laptop")
	b.agentDir = tmpfstest.Mount(t, "8m")
	if err := os.MkdirAll(filepath.Dir(b.path(rel)), 0o700); err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(b.agentDir, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(b.agentDir, "filler")
	if err := os.WriteFile(filler, make([]byte, int64(st.Bavail)*st.Bsize-int64(len(f.data))/2), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := b.restore([]string{f.id[:8]}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res := rep.Results[0]; rep.OK() || res.Action != Failed || !strings.Contains(res.Error, "no space left") || !strings.Contains(res.Error, "free some space and restore again") || len(f.data) >= spillAt {
		t.Fatalf("a new session (%d bytes, held in memory) on a full disk: %+v", len(f.data), res)
	}
	if _, err := os.Lstat(b.path(rel)); !os.IsNotExist(err) {
		t.Fatalf("after a failed restore something is at the session's name: %v", err)
	}
	noTempFiles(t, b.agentDir)
	os.Remove(filler)
	if res := b.restoreOK([]string{f.id[:8]}, Options{}).Results[0]; res.Action != Created {
		t.Fatalf("with space: %+v", res)
	}
	if got := b.read(rel); !bytes.Equal(got, f.data) {
		t.Fatalf("with space: %d bytes, want %d", len(got), len(f.data))
	}
}
