package agent

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/internal/testkit/repotest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
)

// writeNoise writes size bytes to p, a block at a time: noise (what an
// image is to zstd) with a line of text at the start of each block. It
// returns their SHA-256, the blob's name.
func writeNoise(t testing.TB, p string, size int64, seed byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<20)
	rng := rand.NewChaCha8([32]byte{seed})
	block := make([]byte, 1<<20)
	for n := int64(0); n < size; n += int64(len(block)) {
		b := block[:min(int64(len(block)), size-n)]
		_, _ = rng.Read(b)
		copy(b, `{"type":"image","text":"a line of text in the noise"}`+"\n")
		w.Write(b)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func fileSHA(t testing.TB, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// A blob of 240 MiB, encrypted and not, goes up through the agent (sealed
// into a temp file of the state dir and streamed from it) and comes back
// from restore --all byte for byte; the temp folder is empty after. Its
// copy under an image name (not a hard link, hashed as it streams) is
// recorded as the blob's other name, an empty object.
func TestLargeBlobRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and uploads 240 MiB twice")
	}
	const size = 240 << 20
	for _, encrypted := range []bool{false, true} {
		name := "plain"
		if encrypted {
			name = "encrypted"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c, err := file.New(dir)
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, c)
			codec := repo.Codec(repo.NewZstd())
			if encrypted {
				codec = newTestCrypt(t)
			}
			e.repo = repo.New(e.client, codec)
			if err := e.repo.Init(t.Context()); err != nil {
				t.Fatal(err)
			}
			e.writeRename(ompRel, corpus(t, ompFile))
			sum := writeNoise(t, e.path("blobs/tmp"), size, 1)
			if err := os.Rename(e.path("blobs/tmp"), e.path("blobs/"+sum)); err != nil {
				t.Fatal(err)
			}
			small := writeNoise(t, e.path("blobs/small"), 100<<10, 2)
			os.Rename(e.path("blobs/small"), e.path("blobs/"+small))
			writeNoise(t, e.path("blobs/"+small+".png"), 100<<10, 2) // a copy, where linking failed
			old := time.Now().Add(-time.Hour)
			for _, p := range []string{sum, small, small + ".png"} {
				os.Chtimes(e.path("blobs/"+p), old, old)
			}
			e.once()

			info, err := c.Stat(t.Context(), repo.BlobKey(sum))
			if err != nil {
				t.Fatalf("blob not on the remote: %v", err)
			}
			if encrypted {
				head := make([]byte, len(repo.AgeHeader))
				f, _ := os.Open(filepath.Join(dir, filepath.FromSlash(repo.BlobKey(sum))))
				f.Read(head)
				f.Close()
				if string(head) != repo.AgeHeader {
					t.Errorf("encrypted blob starts %q", head)
				}
			}
			if link, err := c.Stat(t.Context(), repo.BlobKey(small+".png")); err != nil || link.Size != 0 {
				t.Errorf("the blob's copy under an image name: %+v, %v; want an empty object", link, err)
			}
			t.Logf("blob of %d MiB stored in %d MiB", size>>20, info.Size>>20)
			if left, _ := os.ReadDir(filepath.Join(e.stateDir, tempDirName)); len(left) != 0 {
				t.Errorf("%d temp files left in the state dir", len(left))
			}

			to := t.TempDir()
			r := repo.New(c, codec)
			rep, err := restore.Run(t.Context(), r, nil, restore.Options{All: true, AgentDir: to})
			if err != nil || !restoredAll(rep) {
				t.Fatalf("restore --all: %+v, %v", rep, err)
			}
			if got := fileSHA(t, filepath.Join(to, "blobs", sum)); got != sum {
				t.Fatalf("restored blob has SHA-256 %s, want %s", got, sum)
			}
			if got := fileSHA(t, filepath.Join(to, "blobs", small+".png")); got != small {
				t.Errorf("restored image name has SHA-256 %s, want the blob's", got)
			}
		})
	}
}

// newTestCrypt is an age codec with a fresh identity.
func newTestCrypt(t *testing.T) *crypt.Codec {
	t.Helper()
	idFile, _, _, err := crypt.NewIdentityFile(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "key.txt")
	if err := os.WriteFile(p, idFile, 0o600); err != nil {
		t.Fatal(err)
	}
	cd, err := crypt.New(crypt.Options{IdentityFile: p})
	if err != nil {
		t.Fatal(err)
	}
	return cd
}

