package restore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"iter"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

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

// cat of a session of 64 MiB, and cat --at now, stream it: each allocates
// less than the session (it was held whole, more than once, before), gives
// it byte for byte, and leaves no temp file behind.
func TestCatStreamsLargeSession(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	r := fileRemote(t)
	id := "0190cccc-0000-7000-8000-000000000002"
	rel := sessionPath("-w", id, 1)
	data := putLargeSession(t, r, id, rel)

	for _, opts := range []Options{{}, {At: time.Now()}} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		pr, _, err := Cat(context.Background(), r, id, opts)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		n, err := pr.WriteTo(h)
		pr.Close()
		runtime.ReadMemStats(&after)
		if err != nil || n != int64(len(data)) || hex.EncodeToString(h.Sum(nil)) != repo.HashHex(data) {
			t.Fatalf("cat (at %v): %d bytes of %d, %v", opts.At, n, len(data), err)
		}
		a := after.TotalAlloc - before.TotalAlloc
		t.Logf("cat (at %v) of 64 MiB allocated %.1f MiB", opts.At, float64(a)/(1<<20))
		if a >= uint64(len(data)) {
			t.Errorf("cat (at %v) of 64 MiB allocated %d MiB", opts.At, a>>20)
		}
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Errorf("cat (at %v) left %s", opts.At, left[0].Name())
		}
	}
}
