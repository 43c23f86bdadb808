package compact

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/race"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

func session(id, machine string) repo.Stream {
	return repo.Stream{SessionID: id, Machine: machine, Name: repo.SessionStream}
}

// A busy stream merges its small chunks once there are more than MaxChunks
// of them; an idle one ends in one chunk; every byte reads back all along.
func TestCompactBusyThenIdle(t *testing.T) {
	eachRepo(t, func(t *testing.T, r *repo.Repo) {
		ctx := context.Background()
		w := newWriter(r, session("s1", "laptop"), "0000000000000001", 256)
		p := Policy{MaxChunks: 8}
		n := 0
		line := func() []byte { n++; return fmt.Appendf(nil, "{\"type\":\"message\",\"n\":%06d}\n", n) }
		for range 8 {
			if err := w.append(ctx, line()); err != nil {
				t.Fatal(err)
			}
		}
		res, err := Stream(ctx, r, w.s, w.gen, false, p)
		if err != nil || res.Written != 0 || res.After != 8 {
			t.Fatalf("8 chunks, MaxChunks 8: %+v, %v; want nothing done", res, err)
		}
		if err := w.append(ctx, line()); err != nil {
			t.Fatal(err)
		}
		res, err = Stream(ctx, r, w.s, w.gen, false, p)
		if err != nil || res.Written != 1 || res.Merged != 9 || res.Deleted != 9 || res.After != 1 {
			t.Fatalf("9 chunks: %+v, %v; want them merged into one", res, err)
		}
		checkStream(t, r, w, "after busy compaction")
		for range 8 {
			if err := w.append(ctx, line()); err != nil {
				t.Fatal(err)
			}
		}
		// Busy, the merged chunk and eight small ones stay.
		if res, err := Stream(ctx, r, w.s, w.gen, false, p); err != nil || res.After != 9 {
			t.Fatalf("busy with 9 chunks: %+v, %v", res, err)
		}
		if err := w.append(ctx, line()); err != nil {
			t.Fatal(err)
		}
		// Idle, the nine small ones hold no fewer bytes than the chunk
		// before them: all merge into one.
		res, err = Stream(ctx, r, w.s, w.gen, true, p)
		if err != nil || res.After != 1 || res.Written != 1 || res.Rewritten != int64(len(w.data)) {
			t.Fatalf("idle: %+v, %v; want one chunk of %d bytes", res, err, len(w.data))
		}
		checkStream(t, r, w, "after idle compaction")
		if got := chunksOf(t, r, w.s, w.gen); len(got) != 1 || got[0].Start != 0 || got[0].End != int64(len(w.data)) {
			t.Fatalf("chunks after idle compaction: %v", got)
		}
		// Nothing more to do: one LIST, no change.
		if res, err := Stream(ctx, r, w.s, w.gen, true, p); err != nil || res.Written+res.Deleted != 0 {
			t.Fatalf("second idle run: %+v, %v", res, err)
		}
	})
}

// A SIGKILL at any point of a compaction (simulated by a client that stops
// after n operations, with or without the n-th operation's answer lost)
// leaves the stream reading every byte, and the next run finishes the job.
func TestCrashAtEveryStep(t *testing.T) {
	eachRepo(t, func(t *testing.T, r *repo.Repo) {
		ctx := context.Background()
		build := func(id string, r *repo.Repo) *writer {
			rng := rand.New(rand.NewPCG(3, 4)) // the same chunks every time
			w := newWriter(r, session(id, "laptop"), "0000000000000007", 0)
			for i := range 10 {
				if err := w.append(ctx, lines(rng, 1+i%3)); err != nil {
					t.Fatal(err)
				}
				if i == 4 {
					// a range uploaded again after a crash: two chunks lie inside it
					if err := w.reupload(ctx, int64(len(w.data))-1-int64(rng.IntN(200))); err != nil {
						t.Fatal(err)
					}
				}
			}
			return w
		}
		// How many operations does a whole compaction take?
		cnt := &counter{Client: r.Client()}
		w := build("count", repo.New(cnt, repo.NewZstd()))
		cnt.reset()
		if _, err := Stream(ctx, w.r, w.s, w.gen, true, Policy{}); err != nil {
			t.Fatal(err)
		}
		ops := cnt.puts + cnt.gets + cnt.lists + cnt.dels + cnt.stats
		if ops < 20 {
			t.Fatalf("a compaction of 11 chunks took %d operations; the test would prove little", ops)
		}
		// The folder remote crashes at every point; each S3 remote, a
		// network round trip per operation, at every other point, or under
		// the race detector at every fourth: the four S3 remotes start at
		// different points, so together they still cover them all.
		step, first := 1, 0
		if !strings.HasSuffix(t.Name(), "/file") {
			step = 2
			if race.Enabled {
				step = 4
			}
			first = networkIndex(t) % step
		}
		for n := first; n < ops; n += step {
			lostAck := (n/step)%2 == 1
			id := fmt.Sprintf("crash%03d", n)
			w := build(id, r)
			stop := newStopClient(r.Client(), n, lostAck)
			_, err := Stream(ctx, repo.New(stop, repo.NewZstd()), w.s, w.gen, true, Policy{})
			if err == nil {
				t.Fatalf("stopped after %d of %d operations, yet no error", n, ops)
			}
			when := fmt.Sprintf("killed after %d operations (lost ack %v)", n, lostAck)
			checkStream(t, r, w, when)
			res, err := Stream(ctx, r, w.s, w.gen, true, Policy{})
			if err != nil {
				t.Fatalf("%s, the next run: %v", when, err)
			}
			checkStream(t, r, w, when+", then compacted again")
			if got := chunksOf(t, r, w.s, w.gen); len(got) != 1 {
				t.Fatalf("%s, the next run left %d chunks (%+v): %v", when, len(got), res, got)
			}
		}
	})
}

