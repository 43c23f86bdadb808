package agent

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/session"
)

var listAll = remote.ListOptions{}

// maxArchive bounds what an archived session may inflate to.
const maxArchive = 1 << 30

// job is one unit of upload work found by a pass.
type job struct {
	kind session.Kind
	rel  string
	fst  *FileState // sessions, artifacts and archives
}

// pass finds what changed (everything, or the paths the watcher saw) and
// uploads it. It returns the first error; other files still go on.
func (a *Agent) pass(ctx context.Context, full bool) error {
	var rels []string
	if full {
		var err error
		rels, err = a.scan()
		if err != nil {
			return err
		}
		a.takeDirty()
	} else {
		rels = a.takeDirty()
		sort.Strings(rels)
	}
	if !full && len(rels) == 0 && !a.catalogStale {
		return nil // idle: no stat, no encoding, no request
	}
	seen := map[string]bool{}
	var jobs []job
	for _, rel := range rels {
		if j, ok := a.plan(ctx, rel, seen); ok {
			jobs = append(jobs, j)
		}
	}
	changed, err := a.runJobs(ctx, jobs)
	if full {
		if a.recordMissing(seen) {
			changed = true
		}
		if err == nil && a.confirmUploads(ctx) {
			changed = true
		}
	}
	if changed {
		a.catalogStale = true
		if serr := a.state.save(a.opts.StateDir); serr != nil {
			a.log.Error("could not save state; the next start uploads the last batch again", "err", serr)
		}
	}
	if cerr := a.putCatalog(ctx); cerr != nil {
		if remote.IsTransient(cerr) {
			a.outage.failed(a.log, cerr)
		} else if ctx.Err() == nil {
			a.log.Error("catalog upload failed", "err", cerr)
		}
		if err == nil {
			err = cerr
		}
	}
	a.metrics.pending(a.pendingBytes())
	if err == nil {
		a.outage.ok(a.log)
	}
	return err
}

