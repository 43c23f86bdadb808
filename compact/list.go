package compact

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// chunkObj is a listed chunk.
type chunkObj struct {
	repo.ChunkRef
	mod time.Time
}

// generation is what a LIST shows of one generation. Unlike
// repo.Generation it keeps the stored sizes of every object and the chunks'
// modification times.
type generation struct {
	name       string
	meta, head *remote.ObjectInfo
	chunks     []chunkObj // sorted by start, then end
	// complete and metaInChunk are repo.Generation's HasMeta and
	// MetaInChunk by the repository's format (set by sort).
	complete, metaInChunk bool
}

func (g *generation) add(obj remote.ObjectInfo, name string) {
	switch name {
	case "meta":
		g.meta = &obj
	case "head":
		g.head = &obj
	default:
		if s, e, ok := repo.ParseChunkName(name); ok {
			g.chunks = append(g.chunks, chunkObj{ChunkRef: repo.ChunkRef{Start: s, End: e, Size: obj.Size, ModTime: obj.ModTime}, mod: obj.ModTime})
		}
	}
}

// sort sorts the chunks and applies the format's rule of a complete
// generation (repo.Generation.Complete).
func (g *generation) sort() {
	sort.Slice(g.chunks, func(i, j int) bool {
		a, b := g.chunks[i], g.chunks[j]
		return a.Start < b.Start || a.Start == b.Start && a.End < b.End
	})
	rg := repo.Generation{Chunks: g.refs()}
	rg.Complete(g.meta != nil)
	g.complete, g.metaInChunk = rg.HasMeta, rg.MetaInChunk
}

func (g *generation) refs() []repo.ChunkRef {
	out := make([]repo.ChunkRef, len(g.chunks))
	for i, c := range g.chunks {
		out[i] = c.ChunkRef
	}
	return out
}

// newest is the latest modification time of its chunks.
func (g *generation) newest() time.Time {
	var t time.Time
	for _, c := range g.chunks {
		if c.mod.After(t) {
			t = c.mod
		}
	}
	return t
}

// keys lists the generation's objects in the order they are deleted: meta
// first, then the chunks from offset 0 (a chunk at 0 makes it complete),
// so that an interrupted delete leaves a generation readers
// ignore rather than one with a gap.
func (g *generation) keys(s repo.Stream) (keys []string, bytes int64) {
	if g.meta != nil {
		keys, bytes = append(keys, g.meta.Key), bytes+g.meta.Size
	}
	if g.head != nil {
		keys, bytes = append(keys, g.head.Key), bytes+g.head.Size
	}
	for _, c := range g.chunks {
		keys, bytes = append(keys, s.ChunkKey(g.name, c.Start, c.End)), bytes+c.Size
	}
	return keys, bytes
}

// started is when the generation began: its name is the start time in Unix
// nanoseconds on the machine that wrote it.
func started(gen string) time.Time {
	n, err := strconv.ParseUint(gen, 16, 63)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, int64(n))
}

// stream is every listed generation of one stream, oldest first.
type stream struct {
	s    repo.Stream
	gens []*generation
}

// newestWithMeta is the generation readers take, or nil.
func (st *stream) newestWithMeta() *generation {
	for i := len(st.gens) - 1; i >= 0; i-- {
		if st.gens[i].complete {
			return st.gens[i]
		}
	}
	return nil
}

// listSession lists one session's objects with one paged LIST: every
// machine's, or one machine's when machine is not empty. Keys that do not
// parse are an error, as repo.Inventory has them. Generations are complete
// by the rule of the repository's format.
func listSession(ctx context.Context, r *repo.Repo, id, machine string) ([]*stream, error) {
	c := r.Client()
	prefix := repo.SessionPrefix(id)
	if machine != "" {
		prefix += machine + "/"
	}
	byStream := map[repo.Stream]*stream{}
	type genKey struct {
		s   repo.Stream
		gen string
	}
	byGen := map[genKey]*generation{}
	var order []*stream
	n := 0
	for obj, err := range c.List(ctx, prefix, remote.ListOptions{}) {
		if err != nil {
			return nil, fmt.Errorf("list session %s: %w", id, err)
		}
		if n++; n > repo.MaxSessionObjects {
			return nil, fmt.Errorf("list session %s: the listing goes on past %d objects, more than any session holds", id, repo.MaxSessionObjects)
		}
		ref, err := repo.ParseSessionKey(obj.Key)
		if err != nil {
			return nil, err
		}
		if ref.Stream.SessionID != id {
			return nil, fmt.Errorf("key %q listed under session %s", obj.Key, id)
		}
		st := byStream[ref.Stream]
		if st == nil {
			st = &stream{s: ref.Stream}
			byStream[ref.Stream] = st
			order = append(order, st)
		}
		g := byGen[genKey{ref.Stream, ref.Generation}]
		if g == nil {
			g = &generation{name: ref.Generation}
			byGen[genKey{ref.Stream, ref.Generation}] = g
			st.gens = append(st.gens, g)
		}
		g.add(obj, ref.Object)
	}
	for _, st := range order {
		sort.Slice(st.gens, func(i, j int) bool { return st.gens[i].name < st.gens[j].name })
		for _, g := range st.gens {
			g.sort()
		}
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := order[i].s, order[j].s
		if a.Machine != b.Machine {
			return a.Machine < b.Machine
		}
		return a.Name < b.Name
	})
	return order, nil
}
