package restore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"strings"
	"sync"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// keyLog records the keys of every GET, and the prefixes of every LIST.
type keyLog struct {
	remote.Client
	mu          sync.Mutex
	gets, lists []string
}

func (k *keyLog) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	k.mu.Lock()
	k.lists = append(k.lists, prefix)
	k.mu.Unlock()
	return k.Client.List(ctx, prefix, opts)
}

func (k *keyLog) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	k.mu.Lock()
	k.gets = append(k.gets, key)
	k.mu.Unlock()
	return k.Client.Get(ctx, key, off, length)
}

// printed is what Cat printed, with the bytes its WriteTo wrote.
type printed struct {
	*Printed
	Data []byte
}

// catRead is Cat, its bytes written out and its temp files removed.
func catRead(ctx context.Context, r *repo.Repo, prefix string, opts Options) (*printed, []string, error) {
	pr, problems, err := Cat(ctx, r, prefix, opts)
	if err != nil {
		return nil, problems, err
	}
	defer pr.Close()
	var b bytes.Buffer
	if n, err := pr.WriteTo(&b); err != nil || n != pr.Size {
		return nil, problems, fmt.Errorf("cat wrote %d of %d bytes: %v", n, pr.Size, err)
	}
	return &printed{pr, b.Bytes()}, problems, nil
}

// cat gives the bytes a restore into an empty agent dir writes, one
// machine's copy, or an older generation; it reads no artifact or blob.
func TestCat(t *testing.T) {
	r := fileRemote(t)
	id, _, steps := rewriteScenario(t, r)
	last := steps[len(steps)-1]
	ctx := context.Background()

	pr, problems, err := catRead(ctx, r, id[:12], Options{})
	if err != nil || len(problems) > 0 {
		t.Fatalf("cat: %v %v", err, problems)
	}
	if pr.ID != id || !bytes.Equal(pr.Data, last.merged) || len(pr.Sources) != 1 || pr.Sources[0].Machine != "laptop" {
		t.Errorf("cat: %d bytes from %+v, want the laptop's %d", len(pr.Data), pr.Sources, len(last.merged))
	}
	fresh := newMachine(t, r, "fresh")
	rel := fresh.restoreOK([]string{id}, Options{}).Results[0].Path
	if !bytes.Equal(fresh.read(rel), pr.Data) {
		t.Error("cat differs from what restore writes")
	}

	pr, _, err = catRead(ctx, r, id, Options{Machine: "desk"})
	if err != nil || !bytes.Equal(pr.Data, last.copies["desk"]) {
		t.Errorf("cat --machine desk: %v, %d bytes, want %d", err, len(pr.Data), len(last.copies["desk"]))
	}
	h, _, err := History(ctx, r, id, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range h.Copies {
		pr, _, err := catRead(ctx, r, id, Options{Machine: c.Machine, Generation: c.Generation})
		if err != nil || int64(len(pr.Data)) != c.Bytes || pr.Sources[0].Generation != c.Generation {
			t.Errorf("cat of %s %s: %v, %d bytes, want %d", c.Machine, c.Generation, err, len(pr.Data), c.Bytes)
		}
	}
	if _, _, err := catRead(ctx, r, id, Options{Generation: "0000000000000001"}); err == nil || !strings.Contains(err.Error(), "has no generation 0000000000000001") {
		t.Errorf("cat of a missing generation: %v", err)
	}

	// A session with an artifact and a blob: cat reads only its stream.
	log := &keyLog{Client: r.Client()}
	lr := repo.New(log, repo.NewZstd())
	m := newMachine(t, lr, "art")
	blob := []byte("png bytes")
	sid := "019a0009-0000-7000-8000-000000000001"
	srel := sessionPath("-w", sid, 9)
	data := append(synthSession(sid, "/w", "with blob", 2), messageLine("0000000a", "00000002", "user", "2026-10-07T01:00:00.000Z", "see blob:sha256:"+repo.HashHex(blob))...)
	m.write(srel, data, base)
	m.write("blobs/"+repo.HashHex(blob), blob, base)
	m.write(strings.TrimSuffix(srel, ".jsonl")+"/tool.log", []byte("artifact\n"), base)
	m.backup()
	log.gets = nil
	pr, _, err = catRead(ctx, lr, sid, Options{})
	if err != nil || !bytes.Equal(pr.Data, data) {
		t.Fatalf("cat of a session with a blob: %v", err)
	}
	for _, k := range log.gets {
		if strings.Contains(k, "/blobs/") || strings.Contains(k, "/artifacts/") {
			t.Errorf("cat read %s", k)
		}
	}
}
