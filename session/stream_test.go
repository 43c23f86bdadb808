package session_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/race"

	"github.com/ompsync/ompsync/internal/testkit/mergeref"
	"github.com/ompsync/ompsync/session"
)

// checkStreamed asserts that the streamed merge of copies writes exactly
// Merge's bytes, and that Holds says which copies hold every line.
func checkStreamed(t testing.TB, f session.Format, copies ...[]byte) {
	t.Helper()
	want, err := mergeref.Merge(f, copies...)
	if err != nil {
		t.Fatal(err)
	}
	x, err := f.NewIndex(1<<40, mergeref.ByteSources(copies...)...)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	n, err := x.WriteTo(&got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) || n != int64(len(want)) {
		t.Fatalf("streamed merge (%d bytes, %d said) differs from Merge (%d bytes):\n%q\nwant\n%q", got.Len(), n, len(want), got.Bytes(), want)
	}
	// Holds is adoptComplete's test: the copy's lines are the union of all.
	union := map[string]int{}
	counts := make([]map[string]int, len(copies))
	for i, c := range copies {
		counts[i] = map[string]int{}
		body := c
		if f.Slot {
			body = c[session.SlotLen(c):]
		}
		if len(body) > 0 {
			for _, l := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
				counts[i][l]++
			}
		}
		for l, k := range counts[i] {
			union[l] = max(union[l], k)
		}
	}
	for i := range copies {
		if want := maps.Equal(counts[i], union); x.Holds(i) != want {
			t.Fatalf("Holds(%d) = %v, want %v", i, x.Holds(i), want)
		}
	}
}

// The streamed merge writes Merge's bytes for generated histories of two
// and three machines, in both orders, with and without skewed clocks.
func TestStreamedMergeEqualsMerge(t *testing.T) {
	for _, n := range []int{2, 3} {
		for _, skew := range []bool{false, true} {
			for seed := range uint64(200) {
				r := rand.New(rand.NewPCG(seed, uint64(n)))
				h := genHistory(t, r, n, skew)
				checkStreamed(t, session.OMPFormat(), h.copies...)
				rev := make([][]byte, len(h.copies))
				for i, c := range h.copies {
					rev[len(rev)-1-i] = c
				}
				checkStreamed(t, session.OMPFormat(), rev...)
				// A format without title slots reads the slot as a line.
				checkStreamed(t, session.Format{Entry: session.ParseEntry}, h.copies...)
			}
		}
	}
}

// The corpus of real files, each against a copy of its first half that
// went on with other work, and a rewrite that pruned a line's bytes.
func TestStreamedMergeCorpus(t *testing.T) {
	files, _ := filepath.Glob("../testdata/corpus/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no corpus files")
	}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		half := bytes.LastIndexByte(data[:len(data)/2], '\n') + 1
		other := append(bytes.Clone(data[:half]), entryLine("bbbb0001", "", t0, "other machine")+"\n"...)
		checkStreamed(t, session.OMPFormat(), data, other)
		checkStreamed(t, session.OMPFormat(), other, data)
		checkStreamed(t, session.OMPFormat(), data, data[:half], other)
		pruned := bytes.Replace(data, []byte(`"text"`), []byte(`"TEXT"`), 1)
		checkStreamed(t, session.OMPFormat(), pruned, other, data)
	}
}

