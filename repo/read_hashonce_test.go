package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/session"
)

// slotted is a session file that starts with omp's title slot.
func slotted(lines int) []byte {
	slot := `{"type":"title","title":"a title"`
	slot += `,"pad":"` + strings.Repeat(" ", session.TitleSlotSize-len(slot)-len(`,"pad":""}`)-1) + `"}` + "\n"
	return []byte(slot + strings.Repeat(`{"type":"message","id":"00000001"}`+"\n", lines))
}

// putGen uploads data as one generation cut at the given offsets, with
// hashes as the agent computes them (the stream hash from hashFrom).
func putGen(t *testing.T, r *Repo, s Stream, gen string, data []byte, hashFrom int64, cuts ...int64) {
	t.Helper()
	ctx := context.Background()
	h := sha256.New()
	var start int64
	for _, end := range append(cuts, int64(len(data))) {
		if from := max(hashFrom, start); from < end {
			h.Write(data[from:end])
		}
		hdr := ChunkHeader{Start: start, End: end, HashFrom: hashFrom, SHA256: HashHex(data[start:end]), StreamSHA256: hex.EncodeToString(h.Sum(nil))}
		if _, err := r.PutChunk(ctx, s, gen, hdr, data[start:end], remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		start = end
	}
	if err := r.PutMeta(ctx, s, Meta{SessionID: s.SessionID, Machine: s.Machine, Stream: s.Name, Generation: gen, Path: "sessions/-x/a.jsonl", HashFrom: hashFrom}); err != nil {
		t.Fatal(err)
	}
}

// readBoth streams the newest generation of s both ways: every hash
// checked, and each byte hashed once.
func readBoth(t *testing.T, r *Repo, s Stream) (every, once []byte, errEvery, errOnce error) {
	t.Helper()
	ctx := context.Background()
	invs, err := r.Inventory(ctx, s.SessionID, s.Machine)
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range invs {
		if inv.Stream != s {
			continue
		}
		stream := func(every bool) ([]byte, error) {
			var b bytes.Buffer
			st, err := r.StreamGeneration(ctx, s, inv.Newest(), 1<<30, &b, every)
			if err != nil {
				return nil, err
			}
			copy(b.Bytes(), st.Head)
			return b.Bytes(), nil
		}
		every, errEvery = stream(true)
		once, errOnce = stream(false)
		return every, once, errEvery, errOnce
	}
	t.Fatal("no stream")
	return
}

// Reading with each byte hashed once gives the same bytes as reading with
// every hash, however the generation is cut, with or without a title slot,
// with overlapping chunks, reference chunks and a head object.
func TestReadGenerationHashOnceSameBytes(t *testing.T) {
	ctx := context.Background()
	plain := []byte(strings.Repeat("line of text\n", 100))
	slot := slotted(60)
	for _, tc := range []struct {
		name     string
		data     []byte
		hashFrom int64
		cuts     []int64
	}{
		{"one chunk", plain, 0, nil},
		{"one chunk, title slot", slot, session.TitleSlotSize, nil},
		{"three chunks", plain, 0, []int64{130, 650}},
		{"three chunks, title slot", slot, session.TitleSlotSize, []int64{400, 900}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			s := Stream{SessionID: "abc", Machine: "m1", Name: SessionStream}
			putGen(t, r, s, "0000000000000001", tc.data, tc.hashFrom, tc.cuts...)
			every, once, e1, e2 := readBoth(t, r, s)
			if e1 != nil || e2 != nil || !bytes.Equal(every, tc.data) || !bytes.Equal(once, tc.data) {
				t.Fatalf("every hash: %v; hashed once: %v", e1, e2)
			}
		})
	}

	r := newTestRepo(t)
	s := Stream{SessionID: "abc", Machine: "m1", Name: SessionStream}
	putGen(t, r, s, "0000000000000001", slot, session.TitleSlotSize, 400, 900)
	// A chunk uploaded again over a range already held, and a new title.
	h := sha256.New()
	h.Write(slot[session.TitleSlotSize:1000])
	if _, err := r.PutChunk(ctx, s, "0000000000000001", ChunkHeader{Start: 400, End: 1000, HashFrom: session.TitleSlotSize, SHA256: HashHex(slot[400:1000]), StreamSHA256: hex.EncodeToString(h.Sum(nil))}, slot[400:1000], remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	head := bytes.Replace(slot[:session.TitleSlotSize], []byte("a title"), []byte("renamed"), 1)
	if err := r.PutHead(ctx, s, "0000000000000001", head); err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte{}, head...), slot[session.TitleSlotSize:]...)
	every, once, e1, e2 := readBoth(t, r, s)
	if e1 != nil || e2 != nil || !bytes.Equal(every, want) || !bytes.Equal(once, want) {
		t.Fatalf("overlap and head: every hash: %v; hashed once: %v", e1, e2)
	}

	// Reference chunks resolve the same way.
	desk := Stream{SessionID: "abc", Machine: "desk", Name: SessionStream}
	putGen(t, r, desk, "00000000000000d1", plain, 0, 600)
	lap := Stream{SessionID: "abc", Machine: "laptop", Name: SessionStream}
	h = sha256.New()
	h.Write(plain)
	if _, err := r.PutChunk(ctx, lap, "00000000000000a1", ChunkHeader{Start: 0, End: int64(len(plain)), SHA256: HashHex(plain), StreamSHA256: hex.EncodeToString(h.Sum(nil)), Ref: &ChunkSource{Machine: "desk", Generation: "00000000000000d1"}}, nil, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.PutMeta(ctx, lap, Meta{SessionID: "abc", Machine: "laptop", Stream: SessionStream, Generation: "00000000000000a1", Path: "sessions/-x/a.jsonl"}); err != nil {
		t.Fatal(err)
	}
	every, once, e1, e2 = readBoth(t, r, lap)
	if e1 != nil || e2 != nil || !bytes.Equal(every, plain) || !bytes.Equal(once, plain) {
		t.Fatalf("reference: every hash: %v; hashed once: %v", e1, e2)
	}
}

