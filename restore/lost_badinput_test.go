package restore

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/ompsync/ompsync/repo"
)

// A remote that lost the last chunk of a generation (a lifecycle rule, a
// careless hand) while the catalog still records its full size: the copy
// left is a verified prefix, but restore must not pass it off as the
// session. It reports the session as not restored (or says what is
// missing), and writes no shorter file.
func TestRestoreNoticesLostTail(t *testing.T) {
	r := fileRemote(t)
	src := newMachine(t, r, "laptop")
	f := corpus(t)[0]
	rel := sessionPath("-.omp-work", f.id, 1)
	src.write(rel, f.data, base)
	src.backup()
	more := bytes.Repeat([]byte(`{"type":"message","id":"1a570001","parentId":null,"timestamp":"2026-10-07T02:00:00.000Z"}`+"\n"), 3)
	src.appendTo(rel, string(more), base.Add(time.Minute))
	src.backup()

	// The remote loses the chunk holding the appended lines.
	invs, err := r.Inventory(context.Background(), f.id, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	var lost string
	for _, inv := range invs {
		if inv.Stream.Name == repo.SessionStream {
			g := inv.Newest()
			last := g.Chunks[len(g.Chunks)-1]
			lost = inv.Stream.ChunkKey(g.Name, last.Start, last.End)
		}
	}
	if err := r.Client().Delete(context.Background(), lost); err != nil {
		t.Fatal(err)
	}

	dst := newMachine(t, r, "desk")
	rep, err := dst.restore([]string{f.id}, Options{})
	if err == nil && rep.OK() {
		if b, rerr := os.ReadFile(dst.path(rel)); rerr == nil && len(b) < len(f.data)+len(more) {
			t.Fatalf("restore wrote %d of the %d bytes the catalog records and called it %+v", len(b), len(f.data)+len(more), rep.Results)
		}
	}
}
