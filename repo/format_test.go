package repo_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

func writeMarker(t *testing.T, c remote.Client, format int) {
	t.Helper()
	b := []byte(`{"format":` + string(rune('0'+format)) + `,"created":"2026-10-07T00:00:00Z"}`)
	if err := c.Put(context.Background(), repo.MarkerKey, b, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A repository created empty, and a marker written again over data that
// lost it, are format 2; every marker rewritten (an id added, encryption)
// stays format 2.
func TestFormatOfMarker(t *testing.T) {
	ctx := context.Background()
	c := newRemote(t)
	r := repo.New(c, repo.NewZstd())
	if err := r.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if m := marker(t, c); m.Format != 2 {
		t.Fatalf("new repository: marker %+v, want format 2", m)
	}

	// A marker lost over data: the data is read by the one rule, for
	// omp's sessions and for another agent's alike.
	for _, agent := range []string{repo.DefaultAgent, "pi"} {
		c := newRemote(t)
		w, err := repo.New(c, repo.NewZstd()).Agent(agent)
		if err != nil {
			t.Fatal(err)
		}
		putFirstChunk(t, w, validMeta(), 300)
		if err := repo.New(c, repo.NewZstd()).Init(ctx); err != nil {
			t.Fatalf("%s: %v", agent, err)
		}
		if m := marker(t, c); m.Format != 2 {
			t.Fatalf("%s: marker written over data %+v, want format 2", agent, m)
		}
		ar, err := repo.New(c, repo.NewZstd()).Agent(agent)
		if err != nil {
			t.Fatal(err)
		}
		if g := onlyGeneration(t, ar); g == nil || !g.HasMeta {
			t.Errorf("%s: the generation is not complete once the marker is back: %+v", agent, g)
		}
	}

	old := newRemote(t)
	writeMarker(t, old, 2) // no id: Init rewrites it with one
	if err := repo.New(old, repo.NewZstd()).Init(ctx); err != nil {
		t.Fatal(err)
	}
	if m := marker(t, old); m.Format != 2 || m.ID == "" {
		t.Fatalf("marker given an id: %+v, want format 2", m)
	}
	// Encrypting an empty plaintext repository replaces its marker.
	k := newKey(t)
	if err := repo.New(old, codec(t, crypt.Options{IdentityFile: k.file})).Init(ctx); err != nil {
		t.Fatal(err)
	}
	if m := marker(t, old); m.Format != 2 || m.Encryption == nil {
		t.Fatalf("marker encrypted: %+v, want format 2", m)
	}
}

// A format this ompsync does not read is refused by every reader and
// writer, with what to do: format 1 (development builds before 0.1.0)
// and a later format alike.
func TestOtherFormatsRefused(t *testing.T) {
	ctx := context.Background()
	for format, want := range map[int]string{
		1: "repository has format 1, written by a development build of ompsync before 0.1.0; this ompsync reads format 2 only: back up to a new, empty remote",
		3: "repository has format 3; this ompsync reads format 2: upgrade ompsync",
	} {
		c := newRemote(t)
		writeMarker(t, c, format)
		r := repo.New(c, repo.NewZstd())
		if _, err := r.ReadMarker(ctx); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("ReadMarker: %v, want %q", err, want)
		}
		if err := r.Init(ctx); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("Init: %v, want %q", err, want)
		}
		if err := r.Check(ctx); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("Check (every reading command's first step): %v, want %q", err, want)
		}
	}
}

// rekey changes keys, never the format, and a meta carried in a first
// chunk reads after its re-encryption.
func TestRekeyKeepsFormat(t *testing.T) {
	ctx := context.Background()
	{
		const format = 2
		c := newRemote(t)
		r := repo.New(c, repo.NewZstd())
		if err := r.Init(ctx); err != nil {
			t.Fatal(err)
		}
		data := putFirstChunk(t, r, validMeta(), 300)
		k := newKey(t)
		if _, err := repo.New(c, codec(t, crypt.Options{IdentityFile: k.file})).Rekey(ctx, repo.RekeyOptions{}); err != nil {
			t.Fatal(err)
		}
		if m := marker(t, c); m.Format != format || m.Encryption == nil || len(m.Encryption.Pending) != 0 {
			t.Fatalf("format %d after rekey: %+v", format, m)
		}
		rk := repo.New(c, codec(t, crypt.Options{IdentityFile: k.file}))
		g := onlyGeneration(t, rk)
		m, err := rk.GenerationMeta(ctx, stream, g)
		if err != nil || m.Path != validMeta().Path {
			t.Fatalf("meta after rekey: %+v, %v", m, err)
		}
		as, err := rk.ReadGeneration(ctx, stream, g, 1<<30)
		if err != nil || !bytes.Equal(as.Data, data) {
			t.Fatalf("read after rekey: %v", err)
		}
	}
}

