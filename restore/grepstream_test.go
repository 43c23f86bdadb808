package restore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/search"
	"github.com/ompsync/ompsync/session"
)

// grepAll runs Grep for a fixed string and returns its matches' entry ids
// and the report, problems and all.
func grepAll(t *testing.T, r *repo.Repo, pattern string, opts GrepOptions) ([]string, *GrepReport) {
	t.Helper()
	m, err := search.Compile(search.Pattern{Text: pattern})
	if err != nil {
		t.Fatal(err)
	}
	opts.Pattern = m
	var out []string
	rep, err := Grep(context.Background(), r, nil, opts, func(gm GrepMatch) error {
		out = append(out, gm.Entry+":"+gm.Text)
		return nil
	})
	if err != nil {
		t.Fatalf("grep %q: %v", pattern, err)
	}
	return out, rep
}

// peakHeap runs f and returns the most heap it saw in use while f ran,
// polled every millisecond, above what was in use before: the parse of
// each line allocates its strings (garbage at once), so what bounds memory
// is the heap, not the bytes allocated. The collector runs at a tenth of
// the usual growth meanwhile, so that the heap is what is held, not
// garbage waiting for it.
func peakHeap(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	<-done
	return max(peak.Load(), before.HeapAlloc) - before.HeapAlloc
}

