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
		if strings.HasPrefix(e.Name(), ".ompsync-blob.") {
			t.Errorf("temp file %s left in the agent dir", e.Name())
		}
	}
}

// A session restored where there is none streams to its file: restoring
// 64 MiB allocates less than it (about 30 MiB; 516 MiB when it was held
// whole, more than once),
// and the file is the session byte for byte, with its mtime, no temp file
// left.
func TestRestoreStreamsLargeSession(t *testing.T) {
	r := fileRemote(t)
	id := "0190cccc-0000-7000-8000-000000000001"
	rel := sessionPath("-w", id, 1)
	data := putLargeSession(t, r, id, rel)

	to := t.TempDir()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rep, err := Run(context.Background(), r, []string{id}, Options{AgentDir: to})
	runtime.ReadMemStats(&after)
	if err != nil || !rep.OK() || rep.Results[0].Action != Created || rep.Results[0].Bytes != int64(len(data)) {
		t.Fatalf("restore: %+v, %v", rep, err)
	}
	p := filepath.Join(to, filepath.FromSlash(rel))
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("restored %d bytes of %d: %v", len(got), len(data), err)
	}
	if fi, _ := os.Stat(p); !fi.ModTime().Equal(base) {
		t.Errorf("mtime %s, want %s", fi.ModTime(), base)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n >= uint64(len(data)) {
		t.Errorf("restoring 64 MiB allocated %d MiB", n>>20)
	}
	entries, _ := os.ReadDir(to)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".ompsync-") {
			t.Errorf("temp file %s left in the agent dir", e.Name())
		}
	}
}
