package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// seedFromCatalog brings back what this machine's catalog records when the
// local state does not know it (a lost state dir), so deletions and archives
// stay recorded and files already uploaded are adopted, not uploaded again.
func (a *Agent) seedFromCatalog(c repo.Catalog) {
	a.state.changed.all = true
	for _, e := range c.Sessions {
		a.cataloged[e.ID] = true
		key := streamKey(e.ID, repo.SessionStream)
		if _, ok := a.state.Streams[key]; ok {
			continue
		}
		// Not seen here yet: until its file is, its absence means "not on
		// this machine" (a new laptop), never a deletion.
		a.state.Streams[key] = &FileState{
			SessionID: e.ID, Stream: repo.SessionStream, Path: e.Path, Cwd: e.Cwd, Title: e.Title,
			Generation: e.Generation, Offset: e.Size, UploadedMtime: e.Mtime,
			State: e.State, Changed: e.Changed, Adopt: true, MetaPath: e.Path, Unseen: e.State == repo.StatePresent,
		}
		if e.State == repo.StatePresent {
			// Not yet seen on disk: a scan decides.
			a.byPath[e.Path] = key
		}
	}
}

// checkStale runs before the first upload of a stream the state was loaded
// with. The previous run may have uploaded past what it saved (killed, or
// its disk full, in between) and even started a newer generation:
// continuing from the state could put other bytes beside those already
// there, or leave the newer generation, which readers take, short. When
// the remote's newest generation is not exactly what the state says, the
// file is matched against it as after a lost state (adoptSource). One LIST
// per stream that changes after a start, or the pass's listing of every
// session when many do (prefetchStale); none for the others.
func (a *Agent) checkStale(ctx context.Context, fst *FileState, src *source) error {
	invs, ok := a.listed[fst.SessionID]
	if !ok {
		var err error
		if invs, err = a.repo.Inventory(ctx, fst.SessionID, a.opts.Machine); err != nil {
			return fmt.Errorf("check the remote copy of %s: %w", fst.Path, err)
		}
	}
	fst.stale = false
	g := newestOf(invs, fst)
	if g == nil {
		return nil
	}
	usable := a.withoutDamaged(fst.stream(a.opts.Machine), *g)
	if !usable.HasMeta {
		return nil // its first chunk damaged: confirm puts it again
	}
	g = &usable
	if _, covered := repo.Cover(g.Chunks); g.Name == fst.Generation && covered == fst.Offset {
		return nil
	}
	if fst.Offset == 0 && g.Name == fst.PrevGeneration {
		// A new generation not up yet, after the one it replaces:
		// the state is ahead of the remote, not behind it.
		return nil
	}
	a.log.Info("the remote copy is ahead of the saved state; matching the file against it", "path", fst.Path, "generation", fst.Generation, "offset", fst.Offset)
	a.adoptFrom(ctx, fst, src, g)
	return nil
}

// streamOf is f's stream in invs, a listing of its session: nil when the
// listing has none.
func streamOf(invs []*repo.StreamInventory, f *FileState) *repo.StreamInventory {
	i := slices.IndexFunc(invs, func(inv *repo.StreamInventory) bool { return inv.Stream.Name == f.Stream })
	if i < 0 {
		return nil
	}
	return invs[i]
}

// newestOf is the newest generation of f's stream in invs, or nil.
func newestOf(invs []*repo.StreamInventory, f *FileState) *repo.Generation {
	if inv := streamOf(invs, f); inv != nil {
		return inv.Newest()
	}
	return nil
}

// adoptSource continues the newest remote generation of fst when src still
// starts with exactly its bytes; otherwise fst starts a new generation.
func (a *Agent) adoptSource(ctx context.Context, fst *FileState, src *source) {
	invs, err := a.repo.Inventory(ctx, fst.SessionID, a.opts.Machine)
	if err != nil {
		a.log.Warn("cannot list the remote copy; uploading a new generation", "session", fst.SessionID, "err", err)
	}
	a.adoptFrom(ctx, fst, src, newestOf(invs, fst))
}

