package repo_test

import (
	"bytes"
	"context"
	"math"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/hostile"
	"github.com/ompsync/ompsync/repo"
)

// StreamGeneration, which every reader of the product streams with,
// accepts exactly what the in-memory reference reader accepts, in both of
// its modes, and gives the same bytes, on every generation of a generated
// hostile remote.
func FuzzStreamGeneration(f *testing.F) {
	for _, seed := range [][]byte{
		nil,
		{0, 1, 0},
		{0, 1, 1, 3, 1, 7, 1, 7, 6, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 30},
		{0, 1, 2, 4, 1, 6, 1, 4, 2, 5, 0},
		{0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1},
		{0, 1, 0, 2},
		{0, 1, 0, 3},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		ctx := context.Background()
		c, err := hostile.NewFastRemote(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		h, _ := hostile.Fuzzed(input)
		if err := h.Build(ctx, c); err != nil {
			t.Fatal(err)
		}
		r := repo.New(c, repo.NewZstd())
		invs, err := r.Inventory(ctx, hostile.BadID, "")
		if err != nil {
			return // the listing is refused before any generation is read
		}
		for _, inv := range invs {
			for _, g := range inv.Generations {
				for _, every := range []bool{false, true} {
					as, rerr := r.ReadGenerationRef(ctx, inv.Stream, g, 1<<30, every)
					var buf bytes.Buffer
					st, serr := r.StreamGeneration(ctx, inv.Stream, g, 1<<30, &buf, every)
					if (rerr == nil) != (serr == nil) {
						t.Fatalf("%s every=%v: read: %v; stream: %v", g.Name, every, rerr, serr)
					}
					if rerr != nil {
						continue
					}
					got := buf.Bytes()
					copy(got, st.Head)
					if !bytes.Equal(got, as.Data) || st.Size != int64(len(as.Data)) {
						t.Fatalf("%s every=%v: streamed %d bytes, read %d, not the same", g.Name, every, st.Size, len(as.Data))
					}
					if !every {
						streamAtMarks(t, r, inv.Stream, g, as)
					}
				}
			}
		}
	})
}

// streamAtMarks checks StreamGenerationAt against a whole read of the same
// generation at every time its marks name (and a moment before each):
// the bytes UploadedBy counts, a cut inside the title slot refused.
func streamAtMarks(t *testing.T, r *repo.Repo, s repo.Stream, g *repo.Generation, as *repo.RefAssembled) {
	t.Helper()
	ctx := context.Background()
	for _, m := range as.Marks {
		for _, at := range []time.Time{m.Time(), m.Time().Add(-time.Millisecond)} {
			if at.UnixMilli() <= 0 || m.At == math.MaxInt64 {
				continue
			}
			n, when := repo.UploadedBy(as.Marks, at)
			var buf bytes.Buffer
			st, err := r.StreamGenerationAt(ctx, s, g, 1<<30, &buf, at)
			if 0 < n && n < as.Meta.HashFrom {
				if err == nil {
					t.Fatalf("%s at %v: %d bytes, inside the title slot, streamed", g.Name, at, n)
				}
				continue
			}
			got := buf.Bytes()
			copy(got, st.Head)
			if err != nil || !bytes.Equal(got, as.Data[:n]) || !st.Uploaded.Equal(when) {
				t.Fatalf("%s at %v: streamed %d bytes uploaded %v (%v), read %d uploaded %v", g.Name, at, st.Size, st.Uploaded, err, n, when)
			}
		}
	}
}
