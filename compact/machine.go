package compact

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"golang.org/x/sync/errgroup"
)

// StreamReport is what compaction planned, and did, for one generation.
type StreamReport struct {
	Stream     repo.Stream
	Generation string
	// Idle: the generation was merged as a finished one (superseded, or
	// unchanged for Policy.Idle).
	Idle   bool
	Plan   Plan   // the first round's plan
	Result Result // zero in a dry run
	Err    error
	// Skipped says why nothing was to be done ("" when something was).
	Skipped string
}

// MachineReport is what Machine found and did.
type MachineReport struct {
	Sessions int // sessions looked at
	// Streams lists every generation: done, planned, skipped or failed.
	Streams []StreamReport
	// Unmatched are the id prefixes that matched no session.
	Unmatched []string
}

// parallel bounds the sessions compacted at once.
const parallel = 4

// Machine compacts every generation of machine's sessions whose id starts
// with one of prefixes (any case; all sessions when there are none), as
// listed in the machine's catalog: the newest generation of a stream as
// busy or idle by the age of its newest chunk, older ones as idle. With dryRun it only
// plans. Errors of single streams are in the report; the error returned is
// one that stopped everything (no catalog).
func Machine(ctx context.Context, r *repo.Repo, machine string, prefixes []string, p Policy, dryRun bool) (*MachineReport, error) {
	p = p.withDefaults()
	cat, err := r.GetCatalog(ctx, machine)
	if errors.Is(err, remote.ErrNotFound) {
		return nil, fmt.Errorf("machine %s has no catalog on the remote: nothing of it to compact", machine)
	}
	if err != nil {
		return nil, fmt.Errorf("read catalog of %s: %w", machine, err)
	}
	ids, unmatched := match(cat, prefixes)
	rep := &MachineReport{Sessions: len(ids), Unmatched: unmatched}
	outs := make([][]StreamReport, len(ids))
	var g errgroup.Group
	g.SetLimit(parallel)
	for i, id := range ids {
		g.Go(func() error {
			outs[i] = compactSession(ctx, r, id, machine, p, dryRun)
			return nil // a session's error is in its reports
		})
	}
	_ = g.Wait()
	// In order: the ids are sorted, and Inventory lists a session's
	// streams by name, generations oldest first.
	rep.Streams = slices.Concat(outs...)
	return rep, ctx.Err()
}

// match picks the catalog's session ids that start with a prefix, ignoring
// case as omp's --resume does.
func match(cat repo.Catalog, prefixes []string) (ids, unmatched []string) {
	matches := func(id, pre string) bool { return strings.HasPrefix(strings.ToLower(id), strings.ToLower(pre)) }
	for _, e := range cat.Sessions {
		if len(prefixes) == 0 || slices.ContainsFunc(prefixes, func(pre string) bool { return matches(e.ID, pre) }) {
			ids = append(ids, e.ID)
		}
	}
	for _, pre := range prefixes {
		if !slices.ContainsFunc(ids, func(id string) bool { return matches(id, pre) }) {
			unmatched = append(unmatched, pre)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), unmatched
}

// skipReason says why a generation has nothing to merge.
func skipReason(pl Plan, idle bool) string {
	switch {
	case pl.Chunks <= 1:
		return "one chunk, nothing to merge"
	case !idle:
		return fmt.Sprintf("%d chunks, written to lately: merged once idle, or past max_chunks", pl.Chunks)
	}
	return fmt.Sprintf("already compact: %d chunks, each at least as large as all after it (or full)", pl.Chunks)
}

func compactSession(ctx context.Context, r *repo.Repo, id, machine string, p Policy, dryRun bool) []StreamReport {
	streams, err := r.Inventory(ctx, id, machine)
	if err != nil {
		return []StreamReport{{Stream: repo.Stream{SessionID: id, Machine: machine, Name: repo.SessionStream}, Err: err}}
	}
	var out []StreamReport
	now := time.Now()
	for _, st := range streams {
		newest := st.Newest()
		for _, g := range st.Generations {
			if !g.HasMeta {
				continue
			}
			// A generation with meta has chunks: the newest is busy while
			// its last written one is younger than p.Idle.
			last := slices.MaxFunc(g.Chunks, func(a, b repo.ChunkRef) int { return a.ModTime.Compare(b.ModTime) })
			idle := g != newest || now.Sub(last.ModTime) >= p.Idle
			sr := StreamReport{Stream: st.Stream, Generation: g.Name, Idle: idle}
			switch pl, err := plan(g.Chunks, idle, p); {
			case err != nil:
				sr.Err = fmt.Errorf("%s generation %s: %w", st.Stream.Prefix(), g.Name, err)
			case pl.Empty():
				sr.Plan, sr.Skipped = pl.Plan, skipReason(pl.Plan, idle)
			default:
				sr.Plan = pl.Plan
				if !dryRun {
					sr.Result, sr.Err = compactGeneration(ctx, r, st.Stream, g, idle, p)
				}
			}
			out = append(out, sr)
		}
	}
	return out
}
