package compact

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// Retention says how long what is no longer current stays on the remote.
// Zero means forever.
type Retention struct {
	// Generations: a generation superseded by a newer one (the file was
	// rewritten) is deleted this long after the newer one began, unless
	// it holds entries the current generation lacks (the file was cut
	// short): that one stays.
	Generations time.Duration
	// Deleted: a session whose catalog state is "deleted" is deleted this
	// long after it was deleted locally.
	Deleted time.Duration
}

// Expired reports whether a catalog entry is a deleted session past
// retention: its objects go, and so can its entry.
func (ret Retention) Expired(e repo.CatalogEntry, now time.Time) bool {
	return ret.Deleted > 0 && e.State == repo.StateDeleted && now.Sub(e.Changed) > ret.Deleted
}

// Why a generation is pruned.
const (
	ReasonSuperseded = "superseded"
	ReasonDeleted    = "session deleted"
)

// PruneItem is one generation that prune deletes.
type PruneItem struct {
	Stream     repo.Stream
	Generation string
	Reason     string    // ReasonSuperseded or ReasonDeleted
	Since      time.Time // when it was superseded, or the session deleted
	Keys       []string  // its objects, in the order they are deleted
	Bytes      int64     // their stored size
}

// Kept is a generation retention would delete but that stays.
type Kept struct {
	Stream     repo.Stream
	Generation string
	Why        string
}

// PruneReport lists what prune deletes (or, in a dry run, would delete).
type PruneReport struct {
	Items []PruneItem
	Kept  []Kept
	// Sessions are deleted sessions past retention of which nothing of
	// this machine is left once Items are deleted: their catalog entries
	// can go too (DropSessions, or the agent forgetting them).
	Sessions []string
	Objects  int
	Bytes    int64
}

// refMaxStored is the largest stored object a reference chunk can be: it
// holds only its header line (at most 1 KiB), and no codec grows 1 KiB by
// more than the 1/8 + 64 KiB the repository allows for. Larger chunks hold
// data and need not be read to know they refer to nothing.
const refMaxStored = 1025 + 1025/8 + 64<<10

// Prune deletes what retention no longer keeps of machine's sessions (those
// in its catalog): superseded generations older than ret.Generations, and
// every generation of sessions deleted longer than ret.Deleted ago. It
// never deletes the newest generation of a stream (the one with meta that
// readers take), the generation the catalog names, a generation another
// machine's reference chunks point at (found with one LIST of the
// session, and by reading those machines' chunks that are small enough to
// be references), or a superseded session generation holding a line the
// newest lacks by lines' merge key (an entry's id and time, another
// line's bytes): omp's own rewrites keep every entry's id, so only a file
// cut short (damage, or a user's edit) keeps one, and no such copy is the
// only one lost. With dryRun it deletes nothing and reports the same.
//
// It does not rewrite the catalog: the machine's agent owns it. Pruned
// deleted sessions are listed in Sessions for the owner to drop.
func Prune(ctx context.Context, r *repo.Repo, lines Lines, machine string, ret Retention, now time.Time, dryRun bool) (*PruneReport, error) {
	return prune(ctx, r, lines, machine, ret, now, dryRun, defaultBounds())
}

func prune(ctx context.Context, r *repo.Repo, lines Lines, machine string, ret Retention, now time.Time, dryRun bool, b bounds) (*PruneReport, error) {
	rep := &PruneReport{}
	if ret.Generations <= 0 && ret.Deleted <= 0 {
		return rep, nil
	}
	cat, err := r.GetCatalog(ctx, machine)
	if errors.Is(err, remote.ErrNotFound) {
		return rep, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read catalog of %s: %w", machine, err)
	}
	entries := slices.SortedFunc(slices.Values(cat.Sessions), func(a, b repo.CatalogEntry) int { return cmp.Compare(a.ID, b.ID) })
	for _, e := range entries {
		if err := pruneSession(ctx, r, lines, b, machine, e, ret, now, rep); err != nil {
			return rep, err
		}
	}
	if !dryRun {
		err = deleteItems(ctx, r, machine, rep)
	}
	for _, it := range rep.Items {
		rep.Objects += len(it.Keys)
		rep.Bytes += it.Bytes
	}
	return rep, err
}

// deleteItems deletes what rep plans to. Planning reads other machines'
// references minutes before: each generation's are read again just before
// its objects go, so one another machine began to refer to meanwhile
// (pulled while prune ran) is kept.
func deleteItems(ctx context.Context, r *repo.Repo, machine string, rep *PruneReport) error {
	planned := rep.Items
	rep.Items = planned[:0:0]
	keptSessions := map[string]bool{}
	for _, it := range planned {
		streams, err := r.Inventory(ctx, it.Stream.SessionID, "")
		if err != nil {
			return err
		}
		refs, err := referenced(ctx, r, streams, machine, it.Stream.Name)
		if err != nil {
			return fmt.Errorf("prune %s generation %s: cannot check other machines' references: %w", it.Stream.Prefix(), it.Generation, err)
		}
		if by := refs[it.Generation]; by != "" {
			rep.Kept = append(rep.Kept, Kept{it.Stream, it.Generation, "referenced by machine " + by})
			keptSessions[it.Stream.SessionID] = true
			continue
		}
		for _, k := range it.Keys {
			if err := r.Client().Delete(ctx, k); err != nil {
				return fmt.Errorf("prune %s generation %s: %w", it.Stream.Prefix(), it.Generation, err)
			}
		}
		rep.Items = append(rep.Items, it)
	}
	rep.Sessions = slices.DeleteFunc(rep.Sessions, func(id string) bool { return keptSessions[id] })
	return nil
}

