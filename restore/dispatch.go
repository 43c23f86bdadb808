package restore

import (
	"context"
	"sync"

	"github.com/ompsync/ompsync/repo"
	"golang.org/x/sync/errgroup"
)

// listsAll reports whether restoring (or verifying) n of the sessions the
// catalogs hold lists every session's objects at once: one LIST per 1,000
// objects instead of one per session. Not for a few sessions among many.
func listsAll(opts Options, n, sessions int) bool {
	return opts.All || n >= 8 && n*8 >= sessions
}

// parallel calls do(i) for each i in [0, n), at most limit at once, and
// returns when all are done.
func parallel(n, limit int, do func(i int)) {
	var g errgroup.Group
	g.SetLimit(max(limit, 1))
	for i := range n {
		g.Go(func() error { do(i); return nil })
	}
	g.Wait()
}

// counted reports prog, the totals, to report (when not nil), and then,
// at each call of done, one more session done and its bytes. done may be
// called from many goroutines at once.
func counted(report func(Progress), prog Progress) (done func(bytes int64)) {
	if report == nil {
		return func(int64) {}
	}
	report(prog)
	var mu sync.Mutex
	return func(n int64) {
		mu.Lock()
		defer mu.Unlock()
		prog.Sessions++
		prog.Bytes += n
		report(prog)
	}
}

// eachTarget calls do for every target, at most opts.Parallel at once, and
// returns when all are done. When listsAll, it lists every session's objects
// with one paged LIST and starts each target as soon as the listing has gone
// past its session, with listed its part of the listing; the others (all of
// them when the listing fails, and any it did not see) list their session
// alone, with listed nil. The listing never waits for the work: on a line
// with a long round trip its next page is on its way while the sessions of
// the last one are fetched, and a worker that is free takes the next
// session the listing named. The listing is early's when it is not nil
// (started before the catalogs were read).
func eachTarget(ctx context.Context, r *repo.Repo, targets []*target, sessions int, opts Options, early *earlyListing, do func(i int, t *target, listed *repo.SessionObjects)) {
	type work struct {
		i      int
		listed *repo.SessionObjects
	}
	queue := make(chan work, len(targets)) // each target is queued once
	var wg sync.WaitGroup
	for range min(opts.Parallel, len(targets)) {
		wg.Go(func() {
			for w := range queue {
				do(w.i, targets[w.i], w.listed)
			}
		})
	}
	start := func(i int, listed *repo.SessionObjects) { queue <- work{i, listed} }
	started := make([]bool, len(targets))
	if len(targets) > 0 && (early != nil || listsAll(opts, len(targets), sessions)) {
		at := make(map[string]int, len(targets))
		for i, t := range targets {
			at[t.id] = i
		}
		left := len(targets)
		listing := early
		if listing == nil {
			listing = startListing(ctx, r, opts.Machine)
		}
		for it := range listing.items {
			if it.err != nil {
				opts.Logger.Warn("listing every session failed; listing the rest one by one", "err", it.err)
				break
			}
			if i, ok := at[it.so.ID]; ok && !started[i] {
				started[i] = true
				if early != nil && !early.covers(targets[i], &it.so) {
					start(i, nil) // listed again, after the catalogs
				} else {
					start(i, &it.so)
				}
				// The rest of the listing is sessions no catalog names: a
				// listing that never ends is not followed for them.
				if left--; left == 0 {
					break
				}
			}
		}
		if early == nil {
			listing.stop()
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

// earlyListing is a listing of every session's objects, run beside the
// work (eachTarget starts one), or started before the catalogs are read
// (restore --all): on a line with a long round trip its first page is
// there when the planning is done, three round trips sooner than a
// listing started after it. It runs at most earlyAhead sessions
// ahead of the work, so what it holds is bounded by the per-session
// bound of InventoryAll, not by the remote.
//
// A listing taken before the catalogs may miss what was uploaded between
// the two: covers sends such a session to a listing of its own.
type earlyListing struct {
	items  chan listItem
	cancel context.CancelFunc
}

type listItem struct {
	so  repo.SessionObjects
	err error
}

// earlyAhead bounds the sessions an early listing holds before the work
// takes them (each may list many objects): the page it is reading waits
// for the work, as a listing started after the catalogs would.
const earlyAhead = 64

// firstPage is how many keys the listing of every session asks for first:
// enough sessions to start every transfer, listed in a few milliseconds
// where a full page of 1,000 keys kept them all waiting (60-300 ms on
// versitygw, the tenth of a loopback restore of 1,000 sessions).
const firstPage = 64

func startListing(ctx context.Context, r *repo.Repo, machine string) *earlyListing {
	ctx, cancel := context.WithCancel(ctx)
	l := &earlyListing{items: make(chan listItem, earlyAhead), cancel: cancel}
	go func() {
		defer close(l.items)
		for so, err := range r.InventoryAll(ctx, machine, firstPage) {
			select {
			case l.items <- listItem{so, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return l
}

// stop ends the listing and waits for it.
func (l *earlyListing) stop() {
	l.cancel()
	for range l.items {
	}
}

// covers reports whether so, listed before t's catalog entries were read,
// holds every copy they record: each machine's generation with its meta.
// A size the listing falls short of is found by the fetch (ErrGap), which
// lists the session again. Artifact files are as the listing found them:
// omp writes one before the line that names it, and the agent uploads it
// no later than that line, so a listing that holds the line holds it.
func (l *earlyListing) covers(t *target, so *repo.SessionObjects) bool {
	if so.Err != nil {
		return false
	}
	for _, e := range t.entries {
		found := false
		for _, inv := range so.Streams {
			if inv.Stream.Name == repo.SessionStream && inv.Stream.Machine == e.machine {
				g := inv.Find(e.Generation)
				found = g != nil && g.HasMeta
			}
		}
		if !found {
			return false
		}
	}
	return true
}
