package agent

import (
	"bytes"
	"compress/gzip"
	"os"
	"path"
	"strings"
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

// omp's gc moves an artifact folder into the archive: its files feed the
// streams they fed while live, uploading no byte again. A session restored
// over its archive has its artifacts in both places: the live ones are the
// source, with no warning on every pass.
func TestArchivedArtifactFolder(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	log := e.logTo()
	orig := corpus(t, ompFile)
	e.writeRename(ompRel, orig)
	live := strings.TrimSuffix(ompRel, ".jsonl") + "/bash-1.log"
	e.write(live, []byte("tool output\n"))
	e.once()
	stream := repo.ArtifactStream("bash-1.log")
	gens := e.generations(ompID, stream)
	if len(gens) != 1 {
		t.Fatalf("%d generations of the artifact, want 1", len(gens))
	}
	chunks := len(gens[0].Chunks)

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(orig)
	zw.Close()
	e.write("archive/"+ompRel+".gz", gz.Bytes())
	os.Remove(e.path(ompRel))
	if err := os.Rename(e.path(path.Dir(live)), e.path("archive/"+path.Dir(live))); err != nil {
		t.Fatal(err)
	}
	e.once()
	gens = e.generations(ompID, stream)
	if len(gens) != 1 || len(gens[0].Chunks) != chunks {
		t.Fatalf("artifact after the folder was archived: %d generations, want the one uploaded while live with its %d chunks", len(gens), chunks)
	}
	if got, meta := e.remoteStream(ompID, stream); string(got) != "tool output\n" || meta.Path != "archive/"+live {
		t.Fatalf("artifact on the remote: %q at %q", got, meta.Path)
	}

	// Restored over the archive: both folders hold it.
	e.writeRename(ompRel, orig)
	e.write(live, []byte("tool output\n"))
	e.once()
	e.once()
	if strings.Contains(log.String(), "two files hold") {
		t.Fatalf("warned of the artifact in both places:\n%s", log)
	}
	if got, meta := e.remoteStream(ompID, stream); string(got) != "tool output\n" || meta.Path != live {
		t.Fatalf("artifact on the remote after the restore: %q at %q, want it from %s", got, meta.Path, live)
	}
	if gens := e.generations(ompID, stream); len(gens) != 1 {
		t.Fatalf("%d generations of the artifact, want 1", len(gens))
	}
}