// Edge cases of line splitting, repeats, cycles and slots.
func TestStreamedMergeEdges(t *testing.T) {
	header := `{"type":"session","version":3,"id":"s","timestamp":"2026-10-07T00:45:40.000Z","cwd":"/w"}` + "\n"
	e1 := entryLine("aaaa0001", "", t0, "one") + "\n"
	e2 := entryLine("bbbb0001", "aaaa0001", t0.Add(time.Second), "b") + "\n"
	cases := [][][]byte{
		{[]byte("")},
		{[]byte(""), []byte("")},
		{[]byte("\n"), []byte("\n\n")},
		{[]byte("no newline"), []byte("no newline\nmore")},
		{[]byte(header + e1 + e1 + e1), []byte(header + e1 + e2 + e1)},
		{[]byte(entryLine("a", "b", t0, "") + "\n" + entryLine("b", "a", t0, "")), []byte("{}\n{\"id\":1}\n")},
		{[]byte(entryLine("a", "a", t0, "self") + "\n"), []byte(e2 + e1)},
		{append(makeSlot(t, "x", t0), header+e1...), append(makeSlot(t, "y", t0.Add(time.Hour)), header+e2...)},
		{makeSlot(t, "only a slot", t0), []byte(header)},
		{[]byte(entryLine("aaaa0001", "", t0, "pruned") + "\n"), []byte(e1), []byte(e1 + e1)},
		{[]byte(`{"id":"x","timestamp":"0000-01-01T00:00:00Z"}` + "\n"), []byte(`{"id":"y","timestamp":"9999-12-31T23:59:59.999999999Z"}` + "\n"), []byte(`{"id":"z","timestamp":"bad"}`)},
		{[]byte(strings.Repeat("x", 200<<10) + "\n" + e1), []byte(e1 + strings.Repeat("y", 100<<10))},
	}
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			checkStreamed(t, session.OMPFormat(), c...)
			checkStreamed(t, session.Format{Entry: session.ParseEntry}, c...)
		})
	}
	if _, err := session.OMPFormat().NewIndex(1 << 20); err == nil {
		t.Fatal("no copies: no error")
	}
}

// Past its budget the index stops with an IndexLimitError, a line too
// long for it too, and a copy that changes before it is written back is
// an error, not a merge of other bytes.
func TestIndexBounds(t *testing.T) {
	var b strings.Builder
	for i := range 1000 {
		b.WriteString(entryLine(fmt.Sprintf("%08x", i), fmt.Sprintf("%08x", i-1), t0.Add(time.Duration(i)*time.Second), "x") + "\n")
	}
	a := []byte(b.String())
	other := append(bytes.Clone(a), entryLine("ffff0001", "000003e7", t0.Add(time.Hour), "there")+"\n"...)
	mine := append(bytes.Clone(a), entryLine("eeee0001", "000003e7", t0.Add(time.Hour), "here")+"\n"...)
	var lim *session.IndexLimitError
	if _, err := session.OMPFormat().NewIndex(1500*session.LineCost, mergeref.ByteSources(mine, other)...); !errors.As(err, &lim) || lim.Lines <= 1001 || lim.Lines > 1501 || lim.Budget != 1500*session.LineCost {
		t.Fatalf("over the budget: %v", err)
	}
	if _, err := session.OMPFormat().NewIndex(2002*session.LineCost+1<<10, mergeref.ByteSources(mine, other)...); err != nil {
		t.Fatalf("within the budget: %v", err)
	}
	// A copy that holds every entry in other bytes (rewritten) costs
	// twice: the same budget no longer does.
	rewritten := bytes.ReplaceAll(other, []byte(`"text":"x"`), []byte(`"text":"y"`))
	if _, err := session.OMPFormat().NewIndex(2002*session.LineCost+1<<10, mergeref.ByteSources(mine, rewritten)...); !errors.As(err, &lim) {
		t.Fatalf("rewritten entries within the budget of as many lines: %v", err)
	}
	if _, err := session.OMPFormat().NewIndex(3002*session.LineCost+1<<10, mergeref.ByteSources(mine, rewritten)...); err != nil {
		t.Fatalf("rewritten entries within twice the budget: %v", err)
	}
	long := []byte(strings.Repeat("z", 1<<20) + "\n")
	if _, err := session.OMPFormat().NewIndex(1<<20, mergeref.ByteSources(long)...); !errors.As(err, &lim) {
		t.Fatalf("a line longer than the budget: %v", err)
	}

	changing := bytes.Clone(other)
	x, err := session.OMPFormat().NewIndex(1<<30, mergeref.ByteSources(mine, changing)...)
	if err != nil {
		t.Fatal(err)
	}
	copy(changing[len(changing)-20:], "CHANGED")
	if _, err := x.WriteTo(&bytes.Buffer{}); !errors.Is(err, session.ErrSourceChanged) {
		t.Fatalf("a copy changed under the merge: %v", err)
	}
	short := mergeref.ByteSources(mine, other)
	short[1].Size += 10
	if _, err := session.OMPFormat().NewIndex(1<<30, short...); !errors.Is(err, session.ErrSourceChanged) {
		t.Fatalf("a copy shorter than its size: %v", err)
	}
}

