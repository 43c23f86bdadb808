package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/safename"
	"github.com/ompsync/ompsync/store"
)

// maxArchive bounds what an archived session may inflate to: what a
// stream may hold, as for the live file.
const maxArchive = repo.MaxStreamSize

// job is one unit of upload work found by a pass.
type job struct {
	kind store.Kind
	rel  string
	fst  *FileState // sessions, artifacts and archives
}

// pass finds what changed (everything, or the paths the watcher saw) and
// uploads it. It returns the first error; other files still go on. A full
// pass also fails when a path could not be read, or when most sessions
// vanished at once (recordMissing).
func (a *Agent) pass(ctx context.Context, full bool) error {
	start := a.now()
	rels, sc, err := a.passPaths(full)
	if err != nil {
		return err
	}
	if !full && len(rels) == 0 && !a.catalogStale && !a.heartbeatDue() {
		a.markUpToDate(start, false)
		return nil // idle: no stat, no encoding, no request
	}
	// The gauges follow every pass, failed ones included: an outage is
	// when they matter.
	defer a.updatePending()
	if a.ownerCheckDue() {
		if err := a.checkOwner(ctx); err != nil {
			// What this pass took is looked at by the next one.
			for _, rel := range rels {
				a.markDirty(rel)
			}
			if full {
				a.fullScan.Store(true)
			}
			if remote.IsTransient(err) {
				a.outage.failed(a.log, a.now(), err)
			}
			return err
		}
	}
	seen := map[string]bool{}
	var jobs []job
	known := len(a.state.Streams)
	for _, rel := range rels {
		if j, ok := a.plan(rel, seen); ok {
			jobs = append(jobs, j)
		}
	}
	// The repository may have been encrypted, or its keys changed, since
	// the last batch: its first put reads the marker again (an idle pass
	// reads nothing), and nothing goes up the old way.
	a.repo.RecheckBeforeWrite()
	a.listed = a.prefetchStale(ctx, jobs)
	changed, err := a.runJobs(ctx, jobs, a.firstPassProgress(full, jobs))
	a.listed = nil // this pass's view of the remote only
	if len(a.state.Streams) > known || a.replanned.Swap(false) {
		// Saved even when nothing could be uploaded, so status counts a
		// new file's pending age from when it was first seen.
		changed = true
	}
	if full {
		changed, err = a.endFullPass(ctx, seen, sc, changed, err)
	}
	if changed {
		a.catalogStale = true
		a.saveState("could not save state; the next start uploads the last batch again")
	}
	cerr := a.putCatalog(ctx)
	if errors.Is(cerr, ErrMachineInUse) {
		return cerr // Run stops with it, and says it
	}
	a.ended(ctx, "catalog of "+a.opts.Machine, "catalog upload failed; it is retried every pass", cerr)
	if err = cmp.Or(err, cerr); err == nil || a.refused.active() && !errors.Is(err, repo.ErrEncryptionMismatch) && a.repo.CheckWrite(ctx) == nil {
		// Took this machine's writes, or would now, whatever else of
		// the pass failed (a path that cannot be read).
		a.refused.ok(a.log)
	}
	if err == nil {
		a.markUpToDate(start, full)
		a.outage.ok(a.log, a.now())
	}
	return err
}

// passPaths is what a pass looks at: every path a scan finds (sc), or,
// in a pass that is not full, the paths the watcher saw.
func (a *Agent) passPaths(full bool) ([]string, *scanned, error) {
	if !full {
		return a.takeDirty(), nil, nil
	}
	a.problems.beginFullPass()
	// What a crashed process left in the temp folder goes: no temp file
	// is in use before the jobs, and the state dir's lock keeps other
	// processes out. On Unix there is never any: a temp file is unlinked
	// as soon as it is open. The folder stays: it may be a link to a
	// larger disk.
	tmp := filepath.Join(a.opts.StateDir, tempDirName)
	if des, err := os.ReadDir(tmp); err == nil {
		for _, de := range des {
			os.Remove(filepath.Join(tmp, de.Name()))
		}
	}
	sc, err := a.scan()
	if err != nil {
		return nil, nil, err
	}
	a.takeDirty()
	if a.sessionsGone && !sc.sessionsGone && a.fsw != nil {
		a.addTree(a.opts.AgentDir) // back (remounted): its watches went with it
	}
	a.sessionsGone = sc.sessionsGone
	return sc.rels, sc, nil
}