func validMeta() *repo.Meta {
	return &repo.Meta{SessionID: stream.SessionID, Machine: stream.Machine, Stream: stream.Name, Generation: gen,
		Path: "sessions/-w/a_" + stream.SessionID + ".jsonl", Cwd: "/home/u/w", Created: time.Unix(1, 0).UTC()}
}

// putFirstChunk writes n random bytes as a generation's one chunk at 0,
// its header carrying meta (nil: none), and returns them.
func putFirstChunk(t *testing.T, r *repo.Repo, meta *repo.Meta, n int) []byte {
	t.Helper()
	data := make([]byte, n)
	rand.Read(data)
	sum := repo.HashHex(data)
	h := repo.ChunkHeader{Start: 0, End: int64(n), SHA256: sum, StreamSHA256: sum, Meta: meta}
	if _, err := r.PutChunk(context.Background(), stream, gen, h, data, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	return data
}

// onlyGeneration lists stream's one generation (nil when none is listed).
func onlyGeneration(t *testing.T, r *repo.Repo) *repo.Generation {
	t.Helper()
	invs, err := r.Inventory(context.Background(), stream.SessionID, stream.Machine)
	if err != nil {
		t.Fatal(err)
	}
	if len(invs) == 0 {
		return nil
	}
	return invs[0].Find(gen)
}

// bodyCounter counts the stored bytes read from GET bodies.
type bodyCounter struct {
	remote.Client
	read atomic.Int64
}

func (c *bodyCounter) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := c.Client.Get(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	return countedBody{rc, &c.read}, nil
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// A chunk at 0 alone makes a generation complete; its meta is
// the chunk's header's, read by every reader with the chunk and by
// GenerationMeta from the header alone.
func TestMetaInFirstChunk(t *testing.T) {
	ctx := context.Background()
	c := &bodyCounter{Client: newRemote(t)}
	r := repo.New(c, repo.NewZstd())
	if err := r.Init(ctx); err != nil {
		t.Fatal(err)
	}
	data := putFirstChunk(t, r, validMeta(), 4<<20) // incompressible
	g := onlyGeneration(t, r)
	if g == nil || !g.HasMeta || !g.MetaInChunk || g.MetaModTime.IsZero() {
		t.Fatalf("generation %+v: want complete by its chunk at 0", g)
	}
	c.read.Store(0)
	m, err := r.GenerationMeta(ctx, stream, g)
	if err != nil || m.Path != validMeta().Path || m.Cwd != "/home/u/w" {
		t.Fatalf("GenerationMeta: %+v, %v", m, err)
	}
	if n := c.read.Load(); n > 512<<10 {
		t.Fatalf("GenerationMeta read %d stored bytes of a 4 MiB chunk: more than its header", n)
	}
	for _, every := range []bool{false, true} {
		as, err := r.ReadGenerationRef(ctx, stream, g, 1<<30, every)
		if err != nil || !bytes.Equal(as.Data, data) || as.Meta.Path != validMeta().Path {
			t.Fatalf("read every=%v: %v", every, err)
		}
		var buf bytes.Buffer
		st, err := r.StreamGeneration(ctx, stream, g, 1<<30, &buf, every)
		if err != nil || !bytes.Equal(buf.Bytes(), data) || st.Meta.Path != validMeta().Path {
			t.Fatalf("stream every=%v: %+v, %v", every, st.Meta, err)
		}
	}
	// A meta object, once there (the file moved), wins.
	moved := *validMeta()
	moved.Path = "sessions/-x/a_" + stream.SessionID + ".jsonl"
	if err := r.PutMeta(ctx, stream, moved); err != nil {
		t.Fatal(err)
	}
	g = onlyGeneration(t, r)
	if m, err := r.GenerationMeta(ctx, stream, g); err != nil || g.MetaInChunk || m.Path != moved.Path {
		t.Fatalf("with a meta object: %+v, %v (%+v)", m, err, g)
	}
}

// A generation without a meta object whose chunk at 0 carries no
// meta, or a meta that is not this generation's, fails every reader with
// an error naming it.
func TestMetaInFirstChunkDamage(t *testing.T) {
	ctx := context.Background()
	other := func(f func(m *repo.Meta)) *repo.Meta { m := validMeta(); f(m); return m }
	for _, tc := range []struct {
		name string
		meta *repo.Meta
		want string
	}{
		{"none", nil, "carries no meta"},
		{"another session", other(func(m *repo.Meta) { m.SessionID = "0190bbbb-0000-7000-8000-000000000002" }), "describes another generation"},
		{"another machine", other(func(m *repo.Meta) { m.Machine = "desk" }), "describes another generation"},
		{"another generation", other(func(m *repo.Meta) { m.Generation = "18ecbc17b1295106" }), "describes another generation"},
		{"another stream", other(func(m *repo.Meta) { m.Stream = "artifacts/x" }), "describes another generation"},
		{"unsafe path", other(func(m *repo.Meta) { m.Path = "../../etc/passwd" }), "unsafe path"},
		{"hash_from", other(func(m *repo.Meta) { m.HashFrom = 256 }), "hash_from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newRemote(t)
			r := repo.New(c, repo.NewZstd())
			if err := r.Init(ctx); err != nil {
				t.Fatal(err)
			}
			putFirstChunk(t, r, tc.meta, 300)
			g := onlyGeneration(t, r)
			if g == nil || !g.MetaInChunk {
				t.Fatalf("generation %+v", g)
			}
			check := func(what string, err error) {
				t.Helper()
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), gen) {
					t.Errorf("%s: %v, want an error naming generation %s with %q", what, err, gen, tc.want)
				}
			}
			_, err := r.GenerationMeta(ctx, stream, g)
			check("GenerationMeta", err)
			_, err = r.ReadGeneration(ctx, stream, g, 1<<30)
			check("ReadGeneration", err)
			_, err = r.ReadGenerationHashOnce(ctx, stream, g, 1<<30)
			check("ReadGenerationHashOnce", err)
			for _, every := range []bool{false, true} {
				_, err = r.StreamGeneration(ctx, stream, g, 1<<30, io.Discard, every)
				check("StreamGeneration", err)
			}
			_, err = r.StreamGenerationAt(ctx, stream, g, 1<<30, io.Discard, time.Now())
			check("StreamGenerationAt", err)
			_, err = r.StreamGenerationFrom(ctx, stream, g, 0, nil, 1<<30, io.Discard)
			check("StreamGenerationFrom", err)
		})
	}
}

