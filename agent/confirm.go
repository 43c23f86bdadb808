package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// confirmUploads checks, with one LIST per stream that uploaded since the
// last check (or one listing of every session when those are many, as on a
// first backup), that the remote still holds what it acknowledged. A remote
// can lose objects (a lifecycle rule, a careless hand, a faulty server): the
// agent then rewinds to the first missing byte and uploads again.
func (a *Agent) confirmUploads(ctx context.Context) (changed bool) {
	var todo []*FileState
	ids := map[string]bool{} // their sessions
	for _, f := range a.state.Streams {
		// An archived session's archive still holds every byte, so its
		// lost objects can be put again as well.
		kept := f.State == repo.StatePresent || f.State == repo.StateArchived && f.isSession()
		// An unseen stream has no file here to fill a hole from.
		if kept && !f.Unseen && f.Generation != "" && (f.Offset > f.Confirmed || f.HeadUnconfirmed || f.MetaUnconfirmed || a.confirmDue(f.ConfirmedAt)) {
			todo = append(todo, f)
			ids[f.SessionID] = true
		}
	}
	listed := a.listSessions(ctx, ids)
	var confirmed atomic.Bool // any stream
	// Each in its own goroutine even when listed: a retitle or a move is
	// read back with a GET, and many at once (a pull's merges) take one
	// round trip, not one each.
	inParallel(a.opts.Parallel, todo, func(f *FileState) {
		a.state.touch(f)
		var err error
		if invs, ok := listed[f.SessionID]; ok {
			g := listedGeneration(invs, f)
			err = a.confirmFrom(ctx, f, g, g.HasMeta && !g.MetaInChunk)
		} else if g, lerr := a.repo.ListGeneration(ctx, f.stream(a.opts.Machine), f.Generation); lerr == nil {
			err = a.confirmFrom(ctx, f, *g, g.MetaObject)
		} else {
			err = lerr
			a.unchecked.failed(ctx, err)
		}
		if err != nil {
			a.log.Debug("could not confirm uploads; will check again", "path", f.Path, "err", err)
			return
		}
		confirmed.Store(true)
	})
	changed = a.confirmBlobs(ctx) || confirmed.Load()
	a.unchecked.endPass(a.log, a.now())
	return changed
}

// confirmDue reports whether what was last found on the remote at t is due
// to be checked again.
func (a *Agent) confirmDue(t time.Time) bool {
	return a.confirmAll || a.now().Sub(t) >= a.opts.AuditInterval
}

// unchecked is what full passes could not check of the remote's holdings
// because listing it failed: said at WARN when it starts, then once per
// problemRelog with a count, and at INFO once it works again. What was not
// checked is neither lost nor kept: the next pass checks it, and agent
// --once fails with it, since a remote that cannot be listed cannot be
// restored from either.
type unchecked struct {
	mu   sync.Mutex
	pass error   // this pass's first listing failure
	last error   // the last full pass's (nil: it listed all it needed)
	away problem // the run of failed passes, as problem.note counts it
}

// failed records a listing that failed during this pass; one the agent's
// stopping cut short says nothing of the remote.
func (u *unchecked) failed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.pass = cmp.Or(u.pass, err)
}

// endPass says what this pass could not check, as the type says.
func (u *unchecked) endPass(log *slog.Logger, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	err, was := u.pass, u.last
	u.pass, u.last = nil, err
	switch {
	case err == nil && was != nil:
		log.Info("the remote can be listed again: what it acknowledged is being checked")
		u.away = problem{}
	case err != nil:
		if n := u.away.note(now, ""); n >= 0 {
			log.Warn("cannot list the remote to check that it still holds what it acknowledged; uploads go on, "+
				"but a restore lists the remote the same way: fix the listing (for S3, the key's s3:ListBucket permission)",
				"err", err, "failed_passes", max(n, 1))
		}
	}
}