// Random appends, retried uploads, new generations, reference chunks,
// compactions and compactions killed at random points: after every step
// every generation of every stream reads back byte for byte.
func TestRandomSequences(t *testing.T) {
	eachRepo(t, func(t *testing.T, r *repo.Repo) {
		steps, seeds, first := 80, 3, 0
		if !strings.HasSuffix(t.Name(), "/file") {
			steps, seeds = 40, 2          // a network round trip per operation
			first = 3 + 2*networkIndex(t) // each remote its own sequences
		}
		if race.Enabled {
			seeds-- // the logic, not the concurrency, is under test here
		}
		for seed := range uint64(seeds) {
			seed += uint64(first)
			t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { randomSequence(t, r, seed, steps) })
		}
	})
}

func randomSequence(t *testing.T, r *repo.Repo, seed uint64, steps int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 99))
	id := fmt.Sprintf("rnd%d", seed)
	// desk holds a copy laptop's session pulled bytes from.
	desk := newWriter(r, session(id, "desk"), "00000000000000d1", 256)
	for range 6 {
		if err := desk.append(ctx, lines(rng, 3)); err != nil {
			t.Fatal(err)
		}
	}
	streams := []repo.Stream{session(id, "laptop"), {SessionID: id, Machine: "laptop", Name: repo.ArtifactStream("subagents/0-Explore.jsonl")}}
	var all []*writer // every generation written, checked after each step
	cur := map[repo.Stream]*writer{}
	gen := 0x100
	newGen := func(s repo.Stream) *writer {
		gen++
		w := newWriter(r, s, fmt.Sprintf("%016x", gen), int64(256*(gen%2)))
		cur[s] = w
		all = append(all, w)
		return w
	}
	for _, s := range streams {
		newGen(s)
	}
	// The session stream starts with desk's bytes: its own first chunk,
	// then a reference to desk's copy.
	lw := cur[streams[0]]
	lw.hashFrom = desk.hashFrom
	if err := lw.append(ctx, desk.data[:300]); err != nil {
		t.Fatal(err)
	}
	if err := lw.appendRef(ctx, desk.data[300:], desk); err != nil {
		t.Fatal(err)
	}
	policy := func() Policy {
		p := Policy{MaxChunks: 1 + rng.IntN(6)}
		if rng.IntN(3) == 0 {
			p.MaxChunkBytes = 1000 + rng.Int64N(4000) // merges cut short by the bound
		}
		return p
	}
	refHeld := false
	for step := range steps {
		s := streams[rng.IntN(len(streams))]
		w := cur[s]
		var what string
		switch k := rng.IntN(100); {
		case k < 45:
			what = "append"
			for range 1 + rng.IntN(3) {
				if err := w.append(ctx, lines(rng, 1+rng.IntN(3))); err != nil {
					t.Fatal(err)
				}
			}
		case k < 52:
			what = "upload again"
			if len(w.data) > 0 {
				from := rng.Int64N(int64(len(w.data)))
				if err := w.reupload(ctx, from); err != nil {
					t.Fatal(err)
				}
				// Its own bytes now hold the referenced range: the
				// reference is redundant, and compaction may drop it.
				refHeld = refHeld || w == lw && from <= 300
			}
		case k < 57:
			what = "new generation"
			old := w
			w = newGen(s)
			keep := old.data[:rng.IntN(len(old.data)+1)]
			if err := w.append(ctx, append(append([]byte{}, keep...), lines(rng, 2)...)); err != nil {
				t.Fatal(err)
			}
		case k < 70:
			what = "compact busy"
			if _, err := Stream(ctx, r, s, w.gen, false, policy()); err != nil {
				t.Fatalf("step %d: %s: %v", step, what, err)
			}
		case k < 82:
			what = "compact idle"
			p := policy()
			if _, err := Stream(ctx, r, s, w.gen, true, p); err != nil {
				t.Fatalf("step %d: %s: %v", step, what, err)
			}
			if s != streams[0] {
				// No reference chunks here: what is left obeys the rule.
				checkLevels(t, chunksOf(t, r, s, w.gen), p.withDefaults(), fmt.Sprintf("step %d", step))
			}
		default:
			n := rng.IntN(40)
			what = fmt.Sprintf("compaction killed after %d operations", n)
			stop := newStopClient(r.Client(), n, rng.IntN(2) == 0)
			_, _ = Stream(ctx, repo.New(stop, repo.NewZstd()), s, w.gen, rng.IntN(2) == 0, policy())
		}
		for _, w := range all {
			if len(w.data) > 0 {
				checkStream(t, r, w, fmt.Sprintf("step %d (%s)", step, what))
			}
		}
	}
	// Reference chunks stay: laptop still points at desk, unless its own
	// bytes came to hold that range.
	if h, _, err := r.GetChunk(ctx, lw.s, lw.gen, 300, int64(len(desk.data))); !refHeld && (err != nil || h.Ref == nil || h.Ref.Machine != "desk") {
		t.Fatalf("the reference chunk: %+v, %v", h.Ref, err)
	}
	// desk's objects were never touched.
	if got := chunksOf(t, r, desk.s, desk.gen); len(got) != 6 {
		t.Fatalf("desk's chunks: %v", got)
	}
}

