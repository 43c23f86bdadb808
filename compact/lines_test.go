package compact

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// The comparison's local bounds: a line longer than the line buffer is
// known by its bytes, in pieces or whole alike; a current generation with
// more lines than the key bound, or larger than the size bound, is not
// compared, and prune keeps the older one saying why.
func TestCompareBounds(t *testing.T) {
	ctx := context.Background()
	r := fileRepo(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	gen := func(age time.Duration) string { return repo.NewGeneration(now.Add(-age).UnixNano()) }
	long := strings.Repeat("tool output ", 200) // 2400 bytes
	contents := []string{"a", long, "c"}
	pruned := []string{"a", long[:2000], "c"} // omp pruned the long output: same id
	s := session("long", "laptop")
	upload := func(g string, b []byte) *writer {
		w := newWriter(r, s, g, 256)
		if err := w.append(ctx, b); err != nil {
			t.Fatal(err)
		}
		return w
	}
	old := upload(gen(100*day), ompFile("t", 1, contents))
	cur := upload(gen(50*day), ompFile("t", 1, pruned))
	putCatalog(t, r, "laptop", entry("long", cur.gen, repo.StatePresent, now.Add(-50*day)))
	rgen := func(w *writer) *repo.Generation {
		return &repo.Generation{Name: w.gen, HasMeta: true, Chunks: []repo.ChunkRef{{Start: 0, End: int64(len(w.data))}}}
	}

	for _, c := range []struct {
		line int
		want int // the first line cur lacks
	}{{1 << 20, 0}, {1000, 3}} {
		b := defaultBounds()
		b.line = c.line
		set, err := readLineSet(ctx, r, s, rgen(cur), store.OMP(), b, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := firstLacking(ctx, r, s, rgen(old), store.OMP(), set, b); err != nil || n != c.want {
			t.Errorf("line buffer %d: first line lacking %d, %v; want %d", c.line, n, err, c.want)
		}
	}

	// A long line in pieces has the key it has whole.
	var whole, pieces []lineKey
	for _, into := range []*[]lineKey{&whole, &pieces} {
		sp := &lineSplitter{lines: store.OMP(), max: 1000, each: func(k lineKey, _ int) error { *into = append(*into, k); return nil }}
		data := ompFile("t", 1, contents)
		if into == &whole {
			sp.Write(data)
		} else {
			for len(data) > 0 {
				n := min(7, len(data))
				sp.Write(data[:n])
				data = data[n:]
			}
		}
		if err := sp.flush(); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(whole) != fmt.Sprint(pieces) || len(whole) != 3 {
		t.Fatalf("keys whole %x, in 7-byte pieces %x; want the same 3", whole, pieces)
	}

	ret := Retention{Generations: 30 * day}
	for _, c := range []struct {
		b    bounds
		want string
	}{
		{bounds{size: 1 << 30, lines: 2, line: 1 << 20}, "more than 2 lines to compare"},
		{bounds{size: 1000, lines: 100, line: 1 << 20}, "more than the 1000"},
	} {
		rep, err := prune(ctx, r, store.OMP(), "laptop", ret, now, true, c.b)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Items) != 0 || len(rep.Kept) != 1 || rep.Kept[0].Generation != old.gen ||
			!strings.HasPrefix(rep.Kept[0].Why, "cannot compare with the current generation "+cur.gen) || !strings.Contains(rep.Kept[0].Why, c.want) {
			t.Errorf("bounds %+v: %+v; want %s kept: %s", c.b, rep, old.gen, c.want)
		}
	}
	// Within the default bounds the rewrite goes.
	if rep, err := Prune(ctx, r, store.OMP(), "laptop", ret, now, true); err != nil || len(rep.Items) != 1 || rep.Items[0].Generation != old.gen {
		t.Fatalf("default bounds: %+v, %v", rep, err)
	}
}