// endFullPass does what only a full pass does after its uploads, which
// ended with err: records what vanished and, when nothing failed, checks
// what the remote holds. It returns whether the state changed, and the
// pass's error.
func (a *Agent) endFullPass(ctx context.Context, seen map[string]bool, sc *scanned, changed bool, err error) (bool, error) {
	recorded, merr := a.recordMissing(seen, sc)
	changed = changed || recorded
	changed = err == nil && a.confirmUploads(ctx) || changed
	if err == nil {
		a.confirmCatalog(ctx)
	}
	a.confirmAll = false
	a.problems.endFullPass(a.log)
	if err = cmp.Or(err, merr); err == nil {
		err = a.problems.err()
	}
	return changed, err
}

// ended says how the work on what ended (err): a success clears what was
// warned of it; a remote away is the outage's to say, a refusal of the
// repository's encryption the refusal's, a stop nobody's; anything else
// is warned of (msg) as problems.warn says. It reports whether err stops
// all such work for now: the rest would fail alike.
func (a *Agent) ended(ctx context.Context, what, msg string, err error) (stop bool) {
	switch {
	case err == nil:
		a.problems.clear(a.log, what)
		return false
	case remote.IsTransient(err) || errors.Is(err, context.DeadlineExceeded):
		a.outage.failed(a.log, a.now(), err)
	case ctx.Err() != nil:
		// Stopping: nothing to say.
	case a.refused.report(a.log, err):
		// An encryption refusal, said by the refusal tracker.
	default:
		a.problems.warn(a.log, a.now(), what, msg, err)
		return false
	}
	return true
}

// firstPassProgress tells Options.Progress how the first full pass goes:
// the files it looks at and the bytes they hold past what is uploaded,
// now and after each job (the func it returns). Later passes are not
// reported.
func (a *Agent) firstPassProgress(full bool, jobs []job) func(job) {
	if !full || a.opts.Progress == nil || a.progressed {
		return nil
	}
	a.progressed = true
	p := PassProgress{FilesTotal: len(jobs)}
	pending := make(map[string]int64, len(jobs))
	for _, j := range jobs {
		if fi, err := os.Stat(a.abs(j.rel)); err == nil {
			n := fi.Size()
			if j.fst != nil && j.kind != store.KindArchive {
				n -= j.fst.Offset
			}
			pending[j.rel] = max(n, 0)
			p.BytesTotal += pending[j.rel]
		}
	}
	a.opts.Progress(p)
	return func(j job) { // called under runJobs' lock
		p.Files++
		p.Bytes += pending[j.rel]
		a.opts.Progress(p)
	}
}

// prefetchStale lists, with one listing of every session, the sessions of
// the jobs whose streams are to be checked against the remote before their
// first upload (checkStale) and have changed since the state saw them,
// when they are many: a new process's pass after appends to many sessions
// then costs one LIST page, not one LIST per session. Unchanged files cost
// a stat, as before, and no request.
func (a *Agent) prefetchStale(ctx context.Context, jobs []job) listing {
	ids := map[string]bool{}
	for _, j := range jobs {
		f := j.fst
		if f == nil || !f.stale || f.Generation == "" || j.kind == store.KindArchive {
			continue
		}
		fi, err := os.Stat(a.abs(f.Path))
		if err == nil && f.unchanged(fi) {
			continue // syncFile will not look at the remote
		}
		ids[f.SessionID] = true
	}
	return a.listSessions(ctx, ids)
}

// runJobs runs the jobs with bounded parallelism; after, if set, is
// called after each job, one at a time.
func (a *Agent) runJobs(ctx context.Context, jobs []job, after func(job)) (changed bool, firstErr error) {
	var mu sync.Mutex
	inParallel(a.opts.Parallel, jobs, func(j job) {
		res, err := a.runJob(ctx, j)
		mu.Lock()
		defer mu.Unlock()
		if after != nil {
			after(j)
		}
		changed = changed || res.changed
		if isNotExist(err) {
			a.fullScan.Store(true)
			return
		}
		a.tally.file(j.rel, res.objects > 0, err)
		if err != nil {
			a.markDirty(j.rel) // retried next pass
			a.metrics.uploadErrors.Inc()
			firstErr = cmp.Or(firstErr, err)
		}
		var re *remote.Error
		var pe *fs.PathError
		if err != nil && ctx.Err() == nil && !errors.As(err, &re) && (errors.As(err, &pe) || errors.Is(err, errPastLimit)) {
			// Unreadable here (EACCES, EIO), or too large: said once,
			// then now and then.
			a.problems.report(a.log, a.now(), a.abs(j.rel), err)
		} else {
			a.ended(ctx, "upload of "+j.rel, "upload failed; it is retried every pass", err)
		}
	})
	return changed, firstErr
}

