package repo

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/ompsync/ompsync/remote"
)

// A blob streams through OpenBlob in a few buffers, whatever its size; a
// bomb stops at the limit, having inflated no more than that; a stored
// object larger than its plaintext could need is refused.
func TestOpenBlobStreams(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t)
	big := make([]byte, 32<<20)
	rand.Read(big)
	if _, err := r.PutBlob(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	rc, err := r.OpenBlob(ctx, "big", int64(len(big)))
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&before)
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	runtime.ReadMemStats(&after)
	if hex.EncodeToString(h.Sum(nil)) != HashHex(big) {
		t.Fatal("streamed blob differs")
	}
	// A decoder is made once (8 MiB of tables and window), then pooled.
	if n := after.TotalAlloc - before.TotalAlloc; n > 12<<20 {
		t.Errorf("streaming a 32 MiB blob allocated %d MiB", n>>20)
	}

	// 1 GiB of zeros in a few KiB.
	enc, _ := zstd.NewWriter(nil)
	w := &bytes.Buffer{}
	enc.Reset(w)
	zeros := make([]byte, 1<<20)
	for range 1 << 10 {
		enc.Write(zeros)
	}
	enc.Close()
	if err := r.client.Put(ctx, BlobKey("bomb"), w.Bytes(), remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&before)
	rc, err = r.OpenBlob(ctx, "bomb", 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) || n > 4<<20 {
		t.Errorf("bomb: %d bytes, %v; want ErrTooLarge within the limit", n, err)
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > 32<<20 {
		t.Errorf("refusing the bomb allocated %d MiB", a>>20)
	}

	// Stored bytes past what the plaintext limit allows: a skippable
	// frame of 2 MiB inflates to nothing.
	skip := append([]byte{0x50, 0x2a, 0x4d, 0x18, 0, 0, 0x20, 0}, make([]byte, 2<<20)...)
	if err := r.client.Put(ctx, BlobKey("skip"), skip, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, err = r.OpenBlob(ctx, "skip", 1<<10)
	if err == nil {
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "larger than its plaintext could need") {
		t.Errorf("2 MiB stored for 1 KiB of plaintext: %v", err)
	}
	if _, err := r.OpenBlob(ctx, "missing", 1<<10); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("missing blob: %v", err)
	}
}

// A generation streams through StreamGeneration in a few buffers, not a
// chunk and never the whole: 64 MiB in 4 MiB chunks allocates less than
// it (about 18 MiB, other tests' goroutines and the race detector aside),
// where ReadGenerationHashOnce holds all of it.
func TestStreamGenerationMemory(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t)
	s := Stream{SessionID: "abc", Machine: "m1", Name: SessionStream}
	line := []byte(strings.Repeat("a line of a long session, ", 20) + "\n")
	data := bytes.Repeat(line, (64<<20)/len(line))
	var cuts []int64
	for c := int64(4 << 20); c < int64(len(data)); c += 4 << 20 {
		cuts = append(cuts, c)
	}
	writeGen(t, r, s, "0000000000000001", data, cuts...)
	invs, err := r.Inventory(ctx, "abc", "m1")
	if err != nil {
		t.Fatal(err)
	}
	g := invs[0].Newest()
	h := sha256.New()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st, err := r.StreamGeneration(ctx, s, g, 1<<30, h, false)
	runtime.ReadMemStats(&after)
	if err != nil || st.Size != int64(len(data)) || hex.EncodeToString(h.Sum(nil)) != HashHex(data) {
		t.Fatalf("streamed %d bytes, %v", st.Size, err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n >= uint64(len(data)) {
		t.Errorf("streaming 64 MiB allocated %d MiB", n>>20)
	}
}
