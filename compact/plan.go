package compact

import (
	"fmt"
	"sort"

	"github.com/ompsync/ompsync/repo"
)

// Span is a byte range of a generation and how many listed chunks lie
// inside it.
type Span struct {
	Start, End int64
	Chunks     int
}

// Plan is what compaction will do to one generation: merge the chunks of
// one span into one chunk, and remove chunks that lie inside another one.
type Plan struct {
	Chunks int  // chunk objects listed
	Merge  Span // Merge.Chunks == 0: nothing to merge
	// Redundant counts chunks outside Merge that lie inside another chunk
	// (left by a crash or an upload retried); they are removed.
	Redundant int
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return p.Merge.Chunks == 0 && p.Redundant == 0 }

// planned is a Plan with what carrying it out needs.
type planned struct {
	Plan
	picked   []repo.ChunkRef // the chunks a reader takes (repo.Cover)
	from, to int             // picked[from:to] are merged
	// inside maps a picked chunk (index) to the redundant chunks inside it.
	inside map[int][]repo.ChunkRef
}

// plan decides what to do with a generation's chunks. A generation with a
// gap is left alone: compaction never makes a broken stream look whole.
func plan(chunks []repo.ChunkRef, idle bool, p Policy) (*planned, error) {
	picked, covered := repo.Cover(chunks)
	if covered < repo.MaxEnd(chunks) {
		return nil, fmt.Errorf("%w at byte %d", repo.ErrGap, covered)
	}
	pl := &planned{Plan: Plan{Chunks: len(chunks)}, picked: picked, inside: map[int][]repo.ChunkRef{}}
	// Plan within the stretches between chunks that look like references
	// (execution finds the others), the newest stretch first.
	end := len(picked)
	for i := len(picked) - 1; i >= -1 && pl.to-pl.from < 2; i-- {
		if i >= 0 && !likelyRef(picked[i]) {
			continue
		}
		from, to := mergeRange(picked[i+1:end], idle, p)
		pl.from, pl.to = i+1+from, i+1+to
		end = i
	}
	if pl.to-pl.from >= 2 {
		pl.Merge = Span{Start: picked[pl.from].Start, End: picked[pl.to-1].End}
	}
	for _, c := range chunks {
		if pl.Merge.End > 0 && pl.Merge.Start <= c.Start && c.End <= pl.Merge.End {
			pl.Merge.Chunks++
			continue
		}
		// Picked chunks start and end further along one after another,
		// so the first that could hold c is the first ending at or past
		// its end: found by bisection, not a scan per chunk. A picked
		// chunk finds itself.
		if i := sort.Search(len(picked), func(i int) bool { return picked[i].End >= c.End }); i < len(picked) && picked[i].Start <= c.Start && picked[i] != c {
			pl.inside[i] = append(pl.inside[i], c)
			pl.Redundant++
		}
	}
	return pl, nil
}

// likelyRef reports a chunk whose stored object is far too small for its
// range to hold its bytes: a reference chunk, almost surely (it stores a
// header of a few hundred bytes, encrypted under 1 KiB). Planning does not
// merge across one, so that a generation with references is not read again
// at every run only to find nothing to merge. Session data rarely
// compresses past 64 to 1 (runs of near-identical short lines come close,
// and the omp dictionary helps them), and a wrong guess only keeps a few
// chunks apart; execution finds the references planning missed.
func likelyRef(c repo.ChunkRef) bool {
	return c.Size <= 1<<10 && c.End-c.Start >= 64*c.Size
}

// idleRatio is the level ratio of an idle stream; a busy one's is
// 1/MaxChunks (see mergeRange).
const idleRatio = 1.0

// mergeRange picks the chunks to merge, picked[from:to], by one rule with
// two ratios. Each chunk, oldest first, must hold at least ratio times the
// bytes of all chunks after it; the first chunk that does not is merged
// with everything after it. Chunk sizes thus fall geometrically from the
// start of the stream to its end, so the number of chunks is logarithmic in
// the stream's size and every byte is rewritten once per level it climbs.
//
// A busy stream uses the ratio 1/MaxChunks (levels MaxChunks+1 times
// apart) and merges only once more than MaxChunks chunks trail: the agent's
// small chunks become one chunk per MaxChunks uploads, and MaxChunks of
// those merge into one of the next level, and so on. An idle stream uses
// idleRatio (1: each chunk at least as large as all after it), which leaves
// a finished session in one or a few chunks.
//
// No merge makes a chunk larger than MaxChunkBytes. A chunk of at least
// half that is full: the rule applies only to the chunks after the last
// full one, and a merge that would pass the bound takes as many chunks as
// fit, which makes a full chunk.
func mergeRange(picked []repo.ChunkRef, idle bool, p Policy) (from, to int) {
	n := len(picked)
	// fresh[i] is what picked[i] adds past the chunk before it (picked
	// chunks may overlap); suffix[i] the bytes from picked[i] on.
	fresh := make([]int64, n)
	var prev int64
	first := 0
	for i, c := range picked {
		fresh[i] = c.End - max(prev, c.Start)
		prev = c.End
		if fresh[i] >= p.MaxChunkBytes/2 {
			first = i + 1
		}
	}
	suffix := make([]int64, n+1)
	for i := n - 1; i >= first; i-- {
		suffix[i] = suffix[i+1] + fresh[i]
	}
	ratio := 1 / float64(p.MaxChunks)
	if idle {
		ratio = idleRatio
	}
	j := -1
	for i := first; i < n-1; i++ {
		if float64(fresh[i]) <= ratio*float64(suffix[i+1]) {
			j = i
			break
		}
	}
	if j < 0 || !idle && n-j <= p.MaxChunks {
		return 0, 0
	}
	k := j + 1
	for k < n && picked[k].End-picked[j].Start <= p.MaxChunkBytes {
		k++
	}
	if k-j < 2 {
		return 0, 0
	}
	return j, k
}