// checkLevels fails unless no chunk lies inside another and, after the
// last full chunk, each chunk holds at least idleRatio times the bytes after
// it, or could not be merged with the next within MaxChunkBytes.
func checkLevels(t *testing.T, chunks []repo.ChunkRef, p Policy, when string) {
	t.Helper()
	if in, out, ok := nested(chunks); ok {
		t.Fatalf("%s: chunk %v left inside %v", when, in, out)
	}
	picked, _ := repo.Cover(chunks)
	fresh := make([]int64, len(picked))
	var prev int64
	first := 0
	for i, c := range picked {
		fresh[i] = c.End - max(prev, c.Start)
		prev = c.End
		if fresh[i] >= p.MaxChunkBytes/2 {
			first = i + 1
		}
	}
	for i := first; i+1 < len(picked); i++ {
		var after int64
		for _, f := range fresh[i+1:] {
			after += f
		}
		if float64(fresh[i]) < idleRatio*float64(after) && picked[i+1].End-picked[i].Start <= p.MaxChunkBytes {
			t.Fatalf("%s: chunk %d of %d adds %d bytes, %d follow: %v", when, i, len(picked), fresh[i], after, picked)
		}
	}
}

// Reference chunks stay as they are; the runs of data chunks on either
// side are merged, and the stream reads through the reference.
func TestReferenceChunksStay(t *testing.T) {
	ctx := context.Background()
	r := fileRepo(t)
	if err := r.Init(ctx); err != nil { // a marker, as every writer's remote has
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	desk := newWriter(r, session("ref", "desk"), "00000000000000d1", 0)
	for range 40 {
		if err := desk.append(ctx, lines(rng, 2)); err != nil {
			t.Fatal(err)
		}
	}
	w := newWriter(r, session("ref", "laptop"), "00000000000000a1", 0)
	for _, cut := range []int{100, 200, 300} {
		if err := w.append(ctx, desk.data[len(w.data):cut]); err != nil {
			t.Fatal(err)
		}
	}
	refEnd := int64(len(desk.data) - 50)
	if err := w.appendRef(ctx, desk.data[300:refEnd], desk); err != nil {
		t.Fatal(err)
	}
	if err := w.append(ctx, desk.data[refEnd:]); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := w.append(ctx, lines(rng, 1)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Stream(ctx, r, w.s, w.gen, true, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, r, w, "after compaction")
	want := []repo.ChunkRef{{Start: 0, End: 300}, {Start: 300, End: refEnd}, {Start: refEnd, End: int64(len(w.data))}}
	got := chunksOf(t, r, w.s, w.gen)
	for i := range got {
		got[i].Size, got[i].ModTime = 0, time.Time{} // compared by range
	}
	if !slices.Equal(got, want) {
		t.Fatalf("chunks %v, want %v (%+v)", got, want, res)
	}
	if h, _, err := r.GetChunk(ctx, w.s, w.gen, 300, refEnd); err != nil || h.Ref == nil {
		t.Fatalf("reference chunk: %+v, %v", h, err)
	}
	// The next run sees there is nothing to merge without reading a chunk.
	cnt := &counter{Client: r.Client()}
	cr := repo.New(cnt, repo.NewZstd())
	if _, err := cr.ReadMarker(ctx); err != nil { // as every command does first
		t.Fatal(err)
	}
	cnt.reset()
	if res, err := Stream(ctx, cr, w.s, w.gen, true, Policy{}); err != nil || res.Written != 0 || cnt.gets != 0 || cnt.lists != 1 {
		t.Fatalf("second run: %+v, %v; %d GETs, %d LISTs", res, err, cnt.gets, cnt.lists)
	}
}

// A format-2 generation whose meta is in its first chunk alone, compacted
// into one chunk: the merged chunk at 0 carries the meta on, no meta
// object appears, and the generation stays complete with the same bytes.
func TestCompactFormat2(t *testing.T) {
	ctx := context.Background()
	r := fileRepo(t)
	if err := r.Init(ctx); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	w := newWriter(r, session("f2", "laptop"), "00000000000000f2", 0)
	w.inChunk = true
	for range 30 {
		if err := w.append(ctx, lines(rng, 2)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Stream(ctx, r, w.s, w.gen, true, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, r, w, "after compaction")
	if got := chunksOf(t, r, w.s, w.gen); len(got) != 1 || got[0].Start != 0 || got[0].End != int64(len(w.data)) || res.Deleted != 30 {
		t.Fatalf("chunks %v after %+v, want one of [0, %d)", got, res, len(w.data))
	}
	if _, err := r.Client().Stat(ctx, w.s.MetaKey(w.gen)); !errors.Is(err, remote.ErrNotFound) {
		t.Fatalf("a meta object: %v", err)
	}
	invs, err := r.Inventory(ctx, w.s.SessionID, w.s.Machine)
	if err != nil {
		t.Fatal(err)
	}
	g := invs[0].Newest()
	if g == nil || g.Name != w.gen || !g.MetaInChunk {
		t.Fatalf("newest generation %+v, want %s complete by its first chunk", g, w.gen)
	}
	m, err := r.GenerationMeta(ctx, w.s, g)
	if err != nil || m.Path != w.metaOf().Path || m.Generation != w.gen {
		t.Fatalf("meta after compaction: %+v, %v", m, err)
	}
}

// A chunk inside another is removed only when it holds the same bytes; one
// that disagrees is kept and reported.
func TestRedundantChunks(t *testing.T) {
	ctx := context.Background()
	r := fileRepo(t)
	rng := rand.New(rand.NewPCG(7, 8))
	w := newWriter(r, session("red", "laptop"), "0000000000000001", 0)
	for range 3 {
		if err := w.append(ctx, lines(rng, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.reupload(ctx, 0); err != nil { // [0, end) over the three
		t.Fatal(err)
	}
	res, err := Stream(ctx, r, w.s, w.gen, false, Policy{})
	if err != nil || res.Deleted != 3 || res.Written != 0 || res.After != 1 {
		t.Fatalf("busy run: %+v, %v; want the three chunks inside the re-upload deleted", res, err)
	}
	checkStream(t, r, w, "after cleanup")

	// A chunk inside with other bytes (damage): kept, and said so.
	end := int64(len(w.data))
	bad := append([]byte{}, w.data[10:20]...)
	bad[0] ^= 1
	if _, err := r.PutChunk(ctx, w.s, w.gen, repo.ChunkHeader{Start: 10, End: 20, SHA256: repo.HashHex(bad)}, bad, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = Stream(ctx, r, w.s, w.gen, true, Policy{})
	if err == nil || !strings.Contains(err.Error(), "other bytes") {
		t.Fatalf("disagreeing chunk: %v", err)
	}
	if got := chunksOf(t, r, w.s, w.gen); len(got) != 2 {
		t.Fatalf("chunks %v, want [0,%d) and the damaged [10,20) kept", got, end)
	}
	checkStream(t, r, w, "after refusing to delete")
}

// A generation with a gap, or without meta, is left alone.
func TestBrokenGenerationsUntouched(t *testing.T) {
	ctx := context.Background()
	r := fileRepo(t)
	rng := rand.New(rand.NewPCG(9, 10))
	w := newWriter(r, session("gap", "laptop"), "0000000000000001", 0)
	for range 70 {
		if err := w.append(ctx, lines(rng, 1)); err != nil {
			t.Fatal(err)
		}
	}
	c := chunksOf(t, r, w.s, w.gen)[10]
	if err := r.Client().Delete(ctx, w.s.ChunkKey(w.gen, c.Start, c.End)); err != nil {
		t.Fatal(err)
	}
	if _, err := Stream(ctx, r, w.s, w.gen, true, Policy{}); !errors.Is(err, repo.ErrGap) {
		t.Fatalf("gap: %v", err)
	}
	if got := chunksOf(t, r, w.s, w.gen); len(got) != 69 {
		t.Fatalf("%d chunks left, want 69 untouched", len(got))
	}

	nm := newWriter(r, session("nometa", "laptop"), "0000000000000001", 0)
	nm.meta = true // never written
	for range 70 {
		if err := nm.append(ctx, lines(rng, 1)); err != nil {
			t.Fatal(err)
		}
	}
	// Complete by its chunk at 0, which carries no meta: damage, refused
	// and left for a human to see.
	if _, err := Stream(ctx, r, nm.s, nm.gen, true, Policy{}); err == nil || !strings.Contains(err.Error(), "carries no meta") {
		t.Fatalf("generation without meta: %v", err)
	}
	if got := chunksOf(t, r, nm.s, nm.gen); len(got) != 70 {
		t.Fatalf("%d chunks left, want 70 untouched", len(got))
	}
}

func putCatalog(t testing.TB, r *repo.Repo, machine string, entries ...repo.CatalogEntry) {
	t.Helper()
	if _, err := r.PutCatalog(context.Background(), repo.Catalog{Machine: machine, Sessions: entries}); err != nil {
		t.Fatal(err)
	}
}

func entry(id, gen, state string, changed time.Time) repo.CatalogEntry {
	return repo.CatalogEntry{ID: id, Path: "sessions/-work/x_" + id + ".jsonl", Generation: gen, State: state, Changed: changed}
}

// Machine compacts the sessions of one machine named by id prefix; its dry
// run plans what the real run then does, and changes nothing.
func TestMachine(t *testing.T) {
	ctx := context.Background()
	r := fileRepo(t)
	rng := rand.New(rand.NewPCG(11, 12))
	var ws []*writer
	for _, id := range []string{"aaa1", "aaa2", "bbb1"} {
		w := newWriter(r, session(id, "laptop"), "0000000000000001", 0)
		if err := w.append(ctx, []byte("{}\n")); err != nil { // smaller than the rest: all five merge
			t.Fatal(err)
		}
		for range 4 {
			if err := w.append(ctx, lines(rng, 1)); err != nil {
				t.Fatal(err)
			}
		}
		ws = append(ws, w)
	}
	other := newWriter(r, session("aaa1", "desk"), "0000000000000001", 0)
	for range 5 {
		if err := other.append(ctx, lines(rng, 1)); err != nil {
			t.Fatal(err)
		}
	}
	putCatalog(t, r, "laptop", entry("aaa1", "0000000000000001", repo.StatePresent, time.Now()),
		entry("aaa2", "0000000000000001", repo.StateDeleted, time.Now()), entry("bbb1", "0000000000000001", repo.StatePresent, time.Now()))
	putCatalog(t, r, "desk", entry("aaa1", "0000000000000001", repo.StatePresent, time.Now()))

	before := snapshotKeys(t, r)
	p := Policy{Idle: time.Nanosecond}
	dry, err := Machine(ctx, r, "laptop", []string{"aaa", "zzz"}, p, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(snapshotKeys(t, r), before) {
		t.Fatal("a dry run changed the remote")
	}
	if !slices.Equal(dry.Unmatched, []string{"zzz"}) || dry.Sessions != 2 || len(dry.Streams) != 2 {
		t.Fatalf("dry run: %+v", dry)
	}
	for _, sr := range dry.Streams {
		if !sr.Idle || sr.Plan.Merge.Chunks != 5 || sr.Result.Written != 0 {
			t.Fatalf("dry run of %s: %+v", sr.Stream.SessionID, sr)
		}
	}
	done, err := Machine(ctx, r, "laptop", []string{"aaa", "zzz"}, p, false)
	if err != nil || done.Err() != nil {
		t.Fatal(err, done.Err())
	}
	for i, sr := range done.Streams {
		if sr.Plan != dry.Streams[i].Plan || sr.Result.Merged != sr.Plan.Merge.Chunks || sr.Result.After != 1 {
			t.Fatalf("run of %s: %+v, dry run planned %+v", sr.Stream.SessionID, sr, dry.Streams[i].Plan)
		}
	}
	for _, w := range append(ws, other) {
		checkStream(t, r, w, "after Machine")
	}
	if n := len(chunksOf(t, r, ws[2].s, ws[2].gen)); n != 5 {
		t.Fatalf("bbb1 (not named) has %d chunks, want its 5", n)
	}
	if n := len(chunksOf(t, r, other.s, other.gen)); n != 5 {
		t.Fatalf("desk's copy has %d chunks, want its 5: a machine compacts only its own", n)
	}
	// A stream written just now is busy: with few chunks nothing happens,
	// and the report says why.
	if rep, err := Machine(ctx, r, "laptop", []string{"bbb"}, Policy{Idle: time.Hour}, false); err != nil ||
		len(rep.Streams) != 1 || !strings.Contains(rep.Streams[0].Skipped, "written to lately") || rep.Streams[0].Result.Before != 0 {
		t.Fatalf("busy stream: %+v, %v", rep, err)
	}
	if _, err := Machine(ctx, r, "nobody", nil, p, true); err == nil || !strings.Contains(err.Error(), "no catalog") {
		t.Fatalf("machine without catalog: %v", err)
	}
}

func snapshotKeys(t testing.TB, r *repo.Repo) []string {
	t.Helper()
	var keys []string
	for obj, err := range r.Client().List(context.Background(), "", remote.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

// The scheme's bounds, on the planner alone: a session written by 10,000
// appends (one chunk each) and compacted as the agent would never holds
// more than one LIST page of chunks, rewrites less than 5 times its size
// (compressed, what is uploaded is far less), and ends in at most 4 chunks
// when written with breaks of at most a few a day; even when it is idle
// after every 65 appends it ends in at most 8.
func TestLevelsBounds(t *testing.T) {
	for _, idleEvery := range []int{0, 2000, 1000, 500, 150, 65} {
		st := simulate(10000, idleEvery, Policy{}.withDefaults(), 1)
		t.Logf("idle every %d appends: %d bytes, rewritten %.2fx, most chunks %d, final %d", idleEvery, st.size, float64(st.rewritten)/float64(st.size), st.most, st.final)
		final := 4
		if idleEvery > 0 && idleEvery < 500 {
			final = 8
		}
		if st.final > final || st.most > 1000 || st.rewritten > 5*st.size {
			t.Errorf("idle every %d appends: %+v", idleEvery, st)
		}
	}
}

type simStats struct {
	size, rewritten int64
	most, final     int
	merges          int
}

// simulate runs the planner over appends of corpus-like sizes (one chunk
// each; one in 200 a tool result of 100-500 KB), compacting busy after
// every MaxChunks+1 appends and idle every idleEvery appends and at the end.
func simulate(n, idleEvery int, p Policy, seed uint64) simStats {
	rng := rand.New(rand.NewPCG(seed, seed))
	var chunks []repo.ChunkRef
	var st simStats
	apply := func(idle bool) {
		for {
			from, to := mergeRange(chunks, idle, p)
			if to-from < 2 {
				return
			}
			m := repo.ChunkRef{Start: chunks[from].Start, End: chunks[to-1].End}
			st.rewritten += m.End - m.Start
			st.merges++
			chunks = append(append(chunks[:from:from], m), chunks[to:]...)
		}
	}
	since := 0
	for i := range n {
		size := int64(200 + rng.ExpFloat64()*1300)
		if rng.IntN(200) == 0 {
			size = 100<<10 + rng.Int64N(400<<10)
		}
		chunks = append(chunks, repo.ChunkRef{Start: st.size, End: st.size + size})
		st.size += size
		since++
		switch {
		case i == n-1 || idleEvery > 0 && i%idleEvery == idleEvery-1:
			apply(true)
			since = 0
		case since > p.MaxChunks:
			apply(false)
			since = 0
		}
		st.most = max(st.most, len(chunks))
	}
	st.final = len(chunks)
	return st
}