// scan walks the agent dir for everything that is backed up.
func (a *Agent) scan() ([]string, error) {
	var out []string
	for _, top := range []string{"sessions", "blobs", "archive/sessions"} {
		root := a.abs(top)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == root && isNotExist(err) {
					return filepath.SkipDir
				}
				a.log.Warn("cannot read; skipping", "path", p, "err", err)
				if d != nil && d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			rel, ok := a.relOf(p)
			if !ok {
				return nil
			}
			if d.IsDir() {
				if p != root && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			// Symlinks are never followed: they could point outside.
			if d.Type()&fs.ModeType != 0 {
				return nil
			}
			if session.Classify(rel) != session.KindIgnored && a.included(rel) {
				out = append(out, rel)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", root, err)
		}
	}
	return out, nil
}

// included applies the include and exclude globs.
func (a *Agent) included(rel string) bool {
	match := func(globs []string) bool {
		for _, g := range globs {
			if ok, _ := path.Match(g, rel); ok {
				return true
			}
			// A glob naming a folder covers what is inside it.
			for d := path.Dir(rel); d != "."; d = path.Dir(d) {
				if ok, _ := path.Match(g, d); ok {
					return true
				}
			}
		}
		return false
	}
	if len(a.opts.Include) > 0 && !match(a.opts.Include) {
		return false
	}
	return !match(a.opts.Exclude)
}

// plan maps a changed path to upload work, resolving which stream it feeds.
func (a *Agent) plan(ctx context.Context, rel string, seen map[string]bool) (job, bool) {
	kind := session.Classify(rel)
	if kind == session.KindIgnored || !a.included(rel) {
		return job{}, false
	}
	fi, err := os.Lstat(a.abs(rel))
	if err != nil || !fi.Mode().IsRegular() {
		if err == nil || isNotExist(err) {
			a.markFullScan() // gone or replaced: a scan decides move, archive or delete
		}
		return job{}, false
	}
	seen[rel] = true
	switch kind {
	case session.KindBlob:
		if a.state.Blobs[path.Base(rel)] {
			return job{}, false
		}
		return job{kind: kind, rel: rel}, true
	case session.KindSession, session.KindArtifact:
		fst := a.streamFor(ctx, rel, kind)
		if fst == nil {
			return job{}, false
		}
		return job{kind: kind, rel: rel, fst: fst}, true
	case session.KindArchive:
		id, ok := session.IDFromFileName(rel)
		if !ok {
			return job{}, false
		}
		seen["archived:"+id] = true
		fst := a.state.Streams[streamKey(id, repo.SessionStream)]
		if fst != nil && fst.State == repo.StatePresent {
			if _, err := os.Stat(a.abs(fst.Path)); err == nil {
				return job{}, false // the live file is the source while it exists
			}
		}
		if fst != nil && fst.State == repo.StateArchived && fst.Size == fi.Size() && fst.MtimeNs == fi.ModTime().UnixNano() {
			return job{}, false
		}
		if fst == nil {
			parts := strings.Split(rel, "/") // archive/sessions/<cwd-dir>/<name>.jsonl.gz
			fst = &FileState{SessionID: id, Stream: repo.SessionStream, Path: "sessions/" + parts[2] + "/" + strings.TrimSuffix(parts[3], ".gz"), State: repo.StateArchived, Changed: a.now().UTC()}
			a.state.Streams[streamKey(id, repo.SessionStream)] = fst
		}
		return job{kind: kind, rel: rel, fst: fst}, true
	}
	return job{}, false
}

// streamFor finds or creates the state of the stream a session or artifact
// file feeds. A session is known by its id, so a file that moved to another
// cwd-dir keeps its stream.
func (a *Agent) streamFor(ctx context.Context, rel string, kind session.Kind) *FileState {
	if k, ok := a.byPath[rel]; ok {
		if fst := a.state.Streams[k]; fst != nil && fst.Path == rel {
			if fst.Adopt {
				a.adopt(ctx, fst)
			}
			return fst
		}
	}
	var id, stream string
	parts := strings.Split(rel, "/")
	if kind == session.KindSession {
		id = a.sessionID(rel)
		stream = repo.SessionStream
	} else {
		var ok bool
		id, ok = session.IDFromFileName(parts[2])
		if !ok {
			return nil
		}
		stream = repo.ArtifactStream(strings.Join(parts[3:], "/"))
	}
	if id == "" {
		a.log.Warn("not an omp session file (no session id in its header or name); skipping", "path", rel)
		return nil
	}
	key := streamKey(id, stream)
	fst := a.state.Streams[key]
	switch {
	case fst == nil:
		// A stream of a session this machine's catalog lists may already be
		// on the remote (the state was lost): match it before uploading.
		fst = &FileState{SessionID: id, Stream: stream, Path: rel, State: repo.StatePresent, Changed: a.now().UTC(), Adopt: a.cataloged[id]}
		a.state.Streams[key] = fst
	case fst.Path != rel:
		if fst.State == repo.StatePresent {
			if _, err := os.Stat(a.abs(fst.Path)); err == nil {
				a.log.Warn("two files hold the same session id; backing up the first only", "session", id, "path", fst.Path, "ignored", rel)
				return nil
			}
		}
		if fst.State == repo.StatePresent {
			a.log.Info("session moved", "session", id, "from", fst.Path, "to", rel)
		}
		delete(a.byPath, fst.Path)
		fst.Path = rel
		fst.Changed = a.now().UTC()
		fst.State = repo.StatePresent
	case fst.State != repo.StatePresent:
		fst.State = repo.StatePresent
		fst.Changed = a.now().UTC()
	}
	a.byPath[rel] = key
	if fst.Adopt {
		a.adopt(ctx, fst)
	}
	return fst
}

// sessionID reads a session's id from its header, or else from its name.
func (a *Agent) sessionID(rel string) string {
	f, err := os.Open(a.abs(rel))
	if err == nil {
		defer f.Close()
		b := make([]byte, 8<<10)
		n, _ := io.ReadFull(f, b)
		if h, _, err := session.ReadHeader(b[:n]); err == nil && session.ValidID(h.ID) {
			return h.ID
		}
	}
	if id, ok := session.IDFromFileName(rel); ok {
		return id
	}
	return ""
}

// runJobs runs the jobs with bounded parallelism.
func (a *Agent) runJobs(ctx context.Context, jobs []job) (changed bool, firstErr error) {
	var mu sync.Mutex
	sem := make(chan struct{}, a.opts.Parallel)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := a.runJob(ctx, j)
			mu.Lock()
			defer mu.Unlock()
			if res.changed {
				changed = true
			}
			if err == nil {
				return
			}
			if isNotExist(err) {
				a.markFullScan()
				return
			}
			a.markDirty(j.rel) // retried next pass
			a.metrics.failed()
			if remote.IsTransient(err) || errors.Is(err, context.DeadlineExceeded) {
				a.outage.failed(a.log, err)
			} else if ctx.Err() == nil {
				a.log.Error("upload failed", "path", j.rel, "err", err)
			}
			if firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	return changed, firstErr
}

func (a *Agent) runJob(ctx context.Context, j job) (syncResult, error) {
	switch j.kind {
	case session.KindBlob:
		return a.uploadBlob(ctx, j.rel)
	case session.KindArchive:
		return a.syncArchive(ctx, j)
	default:
		res, err := a.syncFile(ctx, j.fst, a.auditDue(j.fst))
		if res.objects > 0 {
			a.log.Debug("uploaded", "path", j.rel, "offset", j.fst.Offset, "objects", res.objects)
		}
		return res, err
	}
}

func (a *Agent) auditDue(fst *FileState) bool {
	return fst.Generation != "" && a.now().Sub(fst.Verified) >= a.opts.AuditInterval
}

func (a *Agent) uploadBlob(ctx context.Context, rel string) (syncResult, error) {
	name := path.Base(rel)
	if !session.ValidID(name) {
		a.log.Warn("blob name is not a safe object name; skipping", "path", rel)
		return syncResult{}, nil
	}
	data, err := os.ReadFile(a.abs(rel))
	if err != nil {
		return syncResult{}, err
	}
	n, err := a.repo.PutBlob(ctx, name, data)
	if err != nil {
		return syncResult{}, fmt.Errorf("upload blob %s: %w", name, err)
	}
	a.metrics.uploaded(int64(n), 1)
	a.state.setBlob(name)
	return syncResult{bytes: int64(n), objects: 1, changed: true}, nil
}

// syncArchive backs up an archived session from its gzip file: usually the
// remote already holds every byte and only the state changes.
func (a *Agent) syncArchive(ctx context.Context, j job) (syncResult, error) {
	f, err := os.Open(a.abs(j.rel))
	if err != nil {
		return syncResult{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return syncResult{}, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		return syncResult{}, fmt.Errorf("archived session %s: %w", j.rel, err)
	}
	data, err := io.ReadAll(io.LimitReader(zr, maxArchive))
	if err != nil {
		return syncResult{}, fmt.Errorf("archived session %s: %w", j.rel, err)
	}
	fst := j.fst
	if fst.Adopt {
		a.adoptSource(ctx, fst, memSource{bytes.NewReader(data)})
	}
	res, err := a.syncSource(ctx, fst, memSource{bytes.NewReader(data)}, inodeOf(fi), fi.ModTime(), false, false)
	if err != nil {
		return res, err
	}
	if fst.State != repo.StateArchived {
		fst.State = repo.StateArchived
		fst.Changed = a.now().UTC()
		a.log.Info("session archived", "session", fst.SessionID, "archive", j.rel)
	}
	fst.Size, fst.MtimeNs = fi.Size(), fi.ModTime().UnixNano()
	res.changed = true
	return res, nil
}

// recordMissing marks streams whose files disappeared: archived when an
// archive of the session was seen, else deleted. The remote keeps every byte.
func (a *Agent) recordMissing(seen map[string]bool) bool {
	changed := false
	for _, fst := range a.state.Streams {
		if fst.State != repo.StatePresent || seen[fst.Path] {
			continue
		}
		if !a.included(fst.Path) {
			continue
		}
		if _, err := os.Lstat(a.abs(fst.Path)); err == nil {
			continue // appeared after the scan
		}
		if fst.isSession() && seen["archived:"+fst.SessionID] {
			fst.State = repo.StateArchived
		} else {
			fst.State = repo.StateDeleted
			if fst.isSession() {
				a.log.Info("session deleted locally; its backup stays on the remote", "session", fst.SessionID, "path", fst.Path)
			}
		}
		fst.Changed = a.now().UTC()
		delete(a.byPath, fst.Path)
		changed = true
	}
	return changed
}

// seedFromCatalog brings back what this machine's catalog records when the
// local state does not know it (a lost state dir), so deletions and archives
// stay recorded and files already uploaded are adopted, not uploaded again.
func (a *Agent) seedFromCatalog(c repo.Catalog) {
	for _, e := range c.Sessions {
		a.cataloged[e.ID] = true
		key := streamKey(e.ID, repo.SessionStream)
		if _, ok := a.state.Streams[key]; ok {
			continue
		}
		a.state.Streams[key] = &FileState{
			SessionID: e.ID, Stream: repo.SessionStream, Path: e.Path, Cwd: e.Cwd, Title: e.Title,
			Generation: e.Generation, Offset: e.Size, UploadedMtime: e.Mtime,
			State: e.State, Changed: e.Changed, Adopt: true, MetaPath: e.Path,
		}
		if e.State == repo.StatePresent {
			// Not yet seen on disk: a scan decides.
			a.byPath[e.Path] = key
		}
	}
}

// adopt matches a stream the state lost against the remote; see adoptSource.
func (a *Agent) adopt(ctx context.Context, fst *FileState) {
	f, err := os.Open(a.abs(fst.Path))
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return
	}
	a.adoptSource(ctx, fst, fileSource{f, fi.Size()})
}

// adoptSource continues the newest remote generation of fst when src still
// starts with exactly its bytes; otherwise fst starts a new generation.
func (a *Agent) adoptSource(ctx context.Context, fst *FileState, src source) {
	fst.Adopt = false
	fresh := func() {
		fst.Generation, fst.Offset, fst.HashState, fst.MetaPath = "", 0, nil, ""
	}
	invs, err := a.repo.Inventory(ctx, fst.SessionID, a.opts.Machine)
	if err != nil {
		a.log.Warn("cannot list the remote copy; uploading a new generation", "session", fst.SessionID, "err", err)
		fresh()
		return
	}
	var g *repo.Generation
	for _, inv := range invs {
		if inv.Stream.Name == fst.Stream {
			g = inv.Newest()
		}
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
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(src, hdr.HashFrom, covered-hdr.HashFrom)); err != nil {
		fresh()
		return
	}
	if fmt.Sprintf("%x", h.Sum(nil)) != hdr.StreamSHA256 {
		fresh()
		return
	}
	state, _ := h.(encoding.BinaryMarshaler).MarshalBinary()
	fst.Generation, fst.Offset, fst.HashFrom, fst.HashState = g.Name, covered, hdr.HashFrom, state
	fst.SlotHash = "" // the head is checked (and stored if it differs) on the next sync
	fst.Size, fst.Inode = -1, 0
	fst.Verified = a.now().UTC()
	if th, err := tailHash(src, fst); err == nil {
		fst.TailHash = th
	}
	if meta, err := a.repo.GetMeta(ctx, s, g.Name); err == nil {
		fst.MetaPath = meta.Path
		fst.HashFrom = meta.HashFrom
	}
	a.log.Info("resuming the remote copy", "session", fst.SessionID, "stream", fst.Stream, "generation", g.Name, "offset", covered)
}

// putCatalog uploads this machine's catalog when what it lists changed.
func (a *Agent) putCatalog(ctx context.Context) error {
	c := repo.Catalog{Machine: a.opts.Machine}
	for _, f := range a.state.Streams {
		if !f.isSession() || f.Generation == "" || f.Offset == 0 {
			continue
		}
		c.Sessions = append(c.Sessions, repo.CatalogEntry{
			ID: f.SessionID, Path: f.Path, Cwd: f.Cwd, Title: f.Title, Generation: f.Generation,
			Size: f.Offset, Mtime: f.UploadedMtime, State: f.State, Changed: f.Changed,
		})
	}
	body := repo.EncodeCatalog(c)
	if bytes.Equal(body, a.catalog) {
		a.catalogStale = false
		return nil
	}
	c.Updated = a.now().UTC()
	if err := a.repo.PutCatalog(ctx, c); err != nil {
		return fmt.Errorf("upload catalog: %w", err)
	}
	a.catalog, a.catalogStale = body, false
	a.metrics.catalogUpdated()
	return nil
}

// pendingBytes is how many bytes of present files are not yet uploaded as
// of their last stat, and since when the oldest of them has waited.
func (a *Agent) pendingBytes() (n int64, since time.Time) {
	for _, f := range a.state.Streams {
		if f.State != repo.StatePresent || f.Size >= 0 && f.Size <= f.Offset {
			continue
		}
		fi, err := os.Stat(a.abs(f.Path))
		if err != nil {
			continue
		}
		if d := fi.Size() - f.Offset; d > 0 {
			n += d
			if since.IsZero() || f.SyncedAt.Before(since) {
				since = f.SyncedAt
			}
		}
	}
	return n, since
}
