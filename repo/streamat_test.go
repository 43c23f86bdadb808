package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
)

// writeMarked writes a generation of data in chunks ending at ends, each
// with the marks given for it, the byte at damage (when not -1) flipped
// in the chunk that holds it after its hashes were taken, and returns its
// inventory entry.
func writeMarked(t *testing.T, r *Repo, s Stream, gen string, data []byte, hashFrom int64, ends []int64, marks [][]Mark, damage int64) *Generation {
	t.Helper()
	ctx := context.Background()
	h := sha256.New()
	var start int64
	for i, end := range ends {
		h.Write(data[max(start, hashFrom):end])
		hdr := ChunkHeader{Start: start, End: end, HashFrom: hashFrom, SHA256: HashHex(data[start:end]), StreamSHA256: hex.EncodeToString(h.Sum(nil)), Uploaded: marks[i]}
		body := append([]byte(nil), data[start:end]...)
		if start <= damage && damage < end {
			body[damage-start] ^= 1
		}
		if _, err := r.PutChunk(ctx, s, gen, hdr, body, remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		start = end
	}
	if err := r.PutMeta(ctx, s, Meta{SessionID: s.SessionID, Machine: s.Machine, Stream: s.Name, Generation: gen, HashFrom: hashFrom, Path: "sessions/-x/a.jsonl", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	invs, err := r.Inventory(ctx, s.SessionID, s.Machine)
	if err != nil {
		t.Fatal(err)
	}
	return invs[0].Find(gen)
}

// StreamGenerationAt writes exactly what ReadGenerationHashOnce's bytes cut
// by UploadedBy of its marks give, at every time: a cut inside a chunk of
// several marks, at a chunk's end, before the first mark, and past a later
// mark with an earlier time; it reads no chunk after the cut, but refuses
// the chunk the cut falls in when any of its bytes are damaged.
func TestStreamGenerationAt(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t)
	s := Stream{SessionID: "abc", Machine: "m1", Name: SessionStream}
	data := []byte(strings.Repeat("line of text\n", 100)) // 1300 bytes
	ends := []int64{520, 910, 1300}
	marks := [][]Mark{
		{{End: 130, At: 1000}, {End: 520, At: 2000}}, // a compacted chunk
		{{End: 910, At: 3000}},
		{{End: 1300, At: 2500}}, // earlier than the mark before: never counted
	}
	g := writeMarked(t, r, s, "0000000000000001", data, 0, ends, marks, -1)
	as, err := r.ReadGenerationHashOnce(ctx, s, g, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, ms := range []int64{999, 1000, 1999, 2000, 2600, 3000, 9000} {
		at := time.UnixMilli(ms)
		n, when := UploadedBy(as.Marks, at)
		var buf bytes.Buffer
		st, err := r.StreamGenerationAt(ctx, s, g, 1<<20, &buf, at)
		if err != nil || st.Size != n || !bytes.Equal(buf.Bytes(), as.Data[:n]) || !st.Uploaded.Equal(when) {
			t.Errorf("at %d: %v, wrote %d bytes (Size %d) uploaded %v; want %d bytes uploaded %v", ms, err, buf.Len(), st.Size, st.Uploaded, n, when)
		}
	}

	// The last chunk damaged: at 2000 the cut is inside the first chunk,
	// whose bytes all verify, and the last is never read.
	g = writeMarked(t, r, s, "0000000000000002", data, 0, ends, marks, 1000)
	var buf bytes.Buffer
	if st, err := r.StreamGenerationAt(ctx, s, g, 1<<20, &buf, time.UnixMilli(2000)); err != nil || st.Size != 520 || !bytes.Equal(buf.Bytes(), data[:520]) {
		t.Errorf("a damaged chunk after the cut: %v, %d bytes", err, st.Size)
	}
	if _, err := r.StreamGenerationAt(ctx, s, g, 1<<20, io.Discard, time.UnixMilli(9000)); err == nil {
		t.Error("a damaged chunk before the cut: no error")
	}
	// The first chunk damaged past the cut at 130: its bytes before the
	// cut are not trusted either.
	g = writeMarked(t, r, s, "0000000000000003", data, 0, ends, marks, 400)
	if _, err := r.StreamGenerationAt(ctx, s, g, 1<<20, io.Discard, time.UnixMilli(1000)); err == nil || !strings.Contains(err.Error(), "mismatch") {
		t.Errorf("a cut inside a damaged chunk: %v, want a mismatch", err)
	}

	// A title slot: a cut before hash_from is refused; none at all writes
	// nothing, without reading the head.
	slotted := append(bytes.Repeat([]byte{'x'}, HeadSize-1), '\n')
	slotted = append(slotted, data...)
	g = writeMarked(t, r, s, "0000000000000004", slotted, HeadSize, []int64{int64(len(slotted))}, [][]Mark{{{End: 100, At: 1000}, {End: int64(len(slotted)), At: 2000}}}, -1)
	if _, err := r.StreamGenerationAt(ctx, s, g, 1<<20, io.Discard, time.UnixMilli(1500)); err == nil || !strings.Contains(err.Error(), "inside the title slot") {
		t.Errorf("a cut inside the title slot: %v", err)
	}
	if st, err := r.StreamGenerationAt(ctx, s, g, 1<<20, io.Discard, time.UnixMilli(500)); err != nil || st.Size != 0 {
		t.Errorf("before the first mark: %v, %d bytes", err, st.Size)
	}
}
