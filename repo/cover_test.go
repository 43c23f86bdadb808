package repo

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// coverByDefinition is the rule of docs/FORMAT.md read literally: from
// offset 0, take at each point the chunk that reaches furthest.
func coverByDefinition(chunks []ChunkRef) (picked []ChunkRef, covered int64) {
	for {
		best := -1
		for i, c := range chunks {
			if c.Start <= covered && c.End > covered && (best < 0 || c.End > chunks[best].End) {
				best = i
			}
		}
		if best < 0 {
			return picked, covered
		}
		picked = append(picked, chunks[best])
		covered = chunks[best].End
	}
}

// Cover picks what the rule picks (the same ends, so the same bytes are
// read and the same gap is found), whatever the order, overlaps and gaps.
func TestCoverIsTheRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 2000 {
		var chunks []ChunkRef
		for range rng.IntN(40) {
			s := rng.Int64N(200)
			chunks = append(chunks, ChunkRef{Start: s, End: s + 1 + rng.Int64N(30)})
		}
		if n%2 == 0 {
			slices.SortFunc(chunks, func(a, b ChunkRef) int {
				if a.Start != b.Start {
					return int(a.Start - b.Start)
				}
				return int(a.End - b.End)
			})
		}
		in := slices.Clone(chunks)
		got, gotCovered := Cover(chunks)
		want, wantCovered := coverByDefinition(chunks)
		if gotCovered != wantCovered || len(got) != len(want) {
			t.Fatalf("%v: covered %d with %d chunks, want %d with %d", chunks, gotCovered, len(got), wantCovered, len(want))
		}
		for i := range got {
			if got[i].Start > want[i].End || got[i].End != want[i].End {
				t.Fatalf("%v: pick %d is %v, want one ending at %d", chunks, i, got[i], want[i].End)
			}
		}
		if !slices.Equal(in, chunks) {
			t.Fatalf("Cover reordered its argument")
		}
	}
}

// benchChunks is a generation of n chunks as an uncompacted busy session
// leaves it (one entry each), plus a compacted chunk over its first half.
func benchChunks(n int) []ChunkRef {
	chunks := make([]ChunkRef, 0, n+1)
	for i := range int64(n) {
		chunks = append(chunks, ChunkRef{Start: i * 1000, End: (i + 1) * 1000})
	}
	chunks = append(chunks, ChunkRef{Start: 0, End: int64(n/2) * 1000})
	slices.SortFunc(chunks, func(a, b ChunkRef) int {
		if a.Start != b.Start {
			return int(a.Start - b.Start)
		}
		return int(a.End - b.End)
	})
	return chunks
}

func benchmarkCover(b *testing.B, n int) {
	chunks := benchChunks(n)
	for b.Loop() {
		if _, covered := Cover(chunks); covered != int64(n)*1000 {
			b.Fatal(covered)
		}
	}
}

// go test -run '^$' -bench Cover ./repo/ (docs/BENCHMARKS.md)
func BenchmarkCover14400(b *testing.B) { benchmarkCover(b, 14400) }
func BenchmarkCover50000(b *testing.B) { benchmarkCover(b, 50000) }
