package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"io"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/session"
)

// Reading on from where a reader left off gives exactly the new bytes,
// fetching only the chunks that hold them, and still verifies them: with
// a state that is not the stream's, or a chunk that changed, it refuses.
func TestStreamGenerationFrom(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		data     []byte
		hashFrom int64
	}{
		{"plain", []byte(strings.Repeat("line of text\n", 100)), 0},
		{"title slot", slotted(100), session.TitleSlotSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			s := Stream{SessionID: "abc", Machine: "m1", Name: SessionStream}
			gen := "0000000000000001"
			putGen(t, r, s, gen, tc.data[:650], tc.hashFrom, 390)
			g := newest(t, r, s)
			first, err := readFrom(r, s, g, 0, nil)
			if err != nil || !bytes.Equal(first.Data, tc.data[:650]) || first.End != 650 || first.HashFrom != tc.hashFrom {
				t.Fatalf("from 0: %v, %d bytes", err, len(first.Data))
			}

			// The session grows by two chunks: only those are read.
			putChunks(t, r, s, gen, tc.data, tc.hashFrom, 650, 910, int64(len(tc.data)))
			g = newest(t, r, s)
			cnt := &getCounter{Client: r.client}
			rc := New(cnt, r.codec)
			next, err := readFrom(rc, s, g, first.End, first.HashState)
			if err != nil || next.From != 650 || !bytes.Equal(next.Data, tc.data[650:]) || next.End != int64(len(tc.data)) {
				t.Fatalf("from 650: %v, %d bytes", err, len(next.Data))
			}
			if cnt.gets != 2 {
				t.Errorf("read on with %d GETs, want 2 (the new chunks)", cnt.gets)
			}
			// Nothing new: nothing read.
			cnt.gets = 0
			last, err := readFrom(rc, s, g, next.End, next.HashState)
			if err != nil || len(last.Data) != 0 || cnt.gets != 0 {
				t.Errorf("at the end: %v, %d bytes, %d GETs", err, len(last.Data), cnt.gets)
			}

			// A state from another stream: refused.
			other := sha256State(t, []byte("something else"))
			if _, err := readFrom(r, s, g, 650, other); err == nil || !strings.Contains(err.Error(), "stream hash mismatch") {
				t.Errorf("a wrong state: %v", err)
			}
			// Compacted since: the merged chunk begins before 650, and is
			// read whole for the bytes past it.
			putChunks(t, r, s, gen, tc.data, tc.hashFrom, 0, 910)
			for _, c := range [][2]int64{{0, 390}, {390, 650}, {650, 910}} {
				if err := r.client.Delete(ctx, s.ChunkKey(gen, c[0], c[1])); err != nil {
					t.Fatal(err)
				}
			}
			cnt.gets = 0
			again, err := readFrom(rc, s, newest(t, r, s), first.End, first.HashState)
			if err != nil || !bytes.Equal(again.Data, tc.data[650:]) || !bytes.Equal(again.HashState, next.HashState) || cnt.gets != 2 {
				t.Errorf("after compaction: %v, %d bytes, %d GETs", err, len(again.Data), cnt.gets)
			}
			// A new chunk whose bytes are not the stream's: refused.
			bad := bytes.Clone(tc.data[910:])
			bad[len(bad)-5] ^= 1
			end := int64(len(tc.data))
			hdr := ChunkHeader{Start: 910, End: end, HashFrom: tc.hashFrom, SHA256: HashHex(tc.data[910:]), StreamSHA256: HashHex(tc.data[tc.hashFrom:])}
			if _, err := r.PutChunk(ctx, s, gen, hdr, bad, remote.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := readFrom(r, s, newest(t, r, s), first.End, first.HashState); err == nil {
				t.Error("a damaged new chunk: no error")
			}
			// Less than was read before: a gap.
			if _, err := readFrom(r, s, g, int64(len(tc.data))+10, next.HashState); err == nil {
				t.Error("reading on past the end: no error")
			}
		})
	}
}

// tailData is a Tail with the bytes StreamGenerationFrom wrote.
type tailData struct {
	*Tail
	Data []byte
}

func readFrom(r *Repo, s Stream, g *Generation, from int64, state []byte) (tailData, error) {
	var b bytes.Buffer
	t, err := r.StreamGenerationFrom(context.Background(), s, g, from, state, 1<<30, &b)
	return tailData{t, b.Bytes()}, err
}

// putChunks uploads the chunks between consecutive offsets of cuts, each
// with the stream hash of data from hashFrom.
func putChunks(t *testing.T, r *Repo, s Stream, gen string, data []byte, hashFrom int64, cuts ...int64) {
	t.Helper()
	for i := 0; i+1 < len(cuts); i++ {
		a, b := cuts[i], cuts[i+1]
		hdr := ChunkHeader{Start: a, End: b, HashFrom: hashFrom, SHA256: HashHex(data[a:b]), StreamSHA256: HashHex(data[hashFrom:b])}
		if _, err := r.PutChunk(context.Background(), s, gen, hdr, data[a:b], remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// sha256State is the marshalled state of a sha256 that hashed b.
func sha256State(t *testing.T, b []byte) []byte {
	h := sha256.New()
	h.Write(b)
	st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// getCounter counts GETs.
type getCounter struct {
	remote.Client
	gets int
}

func (c *getCounter) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	c.gets++
	return c.Client.Get(ctx, key, off, n)
}

func newest(t *testing.T, r *Repo, s Stream) *Generation {
	t.Helper()
	invs, err := r.Inventory(context.Background(), s.SessionID, s.Machine)
	if err != nil || len(invs) != 1 {
		t.Fatal(err)
	}
	return invs[0].Newest()
}
