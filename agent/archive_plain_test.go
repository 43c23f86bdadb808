package agent

import (
	"bytes"
	"testing"
	"time"

	"github.com/ompsync/ompsync/repo"
)

// Older omp moved a cold session into archive/ as it was, not gzipped: it
// is backed up from that file, and bytes the remote loses later are put
// back from it, as from a gzip.
func TestPlainArchiveRefillsLostObjects(t *testing.T) {
	c := newFileClient(t)
	e := newEnv(t, c)
	orig := corpus(t, ompFile)
	e.write("archive/"+ompRel, orig)
	e.once()
	got, meta := e.remoteStream(ompID, repo.SessionStream)
	if !bytes.Equal(got, orig) || meta.Path != ompRel {
		t.Fatalf("plain archive on the remote: %d bytes at %q, want its %d at %q", len(got), meta.Path, len(orig), ompRel)
	}
	if st := e.catalogEntry(ompID).State; st != repo.StateArchived {
		t.Fatalf("state %q, want archived", st)
	}

	gen := e.generations(ompID, repo.SessionStream)[0].Name
	s := repo.Stream{SessionID: ompID, Machine: e.machine, Name: repo.SessionStream}
	if err := c.Delete(t.Context(), s.ChunkKey(gen, 0, int64(len(orig)))); err != nil {
		t.Fatal(err)
	}
	e.opts.AuditInterval = time.Nanosecond
	e.once() // the audit finds the chunk gone
	e.once() // and puts it back from the archive
	if got, _ := e.remoteStream(ompID, repo.SessionStream); !bytes.Equal(got, orig) {
		t.Fatalf("after the remote lost the chunk: %d bytes on the remote, want the archive's %d", len(got), len(orig))
	}
}
