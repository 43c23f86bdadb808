package restore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

func TestVerify(t *testing.T) {
	r := fileRemote(t)
	m := newMachine(t, r, "laptop")
	files := corpus(t)
	blob := []byte("image bytes")
	blobName := repo.HashHex(blob)
	m.write("blobs/"+blobName, blob, base)
	rels := map[string]string{}
	for i, f := range files {
		rels[f.id] = sessionPath("-w", f.id, i)
		data := f.data
		if i == 4 {
			data = append([]byte(string(data)), fmt.Sprintf(`{"type":"message","id":"b10b0001","parentId":null,"timestamp":"2026-10-07T02:00:00.000Z","image":"blob:sha256:%s"}`+"\n", blobName)...)
		}
		m.write(rels[f.id], data, base)
	}
	m.write(strings.TrimSuffix(rels[files[0].id], ".jsonl")+"/tool.log", []byte("log"), base)
	m.backup()

	checks, problems, err := Verify(context.Background(), r, nil, Options{AgentDir: m.agentDir})
	if err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
	if len(checks) != len(files) {
		t.Fatalf("%d checks, want %d", len(checks), len(files))
	}
	for _, c := range checks {
		if !c.OK() {
			t.Errorf("%s: %v", c.ID, c.Problems)
		}
		for _, cc := range c.Copies {
			if cc.Local != LocalSame {
				t.Errorf("%s %s: local %s, want same", c.ID, cc.Stream, cc.Local)
			}
		}
	}
	if len(checks[0].Copies)+len(checks[1].Copies) < 3 {
		t.Errorf("artifact stream not checked: %+v", checks)
	}

	// Local changes are reported, not problems; damage on the remote is.
	m.appendTo(rels[files[1].id], entry("ffff0001", "", base, "not yet uploaded"), base.Add(time.Hour))
	os.Remove(m.path(rels[files[2].id]))
	r.Client().Delete(context.Background(), repo.BlobKey(blobName))
	invs, _ := r.Inventory(context.Background(), files[3].id, "laptop")
	g := invs[0].Newest()
	if err := r.Client().Put(context.Background(), invs[0].Stream.ChunkKey(g.Name, g.Chunks[0].Start, g.Chunks[0].End), []byte("garbage"), remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, m.agentDir)

	var ids []string
	for _, f := range files[1:5] {
		ids = append(ids, f.id[:8])
	}
	checks, _, err = Verify(context.Background(), r, ids, Options{AgentDir: m.agentDir})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		local string
		ok    bool
	}{{LocalAhead, true}, {LocalMissing, true}, {"", false}, {LocalSame, false}}
	for i, c := range checks {
		if c.OK() != want[i].ok {
			t.Errorf("%s: ok %v, want %v (%v)", c.ID, c.OK(), want[i].ok, c.Problems)
		}
		if want[i].local != "" && c.Copies[0].Local != want[i].local {
			t.Errorf("%s: local %s, want %s", c.ID, c.Copies[0].Local, want[i].local)
		}
	}
	if p := strings.Join(checks[2].Problems, " "); !strings.Contains(p, "sha") && !strings.Contains(p, "zstd") {
		t.Errorf("damaged chunk: problems %q", p)
	}
	if p := strings.Join(checks[3].Problems, " "); !strings.Contains(p, "on disk but not on the remote") {
		t.Errorf("blob missing from the remote: problems %q", p)
	}
	if got := snapshot(t, m.agentDir); len(got) != len(after) {
		t.Errorf("verify changed the agent dir")
	}

	// Gone from both: noted, not a problem of the backup.
	os.Remove(m.path("blobs/" + blobName))
	checks, _, _ = Verify(context.Background(), r, []string{files[4].id}, Options{AgentDir: m.agentDir})
	if !checks[0].OK() || len(checks[0].Notes) != 1 || !strings.Contains(checks[0].Notes[0], blobName) {
		t.Errorf("blob gone from both: %+v", checks[0])
	}
}
