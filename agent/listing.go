package agent

import (
	"context"
	"fmt"

	"github.com/ompsync/ompsync/repo"
)

// listing is this machine's streams of many sessions, from one paged LIST
// of every session (repo.InventoryAll): a session it holds was listed, and
// its streams are what Inventory would return for it; a session it lacks
// was not seen and is listed on its own.
type listing map[string][]*repo.StreamInventory

// listSessions lists the objects of the sessions in ids with one paged
// LIST of every session, stopping once it has seen them all, when they
// are many (else it lists nothing: each is listed on its own). They are
// many when one listing costs less than one LIST each: a listing page
// holds 1,000 objects, a few sessions' worth, so it pays once they are a
// good share of the sessions (the rule restore uses). A listing that
// fails leaves out what it had not reached.
func (a *Agent) listSessions(ctx context.Context, ids map[string]bool) listing {
	if len(ids) < 8 {
		return nil
	}
	sessions := 0
	for _, f := range a.state.Streams {
		if f.isSession() && f.Generation != "" {
			sessions++
		}
	}
	if 8*len(ids) < sessions {
		return nil
	}
	out := listing{}
	left := len(ids)
	for so, err := range a.repo.InventoryAll(ctx, a.opts.Machine, 0) {
		if err != nil {
			a.log.Debug("listing every session failed; listing the rest one by one", "err", err)
			break
		}
		if !ids[so.ID] || so.Err != nil {
			continue
		}
		out[so.ID] = so.Streams
		if left--; left == 0 {
			break
		}
	}
	return out
}

// catalogFromListing is this machine's catalog as a listing of its
// sessions shows it, for a catalog that is damaged with no state to write
// it again from: each session's newest copy, present (what the lost
// catalog said of it, deleted or archived, is not known: kept is the safe
// guess). One paged LIST of every session and one header or meta read per
// session.
func (a *Agent) catalogFromListing(ctx context.Context) (repo.Catalog, error) {
	cat := repo.Catalog{Machine: a.opts.Machine}
	for so, err := range a.repo.InventoryAll(ctx, a.opts.Machine, 0) {
		if err != nil {
			return cat, fmt.Errorf("list what this machine uploaded, to write its damaged catalog again: %w", err)
		}
		if so.Err != nil {
			a.log.Warn("a session's listing holds a key that does not parse; it stays on the remote, in no catalog", "session", so.ID, "err", so.Err)
			continue
		}
		for _, inv := range so.Streams {
			g := inv.Newest()
			if inv.Stream.Name != repo.SessionStream || g == nil {
				continue
			}
			m, err := a.repo.GenerationMeta(ctx, inv.Stream, g)
			if err != nil {
				a.log.Warn("a session's newest copy has no readable meta; it stays on the remote, in no catalog", "session", so.ID, "err", err)
				continue
			}
			_, size := repo.Cover(g.Chunks)
			cat.Sessions = append(cat.Sessions, repo.CatalogEntry{ID: so.ID, Path: m.Path, Cwd: m.Cwd, Generation: g.Name, Size: size, State: repo.StatePresent})
		}
	}
	return cat, nil
}
