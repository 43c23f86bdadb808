package repo_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/repo"
)

// Rekey re-encrypts a blob (streamed: BenchmarkRekeyBlob gives its memory)
// so that it reads back byte for byte with the new key alone, and leaves a
// blob link (an empty object, omp's second name for an image) as it was:
// before, rekey failed on one ("not an age-encrypted object").
func TestRekeyBlobStreams(t *testing.T) {
	rekeyBlob(t, 3<<20, func(r *repo.Repo) {
		if _, err := r.Rekey(context.Background(), repo.RekeyOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkRekeyBlob reports the most heap a rekey adds while it
// re-encrypts one blob of 256 MiB, twice (plaintext to A, then A to B),
// sampled each millisecond (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench RekeyBlob -benchtime 1x ./repo/
//
// Read whole, a blob was held four times over (1 GiB for this one).
func BenchmarkRekeyBlob(b *testing.B) {
	for range b.N {
		var peak uint64
		rekeyBlob(b, 256<<20, func(r *repo.Repo) {
			peak = max(peak, heapAdded(b, func() error {
				_, err := r.Rekey(context.Background(), repo.RekeyOptions{Parallel: 1})
				return err
			}))
		})
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	}
}

// rekeyBlob puts a blob of size bytes of noise and a link to it in a
// plaintext repository, has rekey re-encrypt it to A, then to B, and
// checks the blob and the link after each.
func rekeyBlob(tb testing.TB, size int, rekey func(*repo.Repo)) {
	tb.Helper()
	ctx := context.Background()
	a, b := newKey(tb), newKey(tb)
	c := newRemote(tb)
	plain := repo.New(c, repo.NewZstd())
	writeSession(tb, plain, 3)
	big := make([]byte, size) // noise: it compresses to its size
	_, _ = rand.NewChaCha8([32]byte{7}).Read(big)
	sum := sha256.Sum256(big)
	name := hex.EncodeToString(sum[:])
	if _, err := plain.PutBlobFrom(ctx, name, bytes.NewReader(big), int64(size), tb.TempDir()); err != nil {
		tb.Fatal(err)
	}
	big = nil // not in the heap a benchmark measures
	if err := plain.PutBlobLink(ctx, name+".png"); err != nil {
		tb.Fatal(err)
	}
	check := func(r *repo.Repo) {
		tb.Helper()
		stored, err := c.Get(ctx, repo.BlobKey(name), 0, int64(len(repo.AgeHeader)))
		if err != nil {
			tb.Fatal(err)
		}
		head, _ := io.ReadAll(stored)
		stored.Close()
		if string(head) != repo.AgeHeader {
			tb.Fatalf("the blob is not age-encrypted after rekey: it starts %q", head)
		}
		if info, err := c.Stat(ctx, repo.BlobKey(name+".png")); err != nil || info.Size != 0 {
			tb.Fatalf("the blob link after rekey: %+v, %v; want it empty, as it was", info, err)
		}
		rc, err := r.OpenBlob(ctx, name, repo.MaxBlobSize)
		if err != nil {
			tb.Fatal(err)
		}
		defer rc.Close()
		h := sha256.New()
		if n, err := io.Copy(h, rc); err != nil || n != int64(size) || !bytes.Equal(h.Sum(nil), sum[:]) {
			tb.Fatalf("the blob read back: %d bytes, %v, same hash %t", n, err, bytes.Equal(h.Sum(nil), sum[:]))
		}
	}
	rekey(repo.New(c, codec(tb, crypt.Options{IdentityFile: a.file})))
	check(repo.New(c, codec(tb, crypt.Options{IdentityFile: a.file})))
	rekey(repo.New(c, codec(tb, crypt.Options{Recipients: []string{b.recipient}, IdentityFile: identities(tb, a, b)})))
	check(repo.New(c, codec(tb, crypt.Options{IdentityFile: b.file})))
	if _, err := repo.New(c, codec(tb, crypt.Options{IdentityFile: a.file})).OpenBlob(ctx, name, repo.MaxBlobSize); err == nil {
		tb.Error("A still opens the blob after rekey to B")
	}
}

// heapAdded runs f and returns the most heap it added while it ran,
// sampled each millisecond.
func heapAdded(tb testing.TB, f func() error) uint64 {
	tb.Helper()
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	err := f()
	close(stop)
	<-done
	if err != nil {
		tb.Fatal(err)
	}
	return peak.Load() - min(peak.Load(), m0.HeapAlloc)
}