// Every backend takes a blob through the agent's streamed upload (both S3
// clients send it from the sealed temp file, neither holding it): the
// pass allocates a fraction of the blob's size.
func TestBlobStreamsToEveryBackend(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		e.writeRename(ompRel, corpus(t, ompFile))
		const size = 48 << 20
		sum := writeNoise(t, e.path("blobs/x"), size, 3)
		os.Rename(e.path("blobs/x"), e.path("blobs/"+sum))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		e.once()
		runtime.ReadMemStats(&after)
		t.Logf("the pass allocated %d KiB", (after.TotalAlloc-before.TotalAlloc)>>10)
		// Reading it whole and sealing it in memory took 5.5 times its size.
		if a := after.TotalAlloc - before.TotalAlloc; a > size/2 {
			t.Errorf("a pass uploading a blob of %d MiB allocated %d MiB", size>>20, a>>20)
		}
		rc, err := e.repo.OpenBlob(t.Context(), sum, size)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		h := sha256.New()
		if _, err := io.Copy(h, rc); err != nil || hex.EncodeToString(h.Sum(nil)) != sum {
			t.Fatalf("the blob read back is not its bytes: %v", err)
		}
	})
}

// A blob cut short between the agent's stat and its read uploads nothing:
// the pass says the file changed, and the next one uploads what the file
// then holds.
func TestBlobShrinksUnderRead(t *testing.T) {
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, c)
	e.writeRename(ompRel, corpus(t, ompFile))
	sum := writeNoise(t, e.path("blobs/x"), 3<<20, 4)
	os.Rename(e.path("blobs/x"), e.path("blobs/"+sum))
	whole := e.read("blobs/" + sum)
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	fired := false
	a.beforeRead = func(rel string) {
		if rel == "blobs/"+sum && !fired {
			fired = true
			truncate(t, e.path(rel), 1<<20)
		}
	}
	err = a.Once(t.Context())
	a.Close()
	if !fired {
		t.Fatal("the hook never ran")
	}
	if !errors.Is(err, errFileChanged) {
		t.Errorf("pass with the blob cut under it: %v, want the file changed", err)
	}
	if ok, _ := repotest.HasBlob(t.Context(), e.repo, sum); ok {
		t.Fatal("a blob cut while read was uploaded")
	}
	// Cut, the file no longer holds the bytes its name is the hash of
	// (omp writes blobs in place, so a blob being written looks so): a
	// blob is written once, so nothing may go up until it does.
	a, err = New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	err = a.Once(t.Context())
	a.Close()
	if !errors.Is(err, errFileChanged) || !strings.Contains(err.Error(), "do not match its sha256 name") {
		t.Errorf("pass with the blob cut: %v, want its bytes refused", err)
	}
	if ok, _ := repotest.HasBlob(t.Context(), e.repo, sum); ok {
		t.Fatal("a blob whose bytes are not its name's was uploaded")
	}
	if err := os.WriteFile(e.path("blobs/"+sum), whole, 0o600); err != nil {
		t.Fatal(err)
	}
	e.once()
	got, err := e.repo.GetBlob(t.Context(), sum, 4<<20)
	if err != nil || !bytes.Equal(got, whole) {
		t.Fatalf("once whole again: %d bytes on the remote, %v; want the blob's %d", len(got), err, len(whole))
	}
}

// A blob larger than restore takes is refused at backup, by name, with
// nothing uploaded: a backup that restore would refuse is no backup. The
// pass fails (agent --once exits non-zero) and the sessions still go up.
func TestBlobPastLimitRefused(t *testing.T) {
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, c)
	e.writeRename(ompRel, corpus(t, ompFile))
	name := strings.Repeat("ab", 32)
	p := e.path("blobs/" + name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: a size past the limit without the disk it would take.
	if err := f.Truncate(repo.MaxBlobSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	err = a.Once(t.Context())
	a.Close()
	if err == nil || !strings.Contains(err.Error(), "blobs/"+name) || !strings.Contains(err.Error(), "more than restore takes (a blob: at most 536870912 bytes)") {
		t.Fatalf("pass with a blob past the limit: %v, want an error naming it", err)
	}
	if ok, _ := repotest.HasBlob(t.Context(), e.repo, name); ok {
		t.Fatal("a blob past the limit was uploaded")
	}
	e.assertRemoteEquals(ompRel, ompID)
}