// The header of a chunk at 0 may carry a meta of up to 64 KiB; any other
// header stays within 1024 bytes; a meta that would not fit is refused by
// MetaFits (the writer then puts the meta object first).
func TestChunkHeaderLimits(t *testing.T) {
	ctx := context.Background()
	r := repo.New(newRemote(t), repo.NewZstd())
	if err := r.Init(ctx); err != nil {
		t.Fatal(err)
	}
	big := *validMeta()
	big.Cwd = "/home/u/" + strings.Repeat("d", 20<<10)
	h := repo.ChunkHeader{Start: 0, End: 10}
	if !repo.MetaFits(h, big) {
		t.Fatal("a 20 KiB meta does not fit a first chunk's header")
	}
	data := putFirstChunk(t, r, &big, 10)
	g := onlyGeneration(t, r)
	if m, err := r.GenerationMeta(ctx, stream, g); err != nil || m.Cwd != big.Cwd {
		t.Fatalf("a 20 KiB meta in the header: %v", err)
	}
	if as, err := r.ReadGeneration(ctx, stream, g, 1<<30); err != nil || !bytes.Equal(as.Data, data) {
		t.Fatalf("read with a 20 KiB meta: %v", err)
	}
	huge := big
	huge.Cwd = "/home/u/" + strings.Repeat("d", 70<<10)
	if repo.MetaFits(h, huge) || repo.MetaFits(repo.ChunkHeader{Start: 5, End: 10}, *validMeta()) {
		t.Fatal("MetaFits takes a 70 KiB meta, or a meta past offset 0")
	}
	// A long header without meta, at 0 or past it, is refused.
	pad := strings.Repeat("x", 2000)
	plain := []byte(`{"v":1,"start":0,"end":1,"hash_from":0,"sha256":"` + pad + `"}` + "\nz")
	if _, _, err := repo.DecodeChunk(plain, 0, 1); err == nil || !strings.Contains(err.Error(), "header without meta") {
		t.Fatalf("a 2 KiB header without meta at 0: %v", err)
	}
	sum := sha256.Sum256([]byte("z"))
	m := validMeta()
	m.Cwd = pad
	hb := repo.EncodeChunk(repo.ChunkHeader{Start: 0, End: 1, SHA256: hex.EncodeToString(sum[:]), StreamSHA256: hex.EncodeToString(sum[:]), Meta: m}, []byte("z"))
	past := bytes.Replace(hb, []byte(`"start":0,"end":1`), []byte(`"start":5,"end":6`), 1)
	if _, _, err := repo.DecodeChunk(past, 5, 6); err == nil || !strings.Contains(err.Error(), "no header") {
		t.Fatalf("a 2 KiB header past offset 0: %v", err)
	}
	if _, _, err := repo.DecodeChunk(hb, 0, 1); err != nil {
		t.Fatalf("a 2 KiB header with meta at 0: %v", err)
	}
}

