package compact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/internal/testkit/repotest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/repo"
)

func TestMain(m *testing.M) { remotetest.Main(m) }

// eachRepo runs f on a repository on every backend.
func eachRepo(t *testing.T, f func(t *testing.T, r *repo.Repo)) {
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		f(t, repo.New(b.Client, repo.NewZstd()))
	})
}

// networkIndex numbers the S3 remotes eachRepo runs (0-3), so that a test
// sampling its cases can give each remote different ones.
func networkIndex(t *testing.T) int {
	for i, name := range []string{"s3-aws", "s3-minio", "minio-aws", "minio-minio"} {
		if strings.HasSuffix(t.Name(), "/"+name) {
			return i
		}
	}
	t.Fatalf("%s: not one of eachRepo's S3 remotes", t.Name())
	return 0
}

func fileRepo(t testing.TB) *repo.Repo {
	t.Helper()
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return repo.New(c, repo.NewZstd())
}

// writer uploads a stream the way the agent does: chunks named by their
// byte range, each with the running stream hash, and meta after the first
// (with inChunk, as in format 2: in the first chunk's header, no object).
type writer struct {
	r        *repo.Repo
	s        repo.Stream
	gen      string
	hashFrom int64
	data     []byte // every byte uploaded
	h        hash.Hash
	meta     bool
	inChunk  bool
}

func newWriter(r *repo.Repo, s repo.Stream, gen string, hashFrom int64) *writer {
	return &writer{r: r, s: s, gen: gen, hashFrom: hashFrom, h: sha256.New()}
}

// grow extends the uploaded bytes and the running hash.
func (w *writer) grow(b []byte) {
	start := int64(len(w.data))
	w.data = append(w.data, b...)
	from := max(w.hashFrom, start)
	if end := int64(len(w.data)); end > from {
		w.h.Write(w.data[from:end])
	}
}

// metaOf is the meta w writes.
func (w *writer) metaOf() repo.Meta {
	return repo.Meta{SessionID: w.s.SessionID, Machine: w.s.Machine, Stream: w.s.Name, Generation: w.gen,
		Path: "sessions/-work/x_" + w.s.SessionID + ".jsonl", HashFrom: w.hashFrom, Created: time.Unix(0, 0).UTC()}
}

func (w *writer) putMeta(ctx context.Context) error {
	if w.meta {
		return nil
	}
	if err := w.r.PutMeta(ctx, w.s, w.metaOf()); err != nil {
		return err
	}
	w.meta = true
	return nil
}

// append uploads b as the next chunk.
func (w *writer) append(ctx context.Context, b []byte) error {
	start := int64(len(w.data))
	if start == 0 && int64(len(b)) < w.hashFrom {
		w.hashFrom = 0 // no title slot: the agent hashes from 0
	}
	w.grow(b)
	hdr := repo.ChunkHeader{Start: start, End: int64(len(w.data)), HashFrom: w.hashFrom, SHA256: repo.HashHex(b), StreamSHA256: hex.EncodeToString(w.h.Sum(nil))}
	if w.inChunk && start == 0 {
		m := w.metaOf()
		hdr.Meta, w.meta = &m, true
	}
	if _, err := w.r.PutChunk(ctx, w.s, w.gen, hdr, b, remote.PutOptions{}); err != nil {
		return err
	}
	return w.putMeta(ctx)
}

// appendRef uploads b as a reference chunk to src's generation, which must
// hold the same bytes at the same offsets.
func (w *writer) appendRef(ctx context.Context, b []byte, src *writer) error {
	start := int64(len(w.data))
	if !bytes.Equal(src.data[start:start+int64(len(b))], b) {
		return errors.New("appendRef: source holds other bytes")
	}
	w.grow(b)
	hdr := repo.ChunkHeader{Start: start, End: int64(len(w.data)), HashFrom: w.hashFrom, SHA256: repo.HashHex(b), StreamSHA256: hex.EncodeToString(w.h.Sum(nil)),
		Ref: &repo.ChunkSource{Machine: src.s.Machine, Generation: src.gen}}
	if _, err := w.r.PutChunk(ctx, w.s, w.gen, hdr, nil, remote.PutOptions{}); err != nil {
		return err
	}
	return w.putMeta(ctx)
}

