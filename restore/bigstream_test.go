package restore

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/repo"
)

// An artifact the remote holds past the local bound (repo.MaxStreamSize; an
// agent before the bound uploaded it) is refused, and only it: the session
// file and its other artifacts are written, the artifact is named missing,
// and the session is incomplete (the restore fails). The listing alone says
// the size, so a chunk key claiming the range is all the test uploads.
func TestRestoreArtifactPastLimit(t *testing.T) {
	r := fileRemote(t)
	src := newMachine(t, r, "laptop")
	f := corpus(t)[0]
	rel := sessionPath("-.omp-work", f.id, 1)
	src.write(rel, f.data, base)
	dir := strings.TrimSuffix(rel, ".jsonl")
	src.write(dir+"/small.log", []byte("kept\n"), base)
	src.write(dir+"/big.log", []byte("the first bytes of a huge log\n"), base)
	src.backup()

	s := repo.Stream{SessionID: f.id, Machine: "laptop", Name: repo.ArtifactStream("big.log")}
	invs, err := r.Inventory(t.Context(), f.id, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	var gen string
	for _, inv := range invs {
		if inv.Stream.Name == s.Name {
			gen = inv.Newest().Name
		}
	}
	if gen == "" {
		t.Fatal("big.log is not on the remote")
	}
	putRaw(t, r, s.ChunkKey(gen, 30, repo.MaxStreamSize+1), []byte("never read"))

	dst := newMachine(t, r, "desk")
	rep, err := dst.restore([]string{f.id[:8]}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results[0]
	if res.Action != Created || res.OK() || rep.OK() {
		t.Fatalf("restore with an artifact past the bound: action %s, OK %v, error %q", res.Action, res.OK(), res.Error)
	}
	if !bytes.Equal(dst.read(rel), f.data) {
		t.Fatal("the session file was not restored")
	}
	if got := dst.read(dir + "/small.log"); string(got) != "kept\n" {
		t.Fatalf("the other artifact: %q", got)
	}
	if _, err := os.Lstat(dst.path(dir + "/big.log")); !os.IsNotExist(err) {
		t.Fatalf("big.log was written: %v", err)
	}
	want := "artifact big.log: the copy of machine laptop is 1073741825 bytes, more than the 1073741824 a file may hold (the local limit)"
	if missing := strings.Join(res.Missing, "\n"); missing != want {
		t.Fatalf("missing %q, want %q", missing, want)
	}
}