// Every kind of damage reading with every hash refuses, reading with each
// byte hashed once refuses too, naming the same problem: the bytes of a
// chunk (of the only chunk, of a later one, of the title slot), a chunk
// from another upload that is sound on its own, a header whose stream hash
// disagrees with its bytes.
func TestReadGenerationHashOnceRefusesDamage(t *testing.T) {
	ctx := context.Background()
	plain := []byte(strings.Repeat("line of text\n", 100))
	slot := slotted(60)
	gen := "0000000000000001"
	// rewrite replaces chunk [a, b) with bytes, its header claiming the
	// hashes given ("" keeps what the sound chunk had).
	rewrite := func(t *testing.T, r *Repo, s Stream, a, b int64, body []byte, sum, stream string) {
		t.Helper()
		hdr, _, err := r.GetChunk(ctx, s, gen, a, b)
		if err != nil {
			t.Fatal(err)
		}
		if sum != "" {
			hdr.SHA256 = sum
		}
		if stream != "" {
			hdr.StreamSHA256 = stream
		}
		if _, err := r.PutChunk(ctx, s, gen, hdr, body, remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	flip := func(b []byte, at int) []byte {
		out := append([]byte{}, b...)
		out[at] ^= 0x20
		return out
	}
	for _, tc := range []struct {
		name     string
		data     []byte
		hashFrom int64
		cuts     []int64
		damage   func(t *testing.T, r *Repo, s Stream, data []byte)
		want     string
	}{
		{"bytes of the only chunk", plain, 0, nil, func(t *testing.T, r *Repo, s Stream, d []byte) {
			rewrite(t, r, s, 0, int64(len(d)), flip(d, 500), "", "")
		}, "sha256 mismatch"},
		{"bytes of the only chunk, title slot", slot, session.TitleSlotSize, nil, func(t *testing.T, r *Repo, s Stream, d []byte) {
			rewrite(t, r, s, 0, int64(len(d)), flip(d, 500), "", "")
		}, "sha256 mismatch"},
		{"title slot of the only chunk", slot, session.TitleSlotSize, nil, func(t *testing.T, r *Repo, s Stream, d []byte) {
			rewrite(t, r, s, 0, int64(len(d)), flip(d, 20), "", "")
		}, "sha256 mismatch"},
		{"title slot of the first chunk", slot, session.TitleSlotSize, []int64{400, 900}, func(t *testing.T, r *Repo, s Stream, d []byte) {
			rewrite(t, r, s, 0, 400, flip(d[:400], 20), "", "")
		}, "sha256 mismatch"},
		{"bytes of a later chunk", plain, 0, []int64{130, 650}, func(t *testing.T, r *Repo, s Stream, d []byte) {
			rewrite(t, r, s, 130, 650, flip(d[130:650], 200), "", "")
		}, "sha256 mismatch"},
		{"bytes of the last chunk, title slot", slot, session.TitleSlotSize, []int64{400, 900}, func(t *testing.T, r *Repo, s Stream, d []byte) {
			rewrite(t, r, s, 900, int64(len(d)), flip(d[900:], 10), "", "")
		}, "sha256 mismatch"},
		{"a sound chunk of another upload", plain, 0, []int64{130, 650}, func(t *testing.T, r *Repo, s Stream, d []byte) {
			other := flip(d[130:650], 200)
			rewrite(t, r, s, 130, 650, other, HashHex(other), "")
		}, "stream hash mismatch"},
		{"stream hash of the only chunk", plain, 0, nil, func(t *testing.T, r *Repo, s Stream, d []byte) {
			rewrite(t, r, s, 0, int64(len(d)), d, "", strings.Repeat("0", 64))
		}, "stream hash mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			s := Stream{SessionID: "abc", Machine: "m1", Name: SessionStream}
			putGen(t, r, s, gen, tc.data, tc.hashFrom, tc.cuts...)
			tc.damage(t, r, s, tc.data)
			_, _, e1, e2 := readBoth(t, r, s)
			if e1 == nil || !strings.Contains(e1.Error(), tc.want) {
				t.Errorf("every hash: %v, want %q", e1, tc.want)
			}
			if e2 == nil || !strings.Contains(e2.Error(), tc.want) {
				t.Errorf("hashed once: %v, want %q", e2, tc.want)
			}
		})
	}
}