type candidate struct {
	st     *repo.StreamInventory
	g      *repo.Generation
	reason string
	since  time.Time
}

func pruneSession(ctx context.Context, r *repo.Repo, lines Lines, b bounds, machine string, e repo.CatalogEntry, ret Retention, now time.Time, rep *PruneReport) error {
	deleted := ret.Expired(e, now)
	if !deleted && ret.Generations <= 0 {
		return nil
	}
	streams, err := r.Inventory(ctx, e.ID, "")
	if err != nil {
		return err
	}
	var cands []candidate
	// The lines of the newest generation of this machine's session stream
	// (one in a session), read once for all of its superseded ones.
	var newestLines func() (lineSet, error)
	for _, st := range streams {
		if st.Stream.Machine != machine {
			continue
		}
		newest := st.Newest()
		if st.Stream.Name == repo.SessionStream {
			newestLines = sync.OnceValues(func() (lineSet, error) { return readLineSet(ctx, r, st.Stream, newest, lines, b, nil) })
		}
		for i, g := range st.Generations {
			if deleted {
				cands = append(cands, candidate{st, g, ReasonDeleted, e.Changed})
				continue
			}
			if g == newest || st.Stream.Name == repo.SessionStream && g.Name == e.Generation {
				continue
			}
			// Superseded when a newer generation with meta began; one
			// without a newer such generation may be an upload in progress.
			later := st.Generations[i+1:]
			next := slices.IndexFunc(later, func(n *repo.Generation) bool { return n.HasMeta })
			if next < 0 {
				continue
			}
			if since := repo.GenerationTime(later[next].Name); now.Sub(since) > ret.Generations {
				cands = append(cands, candidate{st, g, ReasonSuperseded, since})
			}
		}
	}
	refs := map[string]map[string]string{} // stream name -> generation -> referring machine
	refErr := map[string]error{}
	kept := false
	for _, c := range cands {
		name := c.st.Stream.Name
		if _, done := refs[name]; !done {
			refs[name], refErr[name] = referenced(ctx, r, streams, machine, name)
		}
		why := ""
		switch {
		case refErr[name] != nil:
			why = fmt.Sprintf("cannot check other machines' references: %v", refErr[name])
		case refs[name][c.g.Name] != "":
			why = "referenced by machine " + refs[name][c.g.Name]
		case c.reason == ReasonSuperseded && name == repo.SessionStream && c.g.HasMeta:
			// An upload cut off before its meta is no copy restore
			// takes: only one with meta is compared.
			why = lacking(ctx, r, lines, b, c.st, c.g, newestLines)
		}
		if why != "" {
			rep.Kept = append(rep.Kept, Kept{c.st.Stream, c.g.Name, why})
			kept = true
			continue
		}
		keys, n := deleteKeys(c.st.Stream, c.g)
		rep.Items = append(rep.Items, PruneItem{Stream: c.st.Stream, Generation: c.g.Name, Reason: c.reason, Since: c.since, Keys: keys, Bytes: n})
	}
	if deleted && !kept {
		rep.Sessions = append(rep.Sessions, e.ID)
	}
	return nil
}

// lacking says why superseded generation g of st must stay: it holds a
// line the newest generation, whose lines newest reads, lacks, or the two
// cannot be compared. "" when every line of g is in the newest.
func lacking(ctx context.Context, r *repo.Repo, lines Lines, b bounds, st *repo.StreamInventory, g *repo.Generation, newest func() (lineSet, error)) string {
	cur := st.Newest()
	set, err := newest()
	n := 0
	if err == nil {
		n, err = firstLacking(ctx, r, st.Stream, g, lines, set, b)
	}
	switch {
	case err != nil:
		return fmt.Sprintf("cannot compare with the current generation %s: %v", cur.Name, err)
	case n > 0:
		return fmt.Sprintf("holds lines the current generation %s lacks (the first is line %d; the file was cut short or edited): 'ompsync restore --generation %s %s' brings them back",
			cur.Name, n, g.Name, st.Stream.SessionID)
	}
	return ""
}

// referenced finds which of machine's generations of the stream named name
// other machines' reference chunks point at.
func referenced(ctx context.Context, r *repo.Repo, streams []*repo.StreamInventory, machine, name string) (map[string]string, error) {
	out := map[string]string{}
	for _, st := range streams {
		if st.Stream.Machine == machine || st.Stream.Name != name {
			continue
		}
		for _, g := range st.Generations {
			for _, c := range g.Chunks {
				if c.Size > refMaxStored {
					continue
				}
				h, _, err := r.GetChunk(ctx, st.Stream, g.Name, c.Start, c.End)
				if err != nil {
					return nil, fmt.Errorf("read %s: %w", st.Stream.ChunkKey(g.Name, c.Start, c.End), err)
				}
				if h.Ref != nil && h.Ref.Machine == machine {
					out[h.Ref.Generation] = st.Stream.Machine
				}
			}
		}
	}
	return out, nil
}

// DropSessions removes sessions from machine's catalog. Only the catalog's
// owner may call it: the agent of that machine, or a command that holds the
// agent's state lock, since the agent replaces the catalog from its state.
func DropSessions(ctx context.Context, r *repo.Repo, machine string, ids []string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	cat, err := r.GetCatalog(ctx, machine)
	if err != nil {
		return fmt.Errorf("read catalog of %s: %w", machine, err)
	}
	cat.Sessions = slices.DeleteFunc(cat.Sessions, func(e repo.CatalogEntry) bool { return slices.Contains(ids, e.ID) })
	cat.Updated = now.UTC()
	if _, err := r.PutCatalog(ctx, cat); err != nil {
		return fmt.Errorf("update catalog of %s: %w", machine, err)
	}
	return nil
}
