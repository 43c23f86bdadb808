package restore

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/repotest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// flipObject flips a byte in the middle of the stored object at key.
func flipObject(t *testing.T, c remote.Client, key string) {
	t.Helper()
	rc, err := c.Get(context.Background(), key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := c.Put(context.Background(), key, b, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestRepairChunks: a chunk flipped on the remote is put back from the
// local file and verify is clean after; once the local bytes changed too,
// it is reported and nothing is written.
func TestRepairChunks(t *testing.T) {
	eachRemote(t, func(t *testing.T, r *repo.Repo) {
		ctx := context.Background()
		m := newMachine(t, r, "laptop")
		f := corpus(t)[0]
		rel := sessionPath("-w", f.id, 0)
		m.write(rel, f.data, base)
		m.backup()
		for i := range 2 {
			m.appendTo(rel, `{"type":"message","id":"a000000`+itoa(i)+`","parentId":null,"timestamp":"2026-10-07T02:00:00.000Z"}`+"\n", base.Add(time.Duration(i+1)*time.Minute))
			m.backup()
		}
		invs, err := r.Inventory(ctx, f.id, "laptop")
		if err != nil {
			t.Fatal(err)
		}
		var s repo.Stream
		var g *repo.Generation
		for _, inv := range invs {
			if inv.Stream.Name == repo.SessionStream {
				s, g = inv.Stream, inv.Newest()
			}
		}
		if g == nil || len(g.Chunks) < 3 {
			t.Fatalf("want 3 chunks, got %+v", g)
		}
		mid := g.Chunks[1]
		flipObject(t, r.Client(), s.ChunkKey(g.Name, mid.Start, mid.End))
		if checks, _, _ := Verify(ctx, r, nil, Options{AgentDir: m.agentDir}); len(checks) != 1 || !checks[0].Damaged() {
			t.Fatalf("verify after the flip: %+v", checks)
		}
		ds, err := RepairChunks(ctx, r, store.OMP(), m.agentDir, "laptop", f.id, rel)
		if err != nil || len(ds) != 1 || !ds[0].Repaired {
			t.Fatalf("repair: %v %+v", err, ds)
		}
		if checks, _, _ := Verify(ctx, r, nil, Options{AgentDir: m.agentDir}); len(checks) != 1 || !checks[0].OK() {
			t.Fatalf("verify after the repair: %+v", checks)
		}

		// A chunk deleted: the gap is put again from the local file.
		if err := r.Client().Delete(ctx, s.ChunkKey(g.Name, mid.Start, mid.End)); err != nil {
			t.Fatal(err)
		}
		if checks, _, _ := Verify(ctx, r, nil, Options{AgentDir: m.agentDir}); len(checks) != 1 || !checks[0].Damaged() {
			t.Fatalf("verify after the delete: %+v", checks)
		}
		ds, err = RepairChunks(ctx, r, store.OMP(), m.agentDir, "laptop", f.id, rel)
		if err != nil || len(ds) != 1 || !ds[0].Repaired || ds[0].Problem != "missing" || ds[0].Start != mid.Start || ds[0].End != mid.End {
			t.Fatalf("repair of the deleted chunk: %v %+v", err, ds)
		}
		if checks, _, _ := Verify(ctx, r, nil, Options{AgentDir: m.agentDir}); len(checks) != 1 || !checks[0].OK() {
			t.Fatalf("verify after the repair of the deleted chunk: %+v", checks)
		}

		// The local bytes of the damaged range changed too: not repaired.
		flipObject(t, r.Client(), s.ChunkKey(g.Name, mid.Start, mid.End))
		b := m.read(rel)
		b[mid.Start] ^= 1
		if err := os.WriteFile(m.path(rel), b, 0o600); err != nil {
			t.Fatal(err)
		}
		ds, err = RepairChunks(ctx, r, store.OMP(), m.agentDir, "laptop", f.id, rel)
		if err != nil || len(ds) != 1 || ds[0].Repaired || !strings.Contains(ds[0].Why, "local copy changed") {
			t.Fatalf("repair of a changed local copy: %v %+v", err, ds)
		}
		if checks, _, _ := Verify(ctx, r, nil, Options{AgentDir: m.agentDir}); len(checks) != 1 || !checks[0].Damaged() {
			t.Fatalf("verify after the refused repair: %+v", checks)
		}
	})
}

// TestRepairBlob: a blob flipped or deleted on the remote is put again from
// the local file, which hashes to its name; one whose local bytes changed
// is reported and the remote object left as it was.
func TestRepairBlob(t *testing.T) {
	eachRemote(t, func(t *testing.T, r *repo.Repo) {
		ctx := context.Background()
		dir := t.TempDir()
		data := []byte("a blob omp stored")
		name := repo.HashHex(data)
		if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "blobs", name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := repotest.PutBlob(ctx, r, name, data); err != nil {
			t.Fatal(err)
		}
		for _, damage := range []func(){
			func() { flipObject(t, r.Client(), repo.BlobKey(name)) },
			func() {
				if err := r.Client().Delete(ctx, repo.BlobKey(name)); err != nil {
					t.Fatal(err)
				}
			},
		} {
			damage()
			if d := RepairBlob(ctx, r, dir, name); !d.Repaired {
				t.Fatalf("repair: %+v", d)
			}
			if got, err := r.GetBlob(ctx, name, 1<<20); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("the blob after the repair: %q %v", got, err)
			}
		}
		flipObject(t, r.Client(), repo.BlobKey(name))
		rc, err := r.Client().Get(ctx, repo.BlobKey(name), 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		stored, _ := io.ReadAll(rc)
		rc.Close()
		if err := os.WriteFile(filepath.Join(dir, "blobs", name), []byte("other bytes"), 0o600); err != nil {
			t.Fatal(err)
		}
		if d := RepairBlob(ctx, r, dir, name); d.Repaired || !strings.Contains(d.Why, "local copy changed too") {
			t.Fatalf("repair with the local blob changed: %+v", d)
		}
		rc, err = r.Client().Get(ctx, repo.BlobKey(name), 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		after, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(after, stored) {
			t.Error("the refused repair changed the remote blob")
		}
	})
}