// Another agent's folder follows the repository's format: its generations
// are complete by their first chunk too, whether the marker was read
// before the agent's repository was made or by it.
func TestAgentFolderFormat(t *testing.T) {
	ctx := context.Background()
	c := newRemote(t)
	r := repo.New(c, repo.NewZstd())
	if err := r.Init(ctx); err != nil {
		t.Fatal(err)
	}
	pi, err := r.Agent("pi")
	if err != nil {
		t.Fatal(err)
	}
	data := putFirstChunk(t, pi, validMeta(), 300)
	if _, err := c.Stat(ctx, "v1/agents/pi/sessions/"+stream.SessionID+"/laptop/session/"+gen+"/"+repo.ChunkName(0, 300)); err != nil {
		t.Fatalf("the chunk is not in pi's folder: %v", err)
	}
	for _, fresh := range []bool{false, true} {
		ar := pi
		if fresh {
			if ar, err = repo.New(c, repo.NewZstd()).Agent("pi"); err != nil {
				t.Fatal(err)
			}
		}
		g := onlyGeneration(t, ar)
		if g == nil || !g.MetaInChunk {
			t.Fatalf("fresh=%v: pi's generation %+v, want complete by its first chunk", fresh, g)
		}
		as, err := ar.ReadGeneration(ctx, stream, g, 1<<30)
		if err != nil || !bytes.Equal(as.Data, data) || as.Meta.Path != validMeta().Path {
			t.Fatalf("fresh=%v: read: %v", fresh, err)
		}
	}
}

// A reader that found no marker (an empty remote) takes a generation
// written after it looked.
func TestFormatReadAgainWithoutMarker(t *testing.T) {
	ctx := context.Background()
	c := newRemote(t)
	reader := repo.New(c, repo.NewZstd())
	if err := reader.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if g := onlyGeneration(t, reader); g != nil {
		t.Fatalf("an empty remote lists %+v", g)
	}
	writer := repo.New(c, repo.NewZstd())
	if err := writer.Init(ctx); err != nil {
		t.Fatal(err)
	}
	putFirstChunk(t, writer, validMeta(), 100)
	if g := onlyGeneration(t, reader); g == nil || !g.MetaInChunk {
		t.Fatalf("the reader lists %+v, want a generation complete by its first chunk", g)
	}
	for so, err := range reader.InventoryAll(ctx, "", 0) {
		if err != nil || so.Err != nil || len(so.Streams) != 1 || so.Streams[0].Newest() == nil {
			t.Fatalf("InventoryAll: %+v, %v", so, err)
		}
	}
}

// A meta object alone, with no chunk at 0 (the meta too large for a header
// is put first, and the agent died before the chunk), is no generation:
// the older one stays the newest.
func TestMetaObjectAloneIncomplete(t *testing.T) {
	ctx := context.Background()
	c := newRemote(t)
	r := repo.New(c, repo.NewZstd())
	if err := r.Init(ctx); err != nil {
		t.Fatal(err)
	}
	putFirstChunk(t, r, validMeta(), 300)
	later := "18ecbc17b1295199"
	m := *validMeta()
	m.Generation = later
	if err := r.PutMeta(ctx, stream, m); err != nil {
		t.Fatal(err)
	}
	invs, err := r.Inventory(ctx, stream.SessionID, stream.Machine)
	if err != nil {
		t.Fatal(err)
	}
	if len(invs) != 1 || len(invs[0].Generations) != 2 {
		t.Fatalf("listed %+v, want one stream of two generations", invs)
	}
	if g := invs[0].Newest(); g == nil || g.Name != gen {
		t.Fatalf("newest generation %+v, want %s: a meta object without bytes is no generation", g, gen)
	}
	if g := invs[0].Find(later); g.HasMeta {
		t.Errorf("the meta object alone makes generation %s complete", later)
	}
}
