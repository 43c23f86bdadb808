package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote"
)

// putRef stores a reference chunk of s's generation gen for [start, end)
// of data, naming machine's generation src.
func putRef(t *testing.T, r *Repo, s Stream, gen string, data []byte, start, end int64, machine, src string) {
	t.Helper()
	h := sha256.New()
	h.Write(data[:end])
	hdr := ChunkHeader{Start: start, End: end, SHA256: HashHex(data[start:end]), StreamSHA256: hex.EncodeToString(h.Sum(nil)), Ref: &ChunkSource{Machine: machine, Generation: src}}
	if _, err := r.PutChunk(context.Background(), s, gen, hdr, nil, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A key that names a chunk larger than any writer makes is refused before
// it is read, however small its object: a bomb there never inflates, and a
// reference there never lifts the limit of what it resolves to.
func TestChunkRangeBeyondLimitRefused(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t)
	s := Stream{SessionID: "abc", Machine: "m1", Name: SessionStream}
	data := []byte("one line\n")
	writeGen(t, r, s, "0000000000000001", data)
	huge := int64(1) << 40
	// A bomb: 1 TiB would be its plaintext, and its key says so.
	sealed, err := r.codec.Seal(make([]byte, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.client.Put(ctx, s.ChunkKey("0000000000000001", 9, huge), sealed, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err = r.GetChunk(ctx, s, "0000000000000001", 9, huge)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "more than the 67108864 a chunk may hold") {
		t.Fatalf("chunk key of 1 TiB: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("refusing it allocated %d bytes", grew)
	}

	// A reference chunk whose range is past the limit, pointing at a
	// generation that holds those bytes as a bomb.
	o := Stream{SessionID: "abc", Machine: "m2", Name: SessionStream}
	big := int64(MaxChunkSize + 1)
	put := func(key string, plain []byte) {
		sealed, err := r.codec.Seal(plain)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.client.Put(ctx, key, sealed, remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	zeros := make([]byte, big)
	hdr := ChunkHeader{Start: 0, End: big, SHA256: HashHex(zeros), StreamSHA256: HashHex(zeros)}
	put(o.ChunkKey("0000000000000002", 0, big), EncodeChunk(hdr, zeros))
	put(o.MetaKey("0000000000000002"), EncodeMeta(Meta{SessionID: "abc", Machine: "m2", Stream: SessionStream, Generation: "0000000000000002", Path: "sessions/-x/a.jsonl"}))
	a := Stream{SessionID: "abc", Machine: "m3", Name: SessionStream}
	hdr.Ref = &ChunkSource{Machine: "m2", Generation: "0000000000000002"}
	put(a.ChunkKey("0000000000000003", 0, big), EncodeChunk(hdr, nil))
	put(a.MetaKey("0000000000000003"), EncodeMeta(Meta{SessionID: "abc", Machine: "m3", Stream: SessionStream, Generation: "0000000000000003", Path: "sessions/-x/a.jsonl"}))
	if _, err := read(t, r, a); err == nil || !strings.Contains(err.Error(), "a chunk may hold") {
		t.Fatalf("reference over %d bytes: %v", big, err)
	}
}

// References that fan out (each level cut into one-byte chunks that are
// references again) stop at the reader's budget of chunk reads.
func TestReferenceBombRefused(t *testing.T) {
	r := newTestRepo(t)
	r.refReads = 20
	data := []byte(strings.Repeat("x", 30) + "\n")
	n := int64(len(data))
	// m0 holds the bytes; m1 references them one byte a chunk; m2 holds
	// one reference to m1 for the whole range.
	writeGen(t, r, Stream{SessionID: "abc", Machine: "m0", Name: SessionStream}, "0000000000000001", data)
	m1 := Stream{SessionID: "abc", Machine: "m1", Name: SessionStream}
	for i := range n {
		putRef(t, r, m1, "0000000000000001", data, i, i+1, "m0", "0000000000000001")
	}
	m2 := Stream{SessionID: "abc", Machine: "m2", Name: SessionStream}
	putRef(t, r, m2, "0000000000000001", data, 0, n, "m1", "0000000000000001")
	if err := r.PutMeta(context.Background(), m2, Meta{SessionID: "abc", Machine: "m2", Stream: SessionStream, Generation: "0000000000000001", Path: "sessions/-x/a.jsonl"}); err != nil {
		t.Fatal(err)
	}
	_, err := read(t, r, m2)
	if !errors.Is(err, errRefBomb) {
		t.Fatalf("%d one-byte references behind one: %v, want the reference budget refused", n, err)
	}
	// Within the budget the same chain reads.
	r.refReads = 2 * int(n)
	if got, err := read(t, r, m2); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("within the budget: %q, %v", got, err)
	}
}

// endless lists keys under its prefix that never end, after the real ones.
type endless struct {
	remote.Client
	prefix string
	key    func(i int) string
}

func (e endless) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	if !strings.HasPrefix(prefix, e.prefix) && !strings.HasPrefix(e.prefix, prefix) {
		return e.Client.List(ctx, prefix, opts)
	}
	return func(yield func(remote.ObjectInfo, error) bool) {
		for o, err := range e.Client.List(ctx, prefix, opts) {
			if !yield(o, err) || err != nil {
				return
			}
		}
		for i := 0; ; i++ {
			if ctx.Err() != nil || !yield(remote.ObjectInfo{Key: e.key(i), Size: 100, Prefix: opts.Delimiter != ""}, nil) {
				return
			}
		}
	}
}

// Listings that never end (a broken or hostile server) end at the
// reader's bounds, with an error, before they fill memory.
func TestEndlessListingsBounded(t *testing.T) {
	ctx := context.Background()
	base := newTestRepo(t)
	s := Stream{SessionID: "abc", Machine: "m1", Name: SessionStream}
	writeGen(t, base, s, "0000000000000001", []byte("one line\n"))

	chunks := New(endless{Client: base.client, prefix: s.GenPrefix("0000000000000002"), key: func(i int) string {
		return s.ChunkKey("0000000000000002", int64(i), int64(i+1))
	}}, base.codec)
	if _, err := chunks.Inventory(ctx, "abc", ""); !errors.Is(err, errTooManyObjects) {
		t.Errorf("Inventory of an endless session: %v", err)
	}
	if _, err := chunks.ListGeneration(ctx, s, "0000000000000002"); !errors.Is(err, errTooManyObjects) {
		t.Errorf("ListGeneration of an endless generation: %v", err)
	}
	n := 0
	for so, err := range chunks.InventoryAll(ctx, "", 0) {
		if err != nil {
			if !errors.Is(err, errTooManyObjects) {
				t.Errorf("InventoryAll: %v", err)
			}
			break
		}
		if so.ID != "abc" || !errors.Is(so.Err, errTooManyObjects) {
			t.Errorf("InventoryAll yields %s: %v", so.ID, so.Err)
		}
		n++
	}
	if n != 1 {
		t.Errorf("InventoryAll yielded the endless session %d times", n)
	}

	machines := New(endless{Client: base.client, prefix: MachinesPrefix(), key: func(i int) string {
		return fmt.Sprintf("%sm%08d/", MachinesPrefix(), i)
	}}, base.codec)
	if _, err := machines.Machines(ctx); err == nil || !strings.Contains(err.Error(), "past 16384 machines") {
		t.Errorf("Machines of an endless listing: %v", err)
	}
}

// A chunk's header line is bounded by where the chunk starts (a meta may
// ride only at offset 0), not by the buffer it is read through: padded
// past its bound, a header is refused.
func TestStreamHeaderBound(t *testing.T) {
	ctx := context.Background()
	data := []byte("0123456789")
	stream := func(r *Repo, s Stream) ([]byte, error) {
		invs, err := r.Inventory(ctx, s.SessionID, s.Machine)
		if err != nil || len(invs) != 1 {
			t.Fatalf("inventory: %d, %v", len(invs), err)
		}
		var out bytes.Buffer
		_, err = r.StreamGeneration(ctx, s, invs[0].Newest(), 1<<20, &out, true)
		return out.Bytes(), err
	}
	for _, tc := range []struct {
		start  int64
		spaces int
		ok     bool
	}{
		{5, 700, true},
		{5, 1100, false},
		{5, 2000, false},
		{0, 2000, false},
	} {
		r := newTestRepo(t)
		s := Stream{SessionID: "abc", Machine: "m1", Name: SessionStream}
		writeGen(t, r, s, "0000000000000001", data, 5)
		end := int64(len(data))
		if tc.start == 0 {
			end = 5
		}
		h := sha256.New()
		h.Write(data[:end])
		plain := EncodeChunk(ChunkHeader{Start: tc.start, End: end, SHA256: HashHex(data[tc.start:end]), StreamSHA256: hex.EncodeToString(h.Sum(nil))}, data[tc.start:end])
		padded := append([]byte("{"+strings.Repeat(" ", tc.spaces)), plain[1:]...)
		sealed, err := r.codec.Seal(padded)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.client.Put(ctx, s.ChunkKey("0000000000000001", tc.start, end), sealed, remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := stream(r, s)
		if tc.ok && (err != nil || !bytes.Equal(got, data)) {
			t.Errorf("chunk at %d with %d spaces in its header: %q, %v", tc.start, tc.spaces, got, err)
		}
		if name := ChunkName(tc.start, end); !tc.ok && (err == nil || !strings.Contains(err.Error(), name)) {
			t.Errorf("chunk at %d with %d spaces in its header: want %s refused, got %v", tc.start, tc.spaces, name, err)
		}
	}
}