func (a *Agent) runJob(ctx context.Context, j job) (syncResult, error) {
	switch j.kind {
	case store.KindBlob:
		return a.uploadBlob(ctx, j.rel)
	case store.KindArchive:
		return a.syncArchive(ctx, j)
	default:
		audit := j.fst.Generation != "" && a.now().Sub(j.fst.Verified) >= a.opts.AuditInterval
		res, err := a.syncFile(ctx, j.fst, audit)
		if res.objects > 0 {
			a.log.Debug("uploaded", "path", j.rel, "offset", j.fst.Offset, "objects", res.objects)
		}
		return res, err
	}
}

func (a *Agent) uploadBlob(ctx context.Context, rel string) (syncResult, error) {
	name := path.Base(rel)
	link := false
	if blob, _, ok := repo.BlobLink(name); ok {
		var err error
		if link, err = a.isBlobLink(rel, blob); err != nil {
			return syncResult{}, err
		}
	} else if !safename.SessionID(name) {
		a.log.Warn("blob name is not a safe object name; skipping", "path", rel)
		return syncResult{}, nil
	}
	var n int64
	var mtime time.Time // the blob's, as its stat gave it before the read
	if link {
		if err := a.repo.PutBlobLink(ctx, name); err != nil {
			return syncResult{}, fmt.Errorf("upload blob name %s: %w", name, err)
		}
	} else {
		var err error
		if n, mtime, err = a.putBlob(ctx, rel, name); err != nil {
			return syncResult{}, err
		}
		if !repo.BlobName(name) {
			mtime = time.Time{} // a name's mtime is its blob's
		}
	}
	a.metrics.uploaded(n, 1)
	a.state.setBlob(name, mtime)
	a.blobsToConfirm.Add(1)
	return syncResult{objects: 1, changed: true}, nil
}

// putBlob uploads the blob file at rel, streaming: sealed into a temp
// file of the state dir, then sent from it, so memory stays a few blocks
// however large the blob. A file that gives fewer bytes than its stat said
// changed under the agent: nothing is uploaded, the next pass looks again.
// It returns the bytes stored and the file's mtime as its stat gave it.
func (a *Agent) putBlob(ctx context.Context, rel, name string) (int64, time.Time, error) {
	src, fi, err := a.openSource(rel, false)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer src.Close()
	if fi.Size() > repo.MaxBlobSize {
		return 0, time.Time{}, fmt.Errorf("blob %s is %d bytes, %w (a blob: at most %d bytes); not backed up", rel, fi.Size(), errPastLimit, int64(repo.MaxBlobSize))
	}
	if a.beforeRead != nil {
		a.beforeRead(rel)
	}
	tmp, err := a.tempDir()
	if err != nil {
		return 0, time.Time{}, err
	}
	n, err := a.repo.PutBlobFrom(ctx, name, src, fi.Size(), tmp)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, repo.ErrBlobMismatch) {
		// omp may still be writing it: the next pass looks again.
		return 0, time.Time{}, fmt.Errorf("upload blob %s: %w (%w)", name, errFileChanged, err)
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("upload blob %s: %w", name, err)
	}
	return n, fi.ModTime(), nil
}

// tempDirName is the folder of the state dir that holds the agent's temp
// files: sealed blobs on their way up, inflated archives.
const tempDirName = "tmp"

