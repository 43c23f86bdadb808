package restore

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/repo"
)

// What the backup holds of a session and the restore could not write makes
// the session incomplete, never "restored": a blob a catalog lists that the
// remote lost, an artifact with something else in its place. A blob no
// catalog lists (never backed up) is only a note.
func TestRestoreIncomplete(t *testing.T) {
	r := fileRemote(t)
	src := newMachine(t, r, "laptop")
	f := corpus(t)[0]
	blob := []byte("\x89PNG a blob the remote will lose")
	blobName := repo.HashHex(blob)
	never := strings.Repeat("0f", 32) // referenced, never on disk
	src.write("blobs/"+blobName, blob, base)
	rel := sessionPath("-.omp-work", f.id, 1)
	data := append(bytes.Clone(f.data), fmt.Sprintf(`{"type":"message","id":"b10b0001","parentId":null,"timestamp":"2026-10-07T02:00:00.000Z","image":"blob:sha256:%s","other":"blob:sha256:%s"}`+"\n", blobName, never)...)
	src.write(rel, data, base)
	art := strings.TrimSuffix(rel, ".jsonl") + "/tool-1.log"
	src.write(art, []byte("a tool's output\n"), base)
	src.backup()
	if err := r.Client().Delete(t.Context(), repo.BlobKey(blobName)); err != nil {
		t.Fatal(err)
	}

	dst := newMachine(t, r, "desk")
	// Something else where the artifact goes.
	if err := os.MkdirAll(dst.path(art), 0o700); err != nil {
		t.Fatal(err)
	}
	rep, err := dst.restore([]string{f.id[:8]}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results[0]
	if res.Action != Created || res.OK() || rep.OK() {
		t.Fatalf("restore with a lost blob and a blocked artifact: action %s, OK %v", res.Action, res.OK())
	}
	if !bytes.Equal(dst.read(rel), data) {
		t.Fatal("the session file itself was not restored")
	}
	missing := strings.Join(res.Missing, "\n")
	for _, want := range []string{"blob " + blobName + " was backed up but is no longer on the remote", "tool-1.log: something else is in its place"} {
		if !strings.Contains(missing, want) {
			t.Errorf("missing %q, want it to say %q", missing, want)
		}
	}
	if strings.Contains(missing, never) || !strings.Contains(strings.Join(res.Notes, "\n"), "blob "+never+" is referenced but not on the remote") {
		t.Errorf("a blob never backed up: missing %q, notes %q; want a note only", res.Missing, res.Notes)
	}
}