// adoptFrom continues generation g (the newest remote one, nil when there
// is none) when src still starts with exactly its bytes; otherwise fst
// starts a new generation.
func (a *Agent) adoptFrom(ctx context.Context, fst *FileState, src *source, g *repo.Generation) {
	fst.Adopt, fst.stale = false, false // matched against the remote just now
	fresh := func() {
		fst.Generation, fst.Offset, fst.HashState, fst.MetaPath = "", 0, nil, ""
	}
	if g == nil {
		fresh()
		return
	}
	picked, covered := repo.Cover(g.Chunks)
	if len(picked) == 0 || covered > src.size() {
		fresh()
		return
	}
	last := picked[len(picked)-1]
	s := fst.stream(a.opts.Machine)
	hdr, _, err := a.repo.GetChunk(ctx, s, g.Name, last.Start, last.End)
	if err != nil {
		fresh()
		return
	}
	state, sum, err := hashRange(src, hdr.HashFrom, covered)
	if err != nil || sum != hdr.StreamSHA256 {
		fresh() // not those bytes (or not readable): a new generation
		return
	}
	fst.Generation, fst.Offset, fst.HashFrom, fst.HashState = g.Name, covered, hdr.HashFrom, state
	// The listing showed it, so it needs no confirming LIST of its own.
	fst.Confirmed, fst.ConfirmedAt = covered, a.now().UTC()
	fst.SlotHash = "" // the head is checked (and stored if it differs) on the next sync
	fst.Size, fst.Inode = -1, 0
	fst.Verified = a.now().UTC()
	if th, err := tailHash(src, fst); err == nil {
		fst.TailHash = th
	}
	if meta, err := a.repo.GenerationMeta(ctx, s, g); err == nil {
		fst.MetaPath, fst.MetaObject = meta.Path, !g.MetaInChunk
		fst.HashFrom = meta.HashFrom
	}
	a.log.Info("resuming the remote copy", "session", fst.SessionID, "stream", fst.Stream, "generation", g.Name, "offset", covered)
}

// putCatalog tells the remote what this machine holds, when that changed.
// Entries that changed since the catalog was last written whole go into the
// small recent object; once they are many, the catalog is rewritten whole,
// followed by an empty recent object over it, so the recent object always
// names the last writer (checkOwner reads only it). Either way a reader sees
// the current entries. Once per heartbeat the recent object is put even
// when nothing changed: a running agent is seen to be running.
func (a *Agent) putCatalog(ctx context.Context) error {
	if a.catalogDeferred() {
		return nil // catalogStale stays set: a later pass puts it
	}
	var all, changed []repo.CatalogEntry
	for _, f := range a.state.Streams {
		if !f.isSession() || f.Generation == "" || f.Offset == 0 {
			continue
		}
		e := repo.CatalogEntry{
			ID: f.SessionID, Path: f.Path, Cwd: f.Cwd, Title: f.Title, Generation: f.Generation,
			Size: f.Offset, Mtime: f.UploadedMtime, State: f.State, Changed: f.Changed,
		}
		base, inBase := a.catBase.Get(e.ID)
		e.Project = a.projectOf(f.Cwd, base.Project)
		all = append(all, e)
		if !inBase || !sameEntry(base, e) {
			changed = append(changed, e)
		}
	}
	var blobs, newBlobs []repo.BlobEntry
	a.state.mu.Lock()
	for name, mtime := range a.state.BlobMtimes {
		if !a.state.Blobs[name] {
			continue // lost by the remote; back when uploaded again
		}
		b := repo.BlobEntry{Name: name, Mtime: mtime}
		blobs = append(blobs, b)
		if base, ok := a.catBlobs[name]; !ok || !base.Equal(mtime) {
			newBlobs = append(newBlobs, b)
		}
	}
	a.state.mu.Unlock()
	heartbeat := a.heartbeatDue()
	if heartbeat || a.ownerCheckDue() {
		// Read back who wrote last before writing over it: a heartbeat put
		// must not hide that another agent took the name.
		if err := a.checkOwner(ctx); err != nil {
			return err
		}
	}
	now := a.now().UTC()
	w := &repo.Writer{Instance: a.state.Instance, Host: a.opts.Hostname, HostID: a.opts.HostID, StateDir: a.opts.StateDir}
	recent := repo.Catalog{Machine: a.opts.Machine, Base: a.catBaseAt, Writer: w, Sessions: changed, Blobs: newBlobs}
	var body []byte
	// The catalog is rewritten whole when sessions left it, or when the
	// changes over it grow past a quarter of its size: until then each
	// interval puts only the small recent object.
	whole := a.catBase == nil || len(all) < a.catBase.Len() || len(changed) > max(256, a.catBase.Len()/8)
	if !whole {
		body = repo.EncodeRecent(recent, a.catBase)
		whole = len(body) > max(4<<10, a.catBaseBytes/4)
	}
	if whole {
		c := repo.Catalog{Machine: a.opts.Machine, Updated: now, Writer: w, Sessions: all, Blobs: blobs}
		if !a.catBaseAt.IsZero() && !now.After(a.catBaseAt) {
			c.Updated = a.catBaseAt.Add(time.Microsecond) // a new base, even on a coarse clock
		}
		n, err := a.repo.PutCatalog(ctx, c)
		if err != nil {
			return fmt.Errorf("upload catalog: %w", err)
		}
		c.Encoded = n
		a.setCatalogBase(c)
		a.catalogStale, a.catConfirmedAt = false, time.Time{}
		a.wrote(c.Updated)
		a.metrics.catalogUpdated()
		recent = repo.Catalog{Machine: a.opts.Machine, Base: c.Updated, Writer: w}
		body, now = repo.EncodeRecent(recent, a.catBase), c.Updated
	} else if bytes.Equal(body, a.catRecent) && !heartbeat {
		a.catalogStale = false
		return nil
	}
	recent.Updated = now
	if err := a.repo.PutRecent(ctx, recent, a.catBase); err != nil {
		return fmt.Errorf("upload catalog changes: %w", err)
	}
	a.catRecent, a.catRecentAt, a.catalogStale, a.catConfirmedAt = body, recent.Updated, false, time.Time{}
	a.wrote(recent.Updated)
	if !whole {
		a.metrics.catalogUpdated()
	}
	return nil
}