// A 64 MiB session is searched with a heap far smaller than it, into a
// cache that holds it, one that does not (the records then go to a temp
// file, unlinked, and are searched from there), and no cache; a line that
// spans two chunks is found as one; the matches are those of the whole
// session indexed in memory; no temp file is left.
func TestGrepStreamsLargeSession(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	r := fileRemote(t)
	id := "0190cccc-0000-7000-8000-000000000003"
	rel := sessionPath("-w", id, 1)
	data, _ := smallSession(id, " NEEDLE-at-the-start")
	line := []byte(entry("aaaa0003", "aaaa0002", base, strings.Repeat("a long answer ", 60)))
	var cuts []int64
	for len(data) < 64<<20 {
		if len(data)/(4<<20) > len(cuts) {
			if len(cuts) == 7 {
				// A cut inside the needle's line.
				needle := entry("aaaa0004", "aaaa0003", base, "a NEEDLE-across-chunks here")
				cuts = append(cuts, int64(len(data)+len(needle)/2))
				data = append(data, needle...)
			} else {
				cuts = append(cuts, int64(len(data)+100)) // inside a line
			}
		}
		data = append(data, line...)
	}
	data = append(data, entry("aaaa0005", "aaaa0003", base, "the NEEDLE-at-the-end")...)
	putDesk(t, r, id, rel, data, cuts...)

	m, _ := search.Compile(search.Pattern{Text: "NEEDLE"})
	var want []string
	var scratch []byte
	var recs bytes.Buffer
	x := search.NewIndexer(&recs, 0, nil, 0)
	x.Write(data)
	x.Close()
	m.Scan(recs.Bytes(), 0, &scratch, func(rec search.Record) { want = append(want, rec.Entry+":"+rec.Text) })
	if len(want) != 3 {
		t.Fatalf("%d needles in the session, want 3", len(want))
	}
	size := len(data)
	data = nil // not counted in the heap grep takes
	bigDir, smallDir := filepath.Join(t.TempDir(), "big"), filepath.Join(t.TempDir(), "small")
	big, err := search.OpenCache(bigDir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	small, err := search.OpenCache(smallDir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	for _, tc := range []struct {
		name  string
		cache *search.Cache
	}{{"cache", big}, {"cached", big}, {"over the cache", small}, {"no cache", nil}} {
		var got []string
		var rep *GrepReport
		peak := peakHeap(func() { got, rep = grepAll(t, r, "NEEDLE", GrepOptions{Cache: tc.cache}) })
		t.Logf("%s: grep of 64 MiB with a heap of at most %.1f MiB", tc.name, float64(peak)/(1<<20))
		if strings.Join(got, "\n") != strings.Join(want, "\n") || len(rep.Problems) > 0 {
			t.Errorf("%s: matches %q, want %q; problems %v", tc.name, got, want, rep.Problems)
		}
		if peak >= uint64(size)/3 {
			t.Errorf("%s: grep of 64 MiB with a heap of %d MiB", tc.name, peak>>20)
		}
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Errorf("%s: grep left %s", tc.name, left[0].Name())
		}
		if n := cacheSize(t, smallDir); n > 0 {
			t.Errorf("%s: the small cache holds %d bytes", tc.name, n)
		}
	}
	if n := cacheSize(t, bigDir); n < int64(size)/2 {
		t.Errorf("the cache holds %d bytes of records", n)
	}
}

// A copy that grew by a verified chunk and a damaged one: the search
// names it, exits with a problem, and searches it as the cache had it:
// none of the new lines, not even the verified chunk's, and the cache is
// left as it was; without a cache, nothing of it. Once the chunk is
// whole again, the new lines are found.
func TestGrepDamagedCopy(t *testing.T) {
	r := fileRemote(t)
	id := "0190dddd-0000-7000-8000-000000000001"
	rel := sessionPath("-w", id, 1)
	old, cuts := smallSession(id, " OLD-words")
	good := entry("aaaa0003", "aaaa0002", base, "NEW-words, verified")
	bad := entry("aaaa0004", "aaaa0003", base, "NEW-words, damaged")
	full := []byte(string(old) + good + bad)
	_, gen := putSession(t, r, "desk", id, rel, old, cuts...)
	catalog := func(size int) {
		putCatalog(t, r, "desk", repo.CatalogEntry{ID: id, Path: rel, Generation: gen, Size: int64(size), Mtime: base, State: repo.StatePresent, Changed: base})
	}
	catalog(len(old))
	dir := filepath.Join(t.TempDir(), "search")
	cache, err := search.OpenCache(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	if got, rep := grepAll(t, r, "OLD-words", GrepOptions{Cache: cache}); len(got) != 1 || len(rep.Problems) > 0 {
		t.Fatalf("before: %q %v", got, rep.Problems)
	}
	before, _ := cache.State(id, "desk")

	// Grown: the last chunk's bytes are not those its hashes say.
	s, _ := putSession(t, r, "desk", id, rel, full, append(cuts, int64(len(old)), int64(len(old)+len(good)))...)
	damaged := []byte(bad)
	damaged[len(damaged)-10] ^= 1
	start, end := int64(len(old)+len(good)), int64(len(full))
	h := sha256.Sum256(full[session.SlotLen(full):])
	hdr := repo.ChunkHeader{Start: start, End: end, SHA256: repo.HashHex(full[start:]), StreamSHA256: hex.EncodeToString(h[:])}
	if _, err := r.PutChunk(context.Background(), s, gen, hdr, damaged, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	catalog(len(full))
	for _, c := range []*search.Cache{cache, nil} {
		got, rep := grepAll(t, r, "words", GrepOptions{Cache: c})
		want := "aaaa0002:second OLD-words"
		if c == nil {
			want = ""
		}
		if strings.Join(got, "|") != want {
			t.Errorf("cache %v: matches %q, want %q", c != nil, got, want)
		}
		if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "session "+id+", machine desk") || !strings.Contains(rep.Problems[0], "chunk "+repo.ChunkName(start, end)+": sha256 mismatch") {
			t.Errorf("cache %v: problems %q", c != nil, rep.Problems)
		}
	}
	after, _ := cache.State(id, "desk")
	if after == nil || after.Offset != before.Offset || after.Records != before.Records {
		t.Errorf("the cache after the damaged read: %+v, before %+v", after, before)
	}
	if fi, err := os.Stat(filepath.Join(dir, id, "desk.txt")); err != nil || fi.Size() != before.Records {
		t.Errorf("records file after the damaged read: %v %v, %d valid", fi.Size(), err, before.Records)
	}

	putSession(t, r, "desk", id, rel, full, append(cuts, int64(len(old)), int64(len(old)+len(good)))...)
	got, rep := grepAll(t, r, "NEW-words", GrepOptions{Cache: cache})
	if len(got) != 2 || len(rep.Problems) > 0 || rep.Fetched != 1 || rep.Bytes != int64(len(good)+len(bad)) {
		t.Errorf("repaired: %q, %+v", got, rep)
	}
}

// A line longer than a search reads of one is left out and named, in
// every search while the cache holds the copy, and after it grows; the
// lines around it are found, a line across chunks too.
func TestGrepLongLine(t *testing.T) {
	r := fileRemote(t)
	id := "0190eeee-0000-7000-8000-000000000001"
	rel := sessionPath("-w", id, 1)
	data, _ := smallSession(id, " WORD before")
	longAt := len(data)
	data = append(data, entry("aaaa0003", "aaaa0002", base, "WORD inside "+strings.Repeat("x", 10<<10))...)
	longSize := len(data) - longAt - 1
	data = append(data, entry("aaaa0004", "aaaa0003", base, "WORD after")...)
	_, gen := putSession(t, r, "desk", id, rel, data, int64(longAt+100), int64(longAt+5000), int64(len(data)-20))
	putCatalog(t, r, "desk", repo.CatalogEntry{ID: id, Path: rel, Generation: gen, Size: int64(len(data)), Mtime: base, State: repo.StatePresent, Changed: base})
	cache, err := search.OpenCache(filepath.Join(t.TempDir(), "search"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	note := fmt.Sprintf("session %s, machine desk: the line at byte %d holds %d bytes, more than the 4096 bytes a search reads of one line; not searched", id, longAt, longSize)
	for _, c := range []*search.Cache{cache, cache, nil} {
		got, rep := grepAll(t, r, "WORD", GrepOptions{Cache: c, maxLine: 4 << 10})
		if strings.Join(got, "|") != "aaaa0002:second WORD before|aaaa0004:WORD after" || len(rep.Problems) > 0 {
			t.Errorf("cache %v: %q %v", c != nil, got, rep.Problems)
		}
		if strings.Join(rep.LeftOut, "|") != note {
			t.Errorf("cache %v: left out %q, want %q", c != nil, rep.LeftOut, note)
		}
	}
}
