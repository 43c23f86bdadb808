package repo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/ompsync/ompsync/remote"
)

// MaxSessionObjects bounds the objects a reader takes one session to hold
// (all machines, streams and generations): a busy session holds a few
// hundred, compaction keeps it there, so a listing that goes on past this
// is damage or a server that never ends it, refused before it fills memory.
const MaxSessionObjects = 1 << 16

// inventory groups listed session keys into streams and generations, as
// Inventory and InventoryAll return them.
type inventory struct {
	streams map[Stream]*StreamInventory
	gens    map[genKey]*Generation // a generation found in O(1), not by a scan
	n       int
}

var errTooManyObjects = fmt.Errorf("the listing goes on past %d objects, more than any session holds", MaxSessionObjects)

type genKey struct {
	s   Stream
	gen string
}

func newInventory() *inventory {
	return &inventory{streams: map[Stream]*StreamInventory{}, gens: map[genKey]*Generation{}}
}

// add records one parsed key, listed as obj.
func (b *inventory) add(ref ObjectRef, obj remote.ObjectInfo) error {
	if b.n++; b.n > MaxSessionObjects {
		return fmt.Errorf("session %s: %w", ref.Stream.SessionID, errTooManyObjects)
	}
	inv := b.streams[ref.Stream]
	if inv == nil {
		inv = &StreamInventory{Stream: ref.Stream}
		b.streams[ref.Stream] = inv
	}
	k := genKey{ref.Stream, ref.Generation}
	g := b.gens[k]
	if g == nil {
		g = &Generation{Name: ref.Generation}
		b.gens[k] = g
		inv.Generations = append(inv.Generations, g)
	}
	g.add(ref.Object, obj)
	return nil
}

// add records one listed object of g, by its name in the generation:
// "meta", "head" or a chunk's; any other name is passed over.
func (g *Generation) add(name string, obj remote.ObjectInfo) {
	switch name {
	case "meta":
		g.MetaObject, g.MetaSize, g.MetaModTime = true, obj.Size, obj.ModTime
	case "head":
		g.HasHead, g.HeadSize, g.HeadModTime = true, obj.Size, obj.ModTime
	default:
		if s, e, ok := ParseChunkName(name); ok {
			g.Chunks = append(g.Chunks, ChunkRef{Start: s, End: e, Size: obj.Size, ModTime: obj.ModTime})
		}
	}
}

// sort sorts g's chunks by start, then end, and applies the format's rule.
func (g *Generation) sort() {
	slices.SortFunc(g.Chunks, func(a, b ChunkRef) int { return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End)) })
	g.Complete()
}

// ListGeneration lists one generation's objects with one LIST of its
// prefix. Names other than its meta, head and chunks are passed over: only
// this generation counts. A failed LIST is the client's error, which names
// the prefix; a listing past MaxSessionObjects is refused, as Inventory's.
func (r *Repo) ListGeneration(ctx context.Context, s Stream, gen string) (*Generation, error) {
	g := &Generation{Name: gen}
	prefix := s.GenPrefix(gen)
	n := 0
	for obj, err := range r.client.List(ctx, prefix, remote.ListOptions{}) {
		if err != nil {
			return nil, err
		}
		if n++; n > MaxSessionObjects {
			return nil, fmt.Errorf("list %s: %w", prefix, errTooManyObjects)
		}
		if name, ok := strings.CutPrefix(obj.Key, prefix); ok {
			g.add(name, obj)
		}
	}
	g.sort()
	return g, nil
}

// sorted returns the streams by machine, then name; generations oldest
// first, complete or not (Complete); chunks by start, then end.
func (b *inventory) sorted() []*StreamInventory {
	out := make([]*StreamInventory, 0, len(b.streams))
	for _, inv := range b.streams {
		slices.SortFunc(inv.Generations, func(a, b *Generation) int { return cmp.Compare(a.Name, b.Name) })
		for _, g := range inv.Generations {
			g.sort()
		}
		out = append(out, inv)
	}
	slices.SortFunc(out, func(a, b *StreamInventory) int {
		return cmp.Or(cmp.Compare(a.Stream.Machine, b.Stream.Machine), cmp.Compare(a.Stream.Name, b.Stream.Name))
	})
	return out
}

// SessionObjects is one session's part of InventoryAll.
type SessionObjects struct {
	ID string
	// Streams and Err are what Inventory(ctx, ID, machine) returns: the
	// session's streams, or the error of a key that does not parse.
	Streams []*StreamInventory
	Err     error
}

// InventoryAll lists the objects of every session (of one machine's streams
// when machine is not empty) with one paged LIST of v1/sessions/, where
// Inventory costs a LIST per session: a restore of many sessions plans from
// it. It yields each session as soon as the listing has gone past it, in
// listing order, so work on the first sessions starts while the rest are
// listed. A session's part is exactly what Inventory returns for it: a key
// that does not parse fails only the session it is listed under.
//
// The remote lists keys in lexical order, so the keys of one session come
// together. The iteration ends with an error when the LIST fails, when a
// key is not under v1/sessions/, or when a session's keys come apart (a
// broken server): the sessions not yielded yet are then not known.
//
// first, when above 0, is how many keys the LIST's first page asks for
// (remote.ListOptions.FirstPage): a caller that starts work on the first
// sessions gets them sooner.
func (r *Repo) InventoryAll(ctx context.Context, machine string, first int) iter.Seq2[SessionObjects, error] {
	return func(yield func(SessionObjects, error) bool) {
		prefix := SessionsPrefix()
		var cur SessionObjects
		var b *inventory // nil: no session open
		done := map[string]bool{}
		flush := func() bool {
			if b == nil {
				return true
			}
			done[cur.ID] = true
			if cur.Err == nil {
				cur.Streams = b.sorted()
			}
			b = nil
			return yield(cur, nil)
		}
		for obj, err := range r.client.List(ctx, prefix, remote.ListOptions{FirstPage: first}) {
			if err != nil {
				yield(SessionObjects{}, fmt.Errorf("list sessions: %w", err))
				return
			}
			rest, ok := strings.CutPrefix(obj.Key, prefix)
			if !ok {
				yield(SessionObjects{}, fmt.Errorf("list sessions: key %q listed under %s", obj.Key, prefix))
				return
			}
			id, inside, found := strings.Cut(rest, "/")
			if !found {
				continue // under no session's prefix: no Inventory lists it
			}
			if b == nil || id != cur.ID {
				if !flush() {
					return
				}
				if done[id] {
					yield(SessionObjects{}, fmt.Errorf("list sessions: the keys of session %q are not listed together", id))
					return
				}
				cur, b = SessionObjects{ID: id}, newInventory()
			}
			if machine != "" && !strings.HasPrefix(inside, machine+"/") {
				continue // Inventory(id, machine) lists id/machine/ only
			}
			if cur.Err != nil {
				continue
			}
			ref, err := ParseSessionKey(obj.Key) // its session id is id
			if err == nil {
				err = b.add(ref, obj)
			}
			if errors.Is(err, errTooManyObjects) {
				// A listing that never ends would never reach the next
				// session: the rest is not known.
				if yield(SessionObjects{ID: cur.ID, Err: err}, nil) {
					yield(SessionObjects{}, fmt.Errorf("list sessions: %w", err))
				}
				return
			}
			if err != nil {
				cur.Err = err
			}
		}
		flush()
	}
}