// reupload uploads [from, end) again as one chunk, as the agent does after
// a crash before it recorded an upload.
func (w *writer) reupload(ctx context.Context, from int64) error {
	end := int64(len(w.data))
	if from >= end {
		return nil
	}
	b := w.data[from:end]
	hdr := repo.ChunkHeader{Start: from, End: end, HashFrom: w.hashFrom, SHA256: repo.HashHex(b), StreamSHA256: hex.EncodeToString(w.h.Sum(nil))}
	_, err := w.r.PutChunk(ctx, w.s, w.gen, hdr, b, remote.PutOptions{})
	return err
}

// lines returns n JSON lines of random sizes.
func lines(rng *rand.Rand, n int) []byte {
	var b bytes.Buffer
	for range n {
		fmt.Fprintf(&b, `{"type":"message","id":"%08x","text":"`, rng.Uint32())
		for range rng.IntN(300) {
			b.WriteByte("abcdefghij klmnopqrstuvwxyz"[rng.IntN(27)])
		}
		b.WriteString("\"}\n")
	}
	return b.Bytes()
}

// read reassembles a generation as a restore does: one LIST, then
// repo.ReadGeneration.
func read(ctx context.Context, r *repo.Repo, s repo.Stream, gen string) ([]byte, error) {
	invs, err := r.Inventory(ctx, s.SessionID, s.Machine)
	if err != nil {
		return nil, err
	}
	for _, inv := range invs {
		if inv.Stream != s {
			continue
		}
		g := inv.Find(gen)
		if g == nil {
			return nil, fmt.Errorf("no generation %s", gen)
		}
		as, err := repotest.ReadGeneration(ctx, r, s, g, 1<<30)
		if err != nil {
			return nil, err
		}
		return as.Data, nil
	}
	return nil, fmt.Errorf("no stream %s", s.Prefix())
}

// checkStream fails unless the generation reassembles to exactly w's bytes.
func checkStream(t testing.TB, r *repo.Repo, w *writer, when string) {
	t.Helper()
	got, err := read(context.Background(), r, w.s, w.gen)
	if err != nil {
		t.Fatalf("%s: %s generation %s does not read: %v", when, w.s.Prefix(), w.gen, err)
	}
	if !bytes.Equal(got, w.data) {
		t.Fatalf("%s: %s generation %s reads %d bytes, want %d (first difference at %d)", when, w.s.Prefix(), w.gen, len(got), len(w.data), firstDiff(got, w.data))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// chunksOf lists a generation's chunks.
func chunksOf(t testing.TB, r *repo.Repo, s repo.Stream, gen string) []repo.ChunkRef {
	t.Helper()
	g, err := r.ListGeneration(context.Background(), s, gen)
	if err != nil {
		t.Fatal(err)
	}
	return g.Chunks
}

// nested reports a chunk that lies inside another, if any.
func nested(chunks []repo.ChunkRef) (inner, outer repo.ChunkRef, found bool) {
	for _, a := range chunks {
		for _, b := range chunks {
			if a != b && b.Start <= a.Start && a.End <= b.End {
				return a, b, true
			}
		}
	}
	return repo.ChunkRef{}, repo.ChunkRef{}, false
}

var errStopped = errors.New("stopped (simulated crash)")

// stopClient lets n operations through, then fails every one, as a process
// killed at that point would have done nothing more. With lostAck the n-th
// operation is carried out but reported as failed (the answer was lost).
type stopClient struct {
	remote.Client
	left    atomic.Int64
	lostAck bool
}

func newStopClient(c remote.Client, n int, lostAck bool) *stopClient {
	s := &stopClient{Client: c, lostAck: lostAck}
	s.left.Store(int64(n))
	return s
}

// take reports whether the operation runs and whether it fails.
func (s *stopClient) take() (run, fail bool) {
	n := s.left.Add(-1)
	switch {
	case n >= 0:
		return true, false
	case n == -1 && s.lostAck:
		return true, true
	}
	return false, true
}

func (s *stopClient) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	run, fail := s.take()
	if run {
		if err := s.Client.Put(ctx, key, data, opts); err != nil {
			return err
		}
	}
	if fail {
		return errStopped
	}
	return nil
}

func (s *stopClient) PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts remote.PutOptions) error {
	run, fail := s.take()
	if run {
		if err := s.Client.PutReader(ctx, key, r, size, opts); err != nil {
			return err
		}
	}
	if fail {
		return errStopped
	}
	return nil
}