// catalogBatch is how many upload intervals a running agent lets pass
// between catalog puts while sessions keep changing. Readers need the
// catalog to find sessions and see them grow (pull reads it every 30 s by
// default), not within one interval as chunks are wanted; with 100
// sessions growing, one put per interval made most catalog bytes and
// requests, each carrying almost the same changes.
const catalogBatch = 5

// catalogDeferred says whether this pass's catalog changes wait for a later
// pass: only in Run's loop, only while a catalog is on the remote to amend,
// and only within catalogBatch intervals of the last put. The first change
// after a quiet spell goes up at once; a stop (flush) puts what waited.
func (a *Agent) catalogDeferred() bool {
	if !a.batchCatalog || a.catBase == nil || a.catWrittenAt.IsZero() {
		return false
	}
	wait := min(catalogBatch*time.Duration(a.interval.Load()), heartbeatEvery)
	return a.now().Sub(a.catWrittenAt) < wait
}

// setCatalogBase records c as the catalog last written whole; recent
// objects are written over it from now on.
func (a *Agent) setCatalogBase(c repo.Catalog) {
	a.catBase, a.catBaseAt, a.catRecent = repo.IndexCatalog(c.Sessions), c.Updated, nil
	a.catBaseBytes = c.Encoded
	a.catBlobs = make(map[string]time.Time, len(c.Blobs))
	for _, b := range c.Blobs {
		a.catBlobs[b.Name] = b.Mtime
	}
}

// confirmCatalog reads back, after a catalog put and once per audit
// interval, what the remote holds of this machine's catalog: the stamp of
// its recent changes (one small GET) and, when this agent rewrote it whole
// since it last looked, the catalog's. That a key exists is not enough: a
// put the remote acknowledged and lost leaves the object before it in
// place, and other machines would see this one's sessions as they were.
// A lost one is put again by the putCatalog that follows.
func (a *Agent) confirmCatalog(ctx context.Context) {
	if a.catBase == nil || !a.catConfirmedAt.IsZero() && !a.confirmDue(a.catConfirmedAt) {
		return // nothing put yet, or checked lately
	}
	// kept reads the stamp at key (the whole catalog's: base) back and
	// reports whether it is the one put (want). A lost one is said
	// (lostMsg), and put again by the putCatalog that follows.
	kept := func(key string, want time.Time, base bool, lostMsg string) bool {
		st, err := a.repo.CatalogStamp(ctx, key, a.opts.Machine)
		switch {
		case err != nil && !errors.Is(err, remote.ErrNotFound):
			a.log.Debug("could not read the catalog back; will check again", "err", err)
			return false
		case err == nil && a.foreign(st.Writer):
			// Another agent wrote it: not lost, taken; checkOwner says so
			// at the next pass.
			a.ownerCheckedAt = time.Time{}
			return false
		case err == nil && st.Updated.Equal(want):
			return true
		}
		a.log.Warn(lostMsg)
		if base {
			a.catBase = nil
		}
		a.catRecent, a.catalogStale = nil, true
		return false
	}
	if !a.catBaseRead.Equal(a.catBaseAt) {
		if !kept(repo.CatalogKey(a.opts.Machine), a.catBaseAt, true, "the remote lost this machine's catalog, or kept an older one; uploading it again") {
			return
		}
		a.catBaseRead = a.catBaseAt
	}
	if a.catRecent != nil && !kept(repo.RecentKey(a.opts.Machine), a.catRecentAt, false, "the remote lost this machine's recent catalog changes, or kept older ones; uploading them again") {
		return
	}
	a.catConfirmedAt = a.now()
}

// projectOf is the project of folder cwd, found once per folder: the
// repository it is in and where it is under the home. A folder no longer
// here keeps the repository its catalog entry recorded (was, if any).
func (a *Agent) projectOf(cwd string, was *project.ID) *project.ID {
	if cwd == "" {
		return nil
	}
	id, ok := a.projects[cwd]
	if !ok {
		id = project.Identify(cwd, a.opts.Home)
		a.projects[cwd] = id
	}
	if id.Origin == "" && was != nil && was.Origin != "" && was.Home == id.Home {
		return was
	}
	if id.Zero() {
		return nil
	}
	return &id
}

func sameEntry(a, b repo.CatalogEntry) bool {
	return a.ID == b.ID && a.Path == b.Path && a.Cwd == b.Cwd && a.Title == b.Title &&
		(a.Project == nil) == (b.Project == nil) && (a.Project == nil || *a.Project == *b.Project) &&
		a.Generation == b.Generation && a.Size == b.Size && a.Mtime.Equal(b.Mtime) &&
		a.State == b.State && a.Changed.Equal(b.Changed)
}
