package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
)

func newTestRepo(t *testing.T) *Repo {
	t.Helper()
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return New(c, NewZstd())
}

// writeGen uploads data as one generation in chunks cut at the given
// offsets, computing hashes as the agent does.
func writeGen(t *testing.T, r *Repo, s Stream, gen string, data []byte, cuts ...int64) {
	t.Helper()
	ctx := context.Background()
	h := sha256.New()
	var start int64
	for _, end := range append(cuts, int64(len(data))) {
		h.Write(data[start:end])
		hdr := ChunkHeader{Start: start, End: end, SHA256: HashHex(data[start:end]), StreamSHA256: hex.EncodeToString(h.Sum(nil))}
		if _, err := r.PutChunk(ctx, s, gen, hdr, data[start:end], remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		start = end
	}
	if err := r.PutMeta(ctx, s, Meta{SessionID: s.SessionID, Machine: s.Machine, Stream: s.Name, Generation: gen, Path: "sessions/-x/a.jsonl", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, r *Repo, s Stream) ([]byte, error) {
	t.Helper()
	invs, err := r.Inventory(context.Background(), s.SessionID, s.Machine)
	if err != nil {
		return nil, err
	}
	for _, inv := range invs {
		if inv.Stream == s {
			as, err := r.ReadGeneration(context.Background(), s, inv.Newest(), 1<<30)
			if err != nil {
				return nil, err
			}
			return as.Data, nil
		}
	}
	return nil, errors.New("no stream")
}

func TestReadGenerationOverlapsAndGaps(t *testing.T) {
	r := newTestRepo(t)
	s := Stream{SessionID: "abc", Machine: "m1", Name: SessionStream}
	data := []byte(strings.Repeat("line of text\n", 100))
	writeGen(t, r, s, "0000000000000001", data, 130, 650)
	// An overlapping chunk, as after a crash that re-uploaded a range.
	h := sha256.New()
	h.Write(data[:910])
	if _, err := r.PutChunk(context.Background(), s, "0000000000000001", ChunkHeader{Start: 130, End: 910, SHA256: HashHex(data[130:910]), StreamSHA256: hex.EncodeToString(h.Sum(nil))}, data[130:910], remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := read(t, r, s)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("overlapping chunks: %v", err)
	}
	// A gap: remove the middle chunk.
	if err := r.Client().Delete(context.Background(), s.ChunkKey("0000000000000001", 130, 650)); err != nil {
		t.Fatal(err)
	}
	if err := r.Client().Delete(context.Background(), s.ChunkKey("0000000000000001", 130, 910)); err != nil {
		t.Fatal(err)
	}
	if _, err := read(t, r, s); !errors.Is(err, ErrGap) {
		t.Fatalf("gap not refused: %v", err)
	}
}

// A machine that pulled bytes from another stores reference chunks; reading
// resolves them and checks their hash.
func TestReferenceChunks(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t)
	b := Stream{SessionID: "abc", Machine: "desk", Name: SessionStream}
	a := Stream{SessionID: "abc", Machine: "laptop", Name: SessionStream}
	data := []byte(strings.Repeat("entry\n", 300))
	writeGen(t, r, b, "00000000000000b1", data, 600, 1200)

	// laptop: its own first 100 bytes, then [100, 1500) by reference, then its own.
	mine := append(append([]byte{}, data...), []byte("laptop's own work\n")...)
	h := sha256.New()
	put := func(start, end int64, ref *ChunkSource) {
		h.Write(mine[start:end])
		hdr := ChunkHeader{Start: start, End: end, SHA256: HashHex(mine[start:end]), StreamSHA256: hex.EncodeToString(h.Sum(nil)), Ref: ref}
		var body []byte
		if ref == nil {
			body = mine[start:end]
		}
		if _, err := r.PutChunk(ctx, a, "00000000000000a1", hdr, body, remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put(0, 100, nil)
	put(100, 1500, &ChunkSource{Machine: "desk", Generation: "00000000000000b1"})
	put(1500, int64(len(mine)), nil)
	if err := r.PutMeta(ctx, a, Meta{SessionID: "abc", Machine: "laptop", Stream: SessionStream, Generation: "00000000000000a1", Path: "sessions/-x/a.jsonl"}); err != nil {
		t.Fatal(err)
	}
	got, err := read(t, r, a)
	if err != nil || !bytes.Equal(got, mine) {
		t.Fatalf("reference chunks: %v", err)
	}

	// The referenced bytes change (a hostile or damaged remote): refused.
	bad := append([]byte{}, data...)
	bad[700] = 'X'
	writeGen(t, r, b, "00000000000000b1", bad, 600, 1200)
	if _, err := read(t, r, a); err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("changed referenced bytes: %v", err)
	}
}

// A reference cycle cannot make a reader loop.
func TestReferenceCycleRefused(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t)
	data := []byte("x\n")
	for _, m := range []string{"one", "two"} {
		other := map[string]string{"one": "two", "two": "one"}[m]
		s := Stream{SessionID: "abc", Machine: m, Name: SessionStream}
		h := sha256.New()
		h.Write(data)
		hdr := ChunkHeader{Start: 0, End: 2, SHA256: HashHex(data), StreamSHA256: hex.EncodeToString(h.Sum(nil)), Ref: &ChunkSource{Machine: other, Generation: "0000000000000001"}}
		if _, err := r.PutChunk(ctx, s, "0000000000000001", hdr, nil, remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		r.PutMeta(ctx, s, Meta{SessionID: "abc", Machine: m, Stream: SessionStream, Generation: "0000000000000001", Path: "sessions/-x/a.jsonl"})
	}
	_, err := read(t, r, Stream{SessionID: "abc", Machine: "one", Name: SessionStream})
	if err == nil || !strings.Contains(err.Error(), "deeper") {
		t.Fatalf("cycle: %v", err)
	}
}