// tempDir returns the folder for temp files, made if missing.
func (a *Agent) tempDir() (string, error) {
	dir := filepath.Join(a.opts.StateDir, tempDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// isBlobLink reports whether the file at rel, named "<sha256>.<ext>", is
// omp's image-viewer name for that blob: a hard link to it, or a copy where
// linking failed. Such a name is recorded as an empty object, since its
// bytes are the blob's; any other file is uploaded with its own bytes.
func (a *Agent) isBlobLink(rel, blob string) (bool, error) {
	fi, err := os.Stat(a.abs(rel))
	if err != nil {
		return false, err
	}
	if bfi, err := os.Stat(a.abs(store.BlobRel(blob))); err == nil && (os.SameFile(fi, bfi) || bfi.Size() != fi.Size()) {
		return os.SameFile(fi, bfi), nil // a link, or not a copy of the blob: nothing to hash
	}
	src, _, err := a.openSource(rel, false)
	if err != nil {
		return false, err
	}
	defer src.Close()
	_, sum, err := hashRange(src, 0, src.size())
	if errors.Is(err, errFileChanged) {
		return false, nil // it changed as it was read: uploaded as what it is now
	}
	return sum == blob, err
}

// syncArchive backs up an archived session from its gzip file: usually the
// remote already holds every byte and only the state changes.
func (a *Agent) syncArchive(ctx context.Context, j job) (syncResult, error) {
	a.state.touch(j.fst) // plan may have placed or moved it
	src, fi, err := a.openSource(j.rel, true)
	if err != nil {
		return syncResult{}, err
	}
	defer src.Close()
	fst := j.fst
	liveMtime := fst.UploadedMtime
	res, err := a.syncSource(ctx, fst, src, inodeOf(fi), fi.ModTime(), false, false)
	if err != nil {
		return res, err
	}
	if res.objects == 0 && !liveMtime.IsZero() {
		// Nothing new in the archive: restore gives back the mtime the
		// session had while live, not the time omp archived it.
		fst.UploadedMtime = liveMtime
	}
	if fst.State != repo.StateArchived {
		fst.State = repo.StateArchived
		fst.Changed = a.now().UTC()
		a.log.Info("session archived", "session", fst.SessionID, "archive", j.rel)
		a.tally.mu.Lock()
		a.tally.archived++
		a.tally.mu.Unlock()
	}
	fst.Size, fst.MtimeNs = fi.Size(), fi.ModTime().UnixNano()
	res.changed = true
	return res, nil
}

// readArchiveFile inflates the archive at p, named rel in errors, into a
// temp file in tmpDir, as st reads its archives. One
// that inflates past limit is an error: cut at the limit it would look
// like a shrunk session, start a new generation, and let retention delete
// the complete older one.
func readArchiveFile(st *store.Store, p, rel string, limit int64, tmpDir string) (*source, fs.FileInfo, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	zr, err := st.OpenArchive(rel, f, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("archived session %s: %w", rel, err)
	}
	defer zr.Close()
	tmp, err := os.CreateTemp(tmpDir, ".archive-*.jsonl")
	if err != nil {
		return nil, nil, err
	}
	// Unlinked at once where the system allows (Unix): a crash then leaves
	// nothing behind. On Windows that fails while it is open; Close removes it.
	os.Remove(tmp.Name())
	out := &source{File: tmp, temp: tmp.Name()}
	n, err := io.CopyBuffer(struct{ io.Writer }{tmp}, io.LimitReader(zr, limit+1), make([]byte, 256<<10))
	switch {
	case err != nil:
		err = fmt.Errorf("archived session %s: %w", rel, err)
	case n > limit:
		err = fmt.Errorf("archived session %s inflates past %d bytes, more than a session may hold; not backed up", rel, limit)
	}
	if err != nil {
		out.Close()
		return nil, nil, err
	}
	out.n = n
	return out, fi, nil
}

// A vanished tree is not a thousand deletions: when the sessions folder is
// gone, or at least vanishMin sessions went in one pass together with
// their folders and they are more than half of those present, the tree is
// taken to be gone (an unmounted disk, a wrong agent_dir), not its
// sessions deleted. Files that go from folders still there (omp's
// /delete, a user's rm) are deletions however many they are.
const vanishMin = 5

// ErrVanished means most sessions vanished at once; nothing was recorded.
var ErrVanished = errors.New("sessions vanished")

// recordMissing marks streams whose files disappeared: archived when an
// archive of the session was seen, else deleted. The remote keeps every
// byte. Only a file this state saw, that now does not exist, in a folder
// the scan could read, is deleted; a vanished tree records nothing
// (unless Options.ConfirmDeletions) and is an error.
func (a *Agent) recordMissing(seen map[string]bool, sc *scanned) (bool, error) {
	var gone []*FileState
	present, deleting, withFolder := 0, 0, 0
	folderGone := map[string]bool{}
	for _, fst := range a.state.Streams {
		if fst.State != repo.StatePresent || fst.Unseen || !a.included(fst.Path) {
			continue
		}
		if fst.isSession() {
			present++
		}
		if seen[fst.Path] || sc.under(fst.Path) {
			continue
		}
		if _, err := os.Lstat(a.abs(fst.Path)); err == nil {
			continue // appeared after the scan
		} else if !isNotExist(err) {
			a.problems.report(a.log, a.now(), a.abs(fst.Path), err)
			continue
		}
		dir := path.Dir(fst.Path)
		if _, known := folderGone[dir]; !known {
			_, err := os.Lstat(a.abs(dir))
			if err != nil && !isNotExist(err) {
				a.problems.report(a.log, a.now(), a.abs(dir), err)
				continue
			}
			folderGone[dir] = err != nil
		}
		gone = append(gone, fst)
		if fst.isSession() && !seen["archived:"+fst.SessionID] {
			deleting++
			if folderGone[dir] {
				withFolder++
			}
		}
	}
	vanished := deleting > 0 && (sc.sessionsGone || withFolder >= vanishMin && 2*withFolder > present)
	var verr error
	if vanished && !a.opts.ConfirmDeletions {
		sessions := a.abs(a.opts.Store.Roots()[0])
		where := fmt.Sprintf("%d of the %d sessions in %s, with their folders,", withFolder, present, sessions)
		if sc.sessionsGone {
			where = fmt.Sprintf("the sessions folder %s, with its %d sessions,", sessions, present)
		}
		verr = fmt.Errorf("%w: %s vanished in one pass; is the disk unmounted, or agent_dir wrong? Nothing is recorded as deleted. "+
			"If they were deleted on purpose, run 'ompsync agent --once --confirm-deletions'", ErrVanished, where)
		if a.now().Sub(a.vanishLogged) >= problemRelog {
			a.log.Error(verr.Error())
			a.vanishLogged = a.now()
		}
	} else {
		a.vanishLogged = time.Time{}
	}
	changed := false
	a.tally.mu.Lock()
	defer a.tally.mu.Unlock()
	a.tally.heldSessions = 0
	if verr != nil {
		a.tally.heldSessions = deleting
	}
	for _, fst := range gone {
		archived := fst.isSession() && seen["archived:"+fst.SessionID]
		if verr != nil && !archived {
			continue
		}
		if archived {
			fst.State = repo.StateArchived
			a.tally.archived++
		} else {
			fst.State = repo.StateDeleted
			if fst.isSession() {
				a.tally.deleted++
				a.log.Info("session deleted locally; its backup stays on the remote", "session", fst.SessionID, "path", fst.Path)
			}
		}
		fst.Changed = a.now().UTC()
		delete(a.byPath, fst.Path)
		a.state.touch(fst)
		changed = true
	}
	return changed, verr
}

// updatePending sets the pending gauges.
func (a *Agent) updatePending() { a.metrics.setPending(a.pendingBytes(false)) }

// pendingBytes is how many bytes of present files are not yet uploaded as
// of their last stat, or of now for the paths that wait for a pass (what
// changed while the remote was away), and since when the oldest of them
// has waited. all stats every present file, as when no pass has looked.
func (a *Agent) pendingBytes(all bool) (n int64, since time.Time) {
	a.mu.Lock()
	waiting := maps.Clone(a.dirty)
	a.mu.Unlock()
	for _, f := range a.state.Streams {
		// A stream nothing of which is uploaded may have no size recorded.
		if f.State != repo.StatePresent || !all && !waiting[f.Path] && f.Offset > 0 && f.Size >= 0 && f.Size <= f.Offset {
			continue
		}
		fi, err := os.Stat(a.abs(f.Path))
		if err != nil {
			continue
		}
		if d := fi.Size() - f.Offset; d > 0 {
			n += d
			if s := f.pendingSince(a.upToDate); !s.IsZero() && (since.IsZero() || s.Before(since)) {
				since = s
			}
		}
	}
	return n, since
}
