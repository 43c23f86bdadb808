package restore

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/repo"
)

// A large blob is restored as it streams in (hashed on the way to a temp
// file that is linked into place once its bytes match its name), not held
// whole: restoring a 32 MiB blob allocates a fraction of it. Reading it
// whole took 3.5 times its size.
func TestRestoreStreamsBlobs(t *testing.T) {
	r := fileRemote(t)
	src := newMachine(t, r, "laptop")
	blob := make([]byte, 32<<20)
	rand.Read(blob)
	name := repo.HashHex(blob)
	src.write("blobs/"+name, blob, base)
	f := corpus(t)[4]
	rel := sessionPath("-w", f.id, 1)
	src.write(rel, append(bytes.Clone(f.data), fmt.Sprintf(`{"type":"message","id":"b10b0001","parentId":null,"timestamp":"2026-10-07T02:00:00.000Z","image":"blob:sha256:%s"}`+"\n", name)...), base)
	src.backup()
	blob = nil

	to := t.TempDir()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rep, err := Run(context.Background(), r, []string{f.id}, Options{AgentDir: to})
	runtime.ReadMemStats(&after)
	if err != nil || !rep.OK() || rep.Results[0].Blobs != 1 {
		t.Fatalf("restore: %+v, %v", rep, err)
	}
	got, err := os.ReadFile(filepath.Join(to, "blobs", name))
	if err != nil || repo.HashHex(got) != name {
		t.Fatalf("restored blob: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("restoring a 32 MiB blob allocated %d MiB", n>>20)
	}
	entries, _ := os.ReadDir(to)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".ompsync-blob-") {
			t.Errorf("temp file %s left in the agent dir", e.Name())
		}
	}
}