func (s *stopClient) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if _, fail := s.take(); fail {
		return nil, errStopped
	}
	return s.Client.Get(ctx, key, off, n)
}

func (s *stopClient) Stat(ctx context.Context, key string) (remote.ObjectInfo, error) {
	if _, fail := s.take(); fail {
		return remote.ObjectInfo{}, errStopped
	}
	return s.Client.Stat(ctx, key)
}

func (s *stopClient) Delete(ctx context.Context, key string) error {
	run, fail := s.take()
	if run {
		if err := s.Client.Delete(ctx, key); err != nil {
			return err
		}
	}
	if fail {
		return errStopped
	}
	return nil
}

func (s *stopClient) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	if _, fail := s.take(); fail {
		return func(yield func(remote.ObjectInfo, error) bool) { yield(remote.ObjectInfo{}, errStopped) }
	}
	return s.Client.List(ctx, prefix, opts)
}

// counter counts requests and the bytes they move.
type counter struct {
	remote.Client
	mu                             sync.Mutex
	puts, gets, lists, dels, stats int
	listed                         int // keys yielded by LISTs
	putBytes, getBytes             int64
}

func (c *counter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.puts, c.gets, c.lists, c.dels, c.stats, c.listed, c.putBytes, c.getBytes = 0, 0, 0, 0, 0, 0, 0, 0
}

func (c *counter) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	c.mu.Lock()
	c.puts++
	c.putBytes += int64(len(data))
	c.mu.Unlock()
	return c.Client.Put(ctx, key, data, opts)
}

func (c *counter) PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts remote.PutOptions) error {
	c.mu.Lock()
	c.puts++
	c.putBytes += size
	c.mu.Unlock()
	return c.Client.PutReader(ctx, key, r, size, opts)
}

func (c *counter) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := c.Client.Get(ctx, key, off, n)
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &countingBody{rc, c}, nil
}

type countingBody struct {
	io.ReadCloser
	c *counter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.mu.Lock()
	b.c.getBytes += int64(n)
	b.c.mu.Unlock()
	return n, err
}

func (c *counter) Stat(ctx context.Context, key string) (remote.ObjectInfo, error) {
	c.mu.Lock()
	c.stats++
	c.mu.Unlock()
	return c.Client.Stat(ctx, key)
}

func (c *counter) Delete(ctx context.Context, key string) error {
	c.mu.Lock()
	c.dels++
	c.mu.Unlock()
	return c.Client.Delete(ctx, key)
}

func (c *counter) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
	return func(yield func(remote.ObjectInfo, error) bool) {
		for obj, err := range c.Client.List(ctx, prefix, opts) {
			if err == nil {
				c.mu.Lock()
				c.listed++
				c.mu.Unlock()
			}
			if !yield(obj, err) {
				return
			}
		}
	}
}

// listPages is how many pages an S3 LIST of n keys takes (1000 a page).
func listPages(n int) int { return max(1, (n+999)/1000) }

// Err is the first error of any stream.
func (m *MachineReport) Err() error {
	for _, s := range m.Streams {
		if s.Err != nil {
			return s.Err
		}
	}
	return nil
}
