package restore

import (
	"context"
	"sync"

	"github.com/ompsync/ompsync/repo"
)

// listsAll reports whether restoring (or verifying) n of the sessions the
// catalogs hold lists every session's objects at once: one LIST per 1,000
// objects instead of one per session. Not for a few sessions among many.
func listsAll(opts Options, n, sessions int) bool {
	return opts.All || n >= 8 && n*8 >= sessions
}

// eachTarget calls do for every target, at most opts.Parallel at once, and
// returns when all are done. When listsAll, it lists every session's objects
// with one paged LIST and starts each target as soon as the listing has gone
// past its session, with listed its part of the listing; the others (all of
// them when the listing fails, and any it did not see) list their session
// alone, with listed nil. The listing never waits for the work: on a line
// with a long round trip its next page is on its way while the sessions of
// the last one are fetched, and a worker that is free takes the next
// session the listing named.
func eachTarget(ctx context.Context, r *repo.Repo, targets []*target, sessions int, opts Options, do func(i int, t *target, listed *repo.SessionObjects)) {
	type work struct {
		i      int
		listed *repo.SessionObjects
	}
	queue := make(chan work, len(targets)) // each target is queued once
	var wg sync.WaitGroup
	for range min(opts.Parallel, len(targets)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range queue {
				do(w.i, targets[w.i], w.listed)
			}
		}()
	}
	start := func(i int, listed *repo.SessionObjects) { queue <- work{i, listed} }
	started := make([]bool, len(targets))
	if listsAll(opts, len(targets), sessions) {
		at := make(map[string]int, len(targets))
		for i, t := range targets {
			at[t.id] = i
		}
		left := len(targets)
		for so, err := range r.InventoryAll(ctx, opts.Machine) {
			if err != nil {
				opts.Logger.Warn("listing every session failed; listing the rest one by one", "err", err)
				break
			}
			if i, ok := at[so.ID]; ok && !started[i] {
				started[i] = true
				start(i, &so)
				// The rest of the listing is sessions no catalog names: a
				// listing that never ends is not followed for them.
				if left--; left == 0 {
					break
				}
			}
		}
	}
	for i := range targets {
		if !started[i] {
			start(i, nil)
		}
	}
	close(queue)
	wg.Wait()
}
