package repo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// writeBlobFile writes size bytes, noise with runs of text, to a file a
// block at a time, and returns the file and its SHA-256.
func writeBlobFile(t *testing.T, size int64) (*os.File, [32]byte) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "blob"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	h := sha256.New()
	w := bufio.NewWriter(io.MultiWriter(f, h))
	rng := rand.NewChaCha8([32]byte{3})
	block := make([]byte, 64<<10)
	for n := int64(0); n < size; n += int64(len(block)) {
		b := block[:min(int64(len(block)), size-n)]
		_, _ = rng.Read(b)
		copy(b, `{"type":"message","text":"a run of text that compresses"}`)
		w.Write(b)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return f, sum
}

// A blob uploaded from a file streams: the stored object is what PutBlob
// stores (one zstd frame the readers open, byte for byte the file), the
// upload allocates a small part of the blob's size, and its temp file is
// gone after. A second upload finds it there; a source shorter than its
// size uploads nothing.
func TestPutBlobFromStreams(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t)
	const size = 64 << 20
	f, sum := writeBlobFile(t, size)
	tmp := t.TempDir()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n, err := r.PutBlobFrom(ctx, "big", f, size, tmp)
	runtime.ReadMemStats(&after)
	if err != nil || n <= 0 {
		t.Fatalf("PutBlobFrom: %d, %v", n, err)
	}
	// The zstd encoder's windows and tables (about 6 MiB), a few buffers.
	if a := after.TotalAlloc - before.TotalAlloc; a > 12<<20 {
		t.Errorf("uploading a 64 MiB blob allocated %d MiB", a>>20)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("%d temp files left", len(left))
	}
	info, err := r.Client().Stat(ctx, BlobKey("big"))
	if err != nil || info.Size != n {
		t.Fatalf("stored object: %+v, %v; want %d bytes", info, err, n)
	}
	rc, err := r.OpenBlob(ctx, "big", size)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	_, err = io.Copy(h, rc)
	rc.Close()
	if err != nil || !bytes.Equal(h.Sum(nil), sum[:]) {
		t.Fatalf("the stored blob does not open to the file's bytes: %v", err)
	}
	if rc, err := r.OpenBlob(ctx, "big", size-1); err == nil {
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("read under a limit one byte short of the blob: %v, want ErrTooLarge", err)
		}
	}
	if n, err := r.PutBlobFrom(ctx, "big", f, size, tmp); err != nil || n != 0 {
		t.Errorf("second upload: %d, %v; want 0 (already there)", n, err)
	}

	small := bytes.Repeat([]byte("blob bytes "), 100)
	_, err = r.PutBlobFrom(ctx, "short", bytes.NewReader(small), int64(len(small))+1, tmp)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a source one byte short: %v, want io.ErrUnexpectedEOF", err)
	}
	if ok, _ := r.HasBlob(ctx, "short"); ok {
		t.Error("a short source was uploaded")
	}
	if n, err := r.PutBlobFrom(ctx, "small", bytes.NewReader(small), int64(len(small)), tmp); err != nil || n <= 0 {
		t.Fatal(n, err)
	}
	if got, err := r.GetBlob(ctx, "small", int64(len(small))); err != nil || !bytes.Equal(got, small) {
		t.Errorf("small blob: %q, %v", got, err)
	}
}