// err is the last full pass's failure (nil: it listed all it needed), for
// agent --once and its totals.
func (u *unchecked) err() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.last == nil {
		return nil
	}
	return fmt.Errorf("uploaded, but could not list the remote to check that it holds what it acknowledged, and a restore lists it the same way "+
		"(for S3, check the key's s3:ListBucket permission), then run again: %w", u.last)
}

// confirmBlobs lists the remote's blobs (one paged LIST) after blobs were
// uploaded, and once per audit interval, and forgets the ones the remote
// lost, so the next scan uploads them again.
func (a *Agent) confirmBlobs(ctx context.Context) bool {
	fresh := a.blobsToConfirm.Load()
	if len(a.state.Blobs) == 0 || fresh == 0 && !a.confirmDue(a.state.BlobsConfirmedAt) {
		return false
	}
	present := map[string]bool{}
	prefix := repo.BlobKey("")
	for obj, err := range a.repo.Client().List(ctx, prefix, remote.ListOptions{}) {
		if err != nil {
			a.log.Debug("could not list blobs; will check again", "err", err)
			a.unchecked.failed(ctx, err)
			return false
		}
		if name, ok := strings.CutPrefix(obj.Key, prefix); ok {
			present[name] = true
		}
	}
	had := len(a.state.Blobs)
	maps.DeleteFunc(a.state.Blobs, func(name string, _ bool) bool { return !present[name] })
	if lost := had - len(a.state.Blobs); lost > 0 {
		a.log.Warn("the remote lost blobs it had acknowledged; uploading them again", "blobs", lost)
		a.fullScan.Store(true)
	}
	a.blobsToConfirm.Add(-fresh)
	a.state.BlobsConfirmedAt = a.now().UTC()
	a.state.changed.all = true // removals are not journalled
	return true
}

// listedGeneration is f's generation in a listing of its session: what a
// LIST of the generation finds (nothing, when the listing has none).
func listedGeneration(invs []*repo.StreamInventory, f *FileState) repo.Generation {
	if inv := streamOf(invs, f); inv != nil {
		if g := inv.Find(f.Generation); g != nil {
			return *g
		}
	}
	return repo.Generation{Name: f.Generation}
}

// confirmFrom checks f against what the remote lists of its generation
// (metaObject: a meta object among it), and rewinds f to what the remote
// still holds.
func (a *Agent) confirmFrom(ctx context.Context, f *FileState, g repo.Generation, metaObject bool) error {
	s := f.stream(a.opts.Machine)
	g = a.withoutDamaged(s, g)
	chunks, hasMeta, hasHead := g.Chunks, g.HasMeta, g.HasHead
	if f.HeadUnconfirmed && hasHead {
		// A head is replaced in place: a lost put of a retitle leaves the
		// one before it, so only its bytes say whether it is this one (one
		// GET of a few hundred bytes).
		slot, err := a.repo.GetHead(ctx, s, f.Generation)
		if hasHead, err = readBackIs(slot, err, "title slot", func(b []byte) bool { return hashHex(b) == f.SlotHash }); err != nil {
			return err
		}
	}
	// again says what the remote lost (or kept an older copy of), which the
	// next sync uploads again.
	again := func(what string) {
		a.log.Warn("the remote "+what+"; uploading it again", "path", f.Path)
		f.Size = -1
		a.markDirty(f.Path)
	}
	if f.MetaUnconfirmed && metaObject {
		m, err := a.repo.GetMeta(ctx, s, f.Generation)
		named, err := readBackIs(m, err, "meta object", func(m repo.Meta) bool { return m.Path == f.MetaPath })
		if err != nil {
			return err
		}
		if !named {
			again("kept an older meta object than the one it acknowledged")
			f.MetaPath = ""
		}
		f.MetaUnconfirmed = false
	}
	if f.MetaObject && !metaObject && hasMeta {
		// The first chunk still makes the generation complete,
		// but names the path it had then; the meta object of the move
		// goes up again with the next sync.
		again("lost the meta object it had acknowledged")
		f.MetaPath, f.MetaObject = "", false
	}
	if f.HeadUnconfirmed && !hasHead {
		// The title slot put was lost: forget it was uploaded, so the next
		// sync puts it again.
		again("lost the title slot it had acknowledged")
		f.SlotHash = ""
	}
	f.HeadUnconfirmed = f.HeadUnconfirmed && !hasHead
	_, covered := repo.Cover(chunks)
	// Nothing uploaded yet (an empty file, or one without a whole line):
	// no chunk, and so no meta, is owed.
	if covered >= f.Offset && (hasMeta || f.Offset == 0) {
		f.Confirmed, f.ConfirmedAt = f.Offset, a.now().UTC()
		return nil
	}
	a.log.Warn("the remote lost objects it had acknowledged; uploading them again",
		"path", f.Path, "generation", f.Generation, "remote_has", covered, "uploaded", f.Offset, "meta", hasMeta)
	if !hasMeta {
		f.MetaPath = ""
	}
	f.SlotHash = "" // the head may be gone too: put it again
	return a.rewind(f, min(covered, f.Offset))
}

