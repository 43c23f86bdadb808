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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ompsync/ompsync/openfiles"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// Merger merges one machine's copy of a session into the agent dir by
// restore's merge rule. Package restore provides it; the command layer
// wires it in, so the agent does not depend on restore.
type Merger interface {
	Merge(ctx context.Context, req MergeRequest) (Merged, error)
}

// MergeRequest names one machine's copy of a session to merge.
type MergeRequest struct {
	// Catalogs are every other machine's, read once per pull.
	Catalogs           []repo.Catalog
	Machine, SessionID string
	// OpenFiles says which processes hold files open, scanned once per
	// pull: a file omp holds is never changed.
	OpenFiles *openfiles.Snapshot
	// Local is the agent dir's session files by id, scanned once per pull
	// (not once per session); the merger adds the files it creates.
	Local *store.Local
}

// Merged is what a Merger did to one session.
type Merged struct {
	// Action is one of the Merge* constants.
	Action string
	// Path is the session file, relative to the agent dir.
	Path string
	// Bytes is how much was written.
	Bytes int64
	// Added is what a create or an append wrote after the title slot, as
	// written (omp may change the file at once): its range and hash.
	Added *Added
	// Source is the copy the bytes came from, for created and appended.
	Source *repo.ChunkSource
	Backup string
	// Problem says why a refused, failed or live merge did not happen.
	Problem string
	// Missing is what the backup holds that the merge did not write (a
	// blob the remote lost, an artifact that could not be placed).
	Missing []string
	// Cwd is the folder the session runs in here, Placed how it was
	// found; Notes say what else the user should know (a placement that
	// found no folder here, and what to set).
	Cwd, Placed string
	Notes       []string
}

// Added is a range of a session file's bytes, [Start, End), and their
// SHA-256 (hex).
type Added struct {
	Start, End int64
	SHA256     string
}

// Merge actions, as restore names them.
const (
	MergeCreated   = "created"
	MergeAppended  = "appended"
	MergeRetitled  = "retitled"
	MergeUnchanged = "unchanged"
	MergeMerged    = "merged"
	MergeLive      = "skipped-live"
	MergeRefused   = "refused"
	MergeFailed    = "failed"
	// MergeNotFetched: the remote did not answer; the pull is tried again.
	MergeNotFetched = "not-fetched"
)