// TestIndexLineCost: what an index holds at its largest (the end of the
// last copy's reading, its id map still there), measured after a
// collection, is within LineCost a line read, for copies of lines of
// many sizes that share half of them, as a diverged pair does.
func TestIndexLineCost(t *testing.T) {
	lines := 200_000
	if race.Enabled {
		lines = 50_000 // the cost a line is the same; the detector makes each slow
	}
	var b bytes.Buffer
	for i := range lines {
		b.WriteString(entryLine(fmt.Sprintf("%08x", i), fmt.Sprintf("%08x", i-1), t0.Add(time.Duration(i)*time.Millisecond), strings.Repeat("w", i%300)) + "\n")
	}
	a := b.Bytes()
	half := bytes.LastIndexByte(a[:len(a)/2], '\n') + 1
	other := append(bytes.Clone(a[:half]), entryLine("ffff0001", "", t0.Add(time.Hour), "there")+"\n"...)
	read := int64(lines + bytes.Count(other, []byte("\n")))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var peak int64
	x, err := session.OMPFormat().NewIndexHooked(1<<40, func() {
		runtime.GC()
		runtime.ReadMemStats(&after)
		peak = max(peak, int64(after.HeapAlloc)-int64(before.HeapAlloc))
	}, mergeref.ByteSources(a, other)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d lines read: at most %d bytes held, %d a line", read, peak, peak/read)
	if peak/read > session.LineCost {
		t.Errorf("the index holds %d bytes a line, more than session.LineCost (%d)", peak/read, session.LineCost)
	}
	runtime.KeepAlive(x)
}

// Copies drawn from a small pool of lines (entries of few ids, each in
// several versions of its bytes, as rewrites make them, odd lines, blank
// lines), repeated and in any order: the streamed merge writes Merge's
// bytes, whatever the copies disagree on.
func TestStreamedMergeDisputes(t *testing.T) {
	var pool []string
	for id := range 3 {
		for v := range 3 {
			parent := ""
			if id > 0 {
				parent = fmt.Sprintf("%08x", id-1)
			}
			pool = append(pool, entryLine(fmt.Sprintf("%08x", id), parent, t0.Add(time.Duration(id)*time.Second), fmt.Sprintf("version %d", v)))
		}
	}
	pool = append(pool, "not json", "", `{"id":"","type":"x"}`)
	for seed := range uint64(3000) {
		r := rand.New(rand.NewPCG(seed, 7))
		copies := make([][]byte, 1+r.IntN(4))
		for i := range copies {
			var b strings.Builder
			for range r.IntN(8) {
				b.WriteString(pool[r.IntN(len(pool))])
				b.WriteByte('\n')
			}
			copies[i] = []byte(b.String())
		}
		checkStreamed(t, session.OMPFormat(), copies...)
	}
}

// BenchmarkMergeStreamed is BenchmarkMerge through an Index, the copies
// read through bytes.Readers, to compare the streamed merge's speed with
// the in-memory one's (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench 'Merge$|MergeStreamed' -benchmem ./session/
func BenchmarkMergeStreamed(b *testing.B) {
	data, err := os.ReadFile("../testdata/corpus/pi-v1-before-compaction-branchedFrom_pi-mono-fixture.jsonl")
	if err != nil {
		b.Skip(err)
	}
	half := bytes.LastIndexByte(data[:len(data)/2], '\n') + 1
	other := append(bytes.Clone(data[:half]), entryLine("bbbb0001", "", t0, "other machine")+"\n"...)
	b.SetBytes(int64(len(data) + len(other)))
	for b.Loop() {
		if _, err := mergeref.MergeTo(session.OMPFormat(), io.Discard, 1<<30, mergeref.ByteSources(data, other)...); err != nil {
			b.Fatal(err)
		}
	}
}