// withoutDamaged is g without the chunks Options.Damaged names, as if the
// remote had lost them, so that they are put again as lost ones are.
func (a *Agent) withoutDamaged(s repo.Stream, g repo.Generation) repo.Generation {
	if len(a.opts.Damaged) == 0 {
		return g
	}
	g.Chunks = slices.DeleteFunc(slices.Clone(g.Chunks), func(c repo.ChunkRef) bool { return a.opts.Damaged[s.ChunkKey(g.Name, c.Start, c.End)] })
	g.Complete()
	return g
}

// readBackIs says whether v, an object read back (err the read's, what
// it is), is the one last put (is): a missing one is not.
func readBackIs[T any](v T, err error, what string, is func(T) bool) (bool, error) {
	if errors.Is(err, remote.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read back the %s: %w", what, err)
	}
	return is(v), nil
}

// rewind sets the stream back to offset, recomputing the running hash from
// the local file (or an archived session's archive). Only a file that still
// holds every byte uploaded can fill the generation's hole: one that changed
// since (a merge, an edit the next scan has not seen) starts a new
// generation instead, so a generation's bytes never change once uploaded
// (other machines' reference chunks point at them).
func (a *Agent) rewind(f *FileState, offset int64) error {
	rel, archived := f.Path, f.State == repo.StateArchived
	if archived {
		rel = a.archiveOf(f)
	}
	src, _, err := a.openSource(rel, archived)
	if err != nil {
		return err
	}
	defer src.Close()
	defer a.markDirty(rel)
	f.Size, f.Inode = -1, 0 // force a full check on the next sync
	same, err := prefixMatches(src, f)
	if err != nil {
		return fmt.Errorf("re-hash %s: %w", f.Path, err)
	}
	if !same {
		return a.startGeneration(f, src, "the remote lost objects and the file changed since they were uploaded")
	}
	state, _, err := hashRange(src, f.HashFrom, max(offset, f.HashFrom))
	if err != nil {
		return fmt.Errorf("re-hash %s: %w", f.Path, err)
	}
	f.Offset, f.HashState, f.Confirmed = offset, state, offset
	f.rewound = offset == 0
	return nil
}

// archiveOf is where the archived session f lives: where its agent
// archives a session now, or else that path without its compression
// suffix when the store takes it for the same session's archive (older
// omp moved sessions into archive/ plain).
func (a *Agent) archiveOf(f *FileState) string {
	rel := a.opts.Store.ArchiveOf(f.Path)
	if _, err := os.Lstat(a.abs(rel)); err == nil || rel == "" {
		return rel
	}
	plain := strings.TrimSuffix(rel, path.Ext(rel))
	if id, live, ok := a.opts.Store.Archived(plain); ok && id == f.SessionID && live == f.Path {
		if _, err := os.Lstat(a.abs(plain)); err == nil {
			return plain
		}
	}
	return rel
}