// pull fetches what other machines uploaded since the last pull and merges
// it into the agent dir by restore's rule. Finding out what changed costs
// one LIST and one GET per machine; only changed sessions are read.
func (a *Agent) pull(ctx context.Context) error {
	cats, todo, unread, err := a.pullChanged(ctx)
	if !a.outage.once {
		// The running agent pulls the other machines on, and says it
		// now and then (problems.warn); one pass must not exit 0.
		unread = nil
	}
	if err != nil || len(todo) == 0 {
		return cmp.Or(err, unread)
	}
	open, err := store.ScanOpen(a.opts.Store)
	if err != nil {
		return fmt.Errorf("pull: cannot tell which processes hold session files open, so nothing is merged: %w", err)
	}
	local, err := store.ScanLocal(a.opts.Store, a.opts.AgentDir)
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	// Sessions are merged Parallel at once, each one's copies (one per
	// machine) in turn: the second merges into what the first wrote.
	byID := map[string][]pullItem{}
	for _, it := range todo {
		// Present here when the decision was made, gone from the index
		// taken since: deleted or moved meanwhile. The next scan decides;
		// a merge now would create it again. (A file that goes after the
		// index was taken makes its merge fail, and the pull retry.)
		if a.presentHere(it.entry.ID) && local.Find(it.entry.ID) == "" {
			continue
		}
		byID[it.entry.ID] = append(byID[it.entry.ID], it)
	}
	var mu sync.Mutex // the state, and what pulled records in it
	failed, live := 0, 0
	inParallel(a.opts.Parallel, slices.Sorted(maps.Keys(byID)), func(id string) {
		for _, it := range byID[id] {
			if ctx.Err() != nil {
				return
			}
			req := MergeRequest{Catalogs: cats, Machine: it.machine, SessionID: id, OpenFiles: open, Local: local}
			res, err := a.opts.Merger.Merge(ctx, req)
			mu.Lock()
			if err := a.recordMerge(ctx, req, res, err, it.sig); err != nil {
				failed++
			} else if res.Action == MergeLive {
				live++
			}
			mu.Unlock()
		}
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("pull: %d of %d sessions not merged (see above); the next pull tries them again: %w", failed, len(byID), errNotMerged)
	}
	if unread != nil {
		return unread
	}
	if live > 0 && a.outage.once {
		// The running agent merges them once released; one pass must not
		// say it brought in what it left on the remote.
		return fmt.Errorf("pull: %d of %d sessions are in use here and were not merged (see above): run again once they are closed", live, len(byID))
	}
	return nil
}

// pullItem is one machine's copy of a session that a pull merges.
type pullItem struct {
	machine string
	entry   repo.CatalogEntry
	sig     string
}

// pullChanged reads the other machines' catalogs and returns them, with
// this machine's own entry first, and the sessions in them that changed
// since they were last merged here; what needs no merge is recorded seen.
// unread names the machines whose catalog could not be read, and why.
func (a *Agent) pullChanged(ctx context.Context) (cats []repo.Catalog, todo []pullItem, unread, err error) {
	machines, err := a.repo.Machines(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pull: %w", err)
	}
	// This machine's own entry tells the placer which checkouts its
	// sessions ran in; restore reads only the machine asked for's entries.
	cats = []repo.Catalog{a.ownUses()}
	var skipped []string
	for _, m := range machines {
		if m == a.opts.Machine {
			continue
		}
		cat, err := a.repo.GetCatalog(ctx, m)
		if err != nil && ctx.Err() != nil {
			return nil, nil, nil, fmt.Errorf("pull: %w", err) // stopping: no catalog is unreadable
		}
		if err != nil {
			a.problems.warn(a.log, a.now(), "pull of "+m, "pull: cannot read a machine's catalog; its sessions are not pulled", err, "machine", m)
			skipped = append(skipped, m)
			unread = cmp.Or(unread, err)
			continue
		}
		a.problems.clear(a.log, "pull of "+m)
		for _, why := range cat.Refused {
			a.warnRefused("pull: a machine's catalog has a session that is refused", m, why)
		}
		cats = append(cats, cat)
		for _, e := range cat.Sessions {
			// The title is in the signature: a retitle changes no bytes
			// after the slot, and machines must still converge on it.
			sig := e.Generation + "/" + strconv.FormatInt(e.Size, 10) + "/" + e.State + "/" + e.Title
			key := m + "/" + e.ID
			if a.state.Seen[key] == sig {
				continue
			}
			switch {
			case e.State == repo.StateDeleted:
				// Deleted there: nothing here changes.
			case !a.pullIncluded(e):
			case a.deletedHere(e.ID):
				// Deleted here on purpose: not pulled back (restore can).
			case a.vanished(e.ID):
				// Gone since the last scan: deleted or moved. The next scan
				// decides; until then nothing is pulled into its place.
				continue
			default:
				todo = append(todo, pullItem{m, e, sig})
				continue
			}
			a.state.setSeen(key, sig)
		}
	}
	msg := ""
	if unread != nil {
		unread = fmt.Errorf("pull: the sessions of %s were not pulled: %w", strings.Join(skipped, ", "), unread)
		msg = unread.Error()
	}
	writeNote(filepath.Join(a.opts.StateDir, unpulledName), msg)
	return cats, todo, unread, nil
}

// recordMerge records in the state what one merge (res, err) did, and
// says it: the error it returns is the merge's, or recording's. A file in
// use (omp holds it open or is writing it) is merged by a later pull, once
// it is released.
func (a *Agent) recordMerge(ctx context.Context, req MergeRequest, res Merged, err error, sig string) error {
	id, machine := req.SessionID, req.Machine
	if err == nil && res.Action != MergeLive && a.pullWaiting[id] {
		delete(a.pullWaiting, id)
		a.log.Info("pull: session released; merging the work that waited", "session", id, "machine", machine)
	}
	switch act := res.Action; {
	case err != nil:
	case act == MergeLive:
		// Said once per session at INFO: a session open in omp for hours
		// is normal, and the work waits safely on the remote.
		a.log.Log(ctx, a.pullWaiting.level(id, slog.LevelInfo), "pull: waiting for the session to be released before merging another machine's work", "session", id, "machine", machine, "why", res.Problem)
	case act == MergeRefused || act == MergeFailed || act == MergeNotFetched:
		// Not marked seen (an error): the next pull tries it again.
		err = fmt.Errorf("%s: %s", act, res.Problem)
	case act == MergeUnchanged:
	case act == MergeRetitled:
		// Only the title slot changed; the next pass uploads it as this
		// machine's head like any retitle.
		a.log.Info("pull: took a newer title from another machine", "session", id, "machine", machine)
	case act == MergeMerged:
		a.log.Info("pull: merged work from another machine", "session", id, "machine", machine, "backup", res.Backup)
	case act == MergeCreated || act == MergeAppended:
		// The new bytes are exactly that machine's; recorded so that the
		// uploader stores a reference, not a second copy.
		a.log.Info("pull: session updated from another machine", "session", id, "machine", machine, "action", act, "bytes", res.Bytes)
		a.recordPulled(id, res)
	default:
		err = fmt.Errorf("unknown merge action %q: %s", act, res.Problem)
	}
	// Where a session new here was placed, and a note on it (no folder for
	// its project here, and what to set) once per note.
	if res.Action == MergeCreated && res.Placed != "" {
		a.log.Info("pull: placed a session from another machine", "session", id, "cwd", res.Cwd, "how", res.Placed)
	}
	for _, n := range res.Notes {
		a.log.Log(ctx, a.placeNoted.level(n, slog.LevelWarn), "pull: "+n, "session", id)
	}
	switch {
	case err != nil:
		a.log.Warn("pull: session not merged; will retry", "session", id, "machine", machine, "err", err)
	case len(res.Missing) > 0:
		// Not seen: the next pull tries again. Said once.
		a.log.Log(ctx, a.pullIncomplete.level(id, slog.LevelWarn), "pull: session merged, but part of what the backup holds was not written; will retry", "session", id, "machine", machine, "missing", strings.Join(res.Missing, "; "))
	case res.Action != MergeLive: // merged
		delete(a.pullIncomplete, id)
		a.state.setSeen(machine+"/"+id, sig)
	}
	return err
}

// ownUses is what this machine's catalog would say of the folders its
// sessions ran in, for placing other machines' sessions in the same
// checkouts.
func (a *Agent) ownUses() repo.Catalog {
	c := repo.Catalog{Machine: a.opts.Machine}
	for _, f := range a.state.Streams {
		if !f.isSession() || f.Cwd == "" || f.State != repo.StatePresent {
			continue
		}
		if p := a.projectOf(f.Cwd, nil); p != nil && p.Origin != "" {
			c.Sessions = append(c.Sessions, repo.CatalogEntry{ID: f.SessionID, Cwd: f.Cwd, Project: p, Mtime: f.UploadedMtime})
		}
	}
	return c
}

// errNotMerged: a pull left sessions unmerged, each said at WARN already.
var errNotMerged = errors.New("sessions not merged")

// warnRefused says once what a machine's catalog has wrong (a hostile or
// damaged catalog is read again at every pull), and at debug after that.
func (a *Agent) warnRefused(msg, machine, problem string) {
	lvl := a.pullRefused.level(machine+"\x00"+problem, slog.LevelWarn)
	a.log.Log(context.Background(), lvl, msg, "machine", machine, "problem", problem)
}

// deletedHere reports whether this machine's agent saw the session deleted.
func (a *Agent) deletedHere(id string) bool {
	f := a.state.Streams[streamKey(id, repo.SessionStream)]
	return f != nil && (f.State == repo.StateDeleted || f.State == repo.StateArchived)
}

// presentHere reports whether this machine's agent saw the session's file
// here and has not seen it go.
func (a *Agent) presentHere(id string) bool {
	f := a.state.Streams[streamKey(id, repo.SessionStream)]
	return f != nil && f.State == repo.StatePresent && !f.Unseen
}

// vanished reports whether a session this agent saw present has no file
// at its path any more.
func (a *Agent) vanished(id string) bool {
	if !a.presentHere(id) {
		return false // an unseen session is not on this machine: pull it
	}
	_, err := os.Lstat(a.abs(a.state.Streams[streamKey(id, repo.SessionStream)].Path))
	return isNotExist(err)
}

// pullIncluded applies sync.include / sync.exclude to the session's path
// and cwd.
func (a *Agent) pullIncluded(e repo.CatalogEntry) bool {
	match := func(globs []string) bool {
		for _, g := range globs {
			for _, s := range []string{e.Path, e.Cwd, path.Dir(e.Path)} {
				if ok, _ := path.Match(g, s); ok && s != "" {
					return true
				}
			}
		}
		return false
	}
	return (len(a.opts.PullInclude) == 0 || match(a.opts.PullInclude)) && !match(a.opts.PullExclude)
}

// recordPulled notes the range restore wrote as pulled from its source:
// the whole file after its title slot when it was created, else what was
// appended. Range and hash come from what restore wrote, not from the file,
// which omp may append to (its own work) or rewrite the moment it appears;
// restore hashed them as it wrote, so the session is never held here.
func (a *Agent) recordPulled(id string, res Merged) {
	if res.Source == nil || res.Added == nil || res.Added.Start >= res.Added.End {
		return
	}
	key := streamKey(id, repo.SessionStream)
	fst := a.state.Streams[key]
	if fst == nil {
		fst = &FileState{SessionID: id, Stream: repo.SessionStream, Path: res.Path, State: repo.StatePresent, Changed: a.now().UTC()}
		a.state.Streams[key] = fst
		a.byPath[res.Path] = key
	}
	a.state.touch(fst)
	fst.Pulled = append(fst.Pulled, PulledRange{Start: res.Added.Start, End: res.Added.End, Machine: res.Source.Machine, Generation: res.Source.Generation, SHA256: res.Added.SHA256})
	a.markDirty(res.Path)
}
