package restore

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
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
		ds, err := RepairChunks(ctx, r, "laptop", f.id, m.path(rel))
		if err != nil || len(ds) != 1 || !ds[0].Repaired {
			t.Fatalf("repair: %v %+v", err, ds)
		}
		if checks, _, _ := Verify(ctx, r, nil, Options{AgentDir: m.agentDir}); len(checks) != 1 || !checks[0].OK() {
			t.Fatalf("verify after the repair: %+v", checks)
		}

		// The local bytes of the damaged range changed too: not repaired.
		flipObject(t, r.Client(), s.ChunkKey(g.Name, mid.Start, mid.End))
		b := m.read(rel)
		b[mid.Start] ^= 1
		if err := os.WriteFile(m.path(rel), b, 0o600); err != nil {
			t.Fatal(err)
		}
		ds, err = RepairChunks(ctx, r, "laptop", f.id, m.path(rel))
		if err != nil || len(ds) != 1 || ds[0].Repaired || !strings.Contains(ds[0].Why, "local copy changed") {
			t.Fatalf("repair of a changed local copy: %v %+v", err, ds)
		}
		if checks, _, _ := Verify(ctx, r, nil, Options{AgentDir: m.agentDir}); len(checks) != 1 || !checks[0].Damaged() {
			t.Fatalf("verify after the refused repair: %+v", checks)
		}
	})
}
