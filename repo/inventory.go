package repo

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/ompsync/ompsync/remote"
)

// inventory groups listed session keys into streams and generations, as
// Inventory and InventoryAll return them.
type inventory map[Stream]*StreamInventory

// add records one parsed key.
func (b inventory) add(ref ObjectRef, size int64) {
	inv := b[ref.Stream]
	if inv == nil {
		inv = &StreamInventory{Stream: ref.Stream}
		b[ref.Stream] = inv
	}
	g := inv.Find(ref.Generation)
	if g == nil {
		g = &Generation{Name: ref.Generation}
		inv.Generations = append(inv.Generations, g)
	}
	switch ref.Object {
	case "meta":
		g.HasMeta = true
	case "head":
		g.HasHead = true
	default:
		g.Chunks = append(g.Chunks, ChunkRef{Start: ref.Start, End: ref.End, Size: size})
	}
}

// sorted returns the streams by machine, then name; generations oldest
// first; chunks by start, then end.
func (b inventory) sorted() []*StreamInventory {
	out := make([]*StreamInventory, 0, len(b))
	for _, inv := range b {
		sort.Slice(inv.Generations, func(i, j int) bool { return inv.Generations[i].Name < inv.Generations[j].Name })
		for _, g := range inv.Generations {
			sort.Slice(g.Chunks, func(i, j int) bool {
				a, b := g.Chunks[i], g.Chunks[j]
				return a.Start < b.Start || a.Start == b.Start && a.End < b.End
			})
		}
		out = append(out, inv)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Stream, out[j].Stream
		if a.Machine != b.Machine {
			return a.Machine < b.Machine
		}
		return a.Name < b.Name
	})
	return out
}

// Inventories is what one listing of every session's objects holds, by
// session id (see InventoryAll).
type Inventories struct {
	sessions map[string][]*StreamInventory
	// errs are sessions with a key that does not parse: what Inventory
	// of that session alone would have returned.
	errs map[string]error
}

// Session is what Inventory(ctx, id, machine) would have returned at the
// time of the listing: the session's streams, or the error of a key that
// does not parse. A session the listing did not see has no streams.
func (a *Inventories) Session(id string) ([]*StreamInventory, error) {
	if err := a.errs[id]; err != nil {
		return nil, err
	}
	return a.sessions[id], nil
}

// Len is how many sessions the listing saw.
func (a *Inventories) Len() int { return len(a.sessions) + len(a.errs) }

// InventoryAll lists every session's objects (those of one machine when
// machine is not empty) with one paged LIST of v1/sessions/, where Inventory
// costs one LIST per session: a restore of many sessions plans from it. Each
// session's part is exactly what Inventory returns for it: a key that does not
// parse fails only the session it is listed under. The error is the
// listing's own (a key outside v1/sessions/ included: only a broken or
// hostile server yields one).
func (r *Repo) InventoryAll(ctx context.Context, machine string) (*Inventories, error) {
	prefix := SessionsPrefix()
	byID := map[string]inventory{}
	errs := map[string]error{}
	for obj, err := range r.client.List(ctx, prefix, remote.ListOptions{}) {
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		rest, ok := strings.CutPrefix(obj.Key, prefix)
		if !ok {
			return nil, fmt.Errorf("list sessions: key %q listed under %s", obj.Key, prefix)
		}
		id, inside, found := strings.Cut(rest, "/")
		if !found {
			continue // under no session's prefix: no Inventory lists it
		}
		if machine != "" && !strings.HasPrefix(inside, machine+"/") {
			continue // Inventory(id, machine) lists id/machine/ only
		}
		if errs[id] != nil {
			continue
		}
		ref, err := ParseSessionKey(obj.Key) // its session id is id
		if err != nil {
			errs[id] = err
			delete(byID, id)
			continue
		}
		b := byID[id]
		if b == nil {
			b = inventory{}
			byID[id] = b
		}
		b.add(ref, obj.Size)
	}
	out := &Inventories{sessions: make(map[string][]*StreamInventory, len(byID)), errs: errs}
	for id, b := range byID {
		out.sessions[id] = b.sorted()
	}
	return out, nil
}
