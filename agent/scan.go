package agent

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// scanned is what a full scan found: the files to back up, the folders it
// could not read (nothing under them is taken to be gone), and whether the
// sessions folder (the store's first root) itself is missing.
type scanned struct {
	rels         []string
	unreadable   map[string]bool // rel paths of folders
	sessionsGone bool
}

// under reports whether rel lies in a folder the scan could not read.
func (s *scanned) under(rel string) bool {
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if s.unreadable[d] {
			return true
		}
	}
	return s.unreadable["."]
}

// scan walks the agent dir for everything that is backed up. Anything it
// cannot read, other than what does not exist, is reported (a.problems).
// A root that is a symlink (a sessions folder moved to another disk) is
// followed, as an agent dir that is one is; inside, no symlink is (one
// could loop, or lead out of the tree), but each is counted and named once.
func (a *Agent) scan() (*scanned, error) {
	res := &scanned{unreadable: map[string]bool{}}
	if _, err := os.Stat(a.opts.AgentDir); err != nil && !isNotExist(err) {
		a.problems.report(a.log, a.now(), a.opts.AgentDir, err)
		res.unreadable["."] = true
		return res, nil
	}
	roots := a.opts.Store.Roots()
	links := 0
	for _, top := range roots {
		root := a.abs(top)
		target, err := filepath.EvalSymlinks(root)
		switch {
		case isNotExist(err):
			// A root that is not there (only the sessions folder must be),
			// or a symlink to nothing.
			if top == roots[0] {
				res.sessionsGone = true
			}
			continue
		case err != nil:
			a.problems.report(a.log, a.now(), root, err)
			if rel, ok := a.relOf(root); ok {
				res.unreadable[rel] = true
			}
			continue
		}
		err = filepath.WalkDir(target, func(p string, d fs.DirEntry, err error) error {
			p = root + p[len(target):] // the path under the agent dir
			if err != nil {
				if !isNotExist(err) {
					a.problems.report(a.log, a.now(), p, err)
					if rel, ok := a.relOf(p); ok && (d == nil || d.IsDir()) {
						res.unreadable[rel] = true
					}
				} else if p == root && top == roots[0] {
					res.sessionsGone = true // gone between the listing and now
				}
				if p == root || d != nil && d.IsDir() {
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
			if d.Type()&fs.ModeSymlink != 0 {
				if a.linkMatters(p, rel) {
					links++
					a.linkSeen(rel)
				}
				return nil
			}
			if d.Type()&fs.ModeType != 0 {
				return nil // a socket, a fifo, a device
			}
			if a.opts.Store.Classify(rel) != store.KindIgnored && a.included(rel) {
				res.rels = append(res.rels, rel)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", root, err)
		}
	}
	a.tally.mu.Lock()
	a.tally.links = links
	a.tally.mu.Unlock()
	a.scanFound = len(res.rels)
	return res, nil
}

// linkMatters reports whether the symlink at p (rel) stands where a backed-up
// file or a folder of them would: those are worth saying are not followed;
// a link named like no file the store keeps, or excluded, is not.
func (a *Agent) linkMatters(p, rel string) bool {
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return !matches(a.opts.Exclude, rel) // a folder: the include globs name files
	}
	return a.opts.Store.Classify(rel) != store.KindIgnored && a.included(rel)
}

// linkSeen says once per path that a symlink is not followed.
func (a *Agent) linkSeen(rel string) {
	a.mu.Lock()
	first := a.linksSaid.first(rel)
	a.mu.Unlock()
	if first {
		a.log.Warn("not following a symlink: what it points to is not backed up; move the files into the agent dir (or exclude the path)", "path", rel)
	}
}

// checkLayout refuses an agent dir one level too high: no sessions folder
// in it, but one in its agent/ folder (agent_dir=~/.omp for ~/.omp/agent),
// where nothing would ever be backed up.
func checkLayout(dir string, st *store.Store) error {
	top := st.Roots()[0]
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(top))); !isNotExist(err) {
		return nil
	}
	below := filepath.Join(dir, "agent")
	if fi, err := os.Stat(filepath.Join(below, filepath.FromSlash(top))); err != nil || !fi.IsDir() {
		return nil
	}
	key := dirKey(st)
	return fmt.Errorf("%s %s has no %s/ folder, but %s exists: did you mean %s=%s?",
		key, dir, top, filepath.Join(below, filepath.FromSlash(top)), key, below)
}

// noSessionsFolder is the error of a pass that found no sessions folder at
// all, and so nothing to back up.
func (a *Agent) noSessionsFolder() error {
	top := a.opts.Store.Roots()[0]
	return fmt.Errorf("%s %s has no %s/ folder: nothing was backed up. Is %s right, or its disk not mounted? (%s makes the folder with its first session)",
		dirKey(a.opts.Store), a.opts.AgentDir, top, dirKey(a.opts.Store), a.opts.Store.Name())
}

// dirKey names the setting of a store's folder, for messages.
func dirKey(st *store.Store) string {
	if st.Name() == repo.DefaultAgent {
		return "agent_dir"
	}
	return st.Name() + ".dir"
}

// included applies the include and exclude globs.
func (a *Agent) included(rel string) bool {
	return (len(a.opts.Include) == 0 || matches(a.opts.Include, rel)) && !matches(a.opts.Exclude, rel)
}

// matches says whether one of globs names rel or, as a glob naming a
// folder covers what is inside it, a folder rel is in.
func matches(globs []string, rel string) bool {
	for _, g := range globs {
		for d := rel; d != "."; d = path.Dir(d) {
			if ok, _ := path.Match(g, d); ok {
				return true
			}
		}
	}
	return false
}

// plan maps a changed path to upload work, resolving which stream it feeds.
func (a *Agent) plan(rel string, seen map[string]bool) (job, bool) {
	kind := a.opts.Store.Classify(rel)
	if kind == store.KindIgnored || !a.included(rel) {
		return job{}, false
	}
	fi, err := os.Lstat(a.abs(rel))
	if err != nil && !isNotExist(err) {
		a.problems.report(a.log, a.now(), a.abs(rel), err)
		seen[rel] = true // not readable is not gone
		return job{}, false
	}
	if err != nil || !fi.Mode().IsRegular() {
		a.fullScan.Store(true) // gone or replaced: a scan decides move, archive or delete
		return job{}, false
	}
	seen[rel] = true
	switch kind {
	case store.KindBlob:
		if name := path.Base(rel); a.state.Blobs[name] {
			if t, ok := a.state.BlobMtimes[name]; (!ok || !t.Equal(fi.ModTime())) && repo.BlobName(name) {
				// omp writes a blob again when it stores the same bytes
				// again (a fork), and agents before blob mtimes recorded
				// none: the catalog learns the mtime, with nothing
				// uploaded, since the name is the bytes' hash.
				a.state.setBlob(name, fi.ModTime())
			}
			return job{}, false
		}
		return job{kind: kind, rel: rel}, true
	case store.KindSession, store.KindArtifact:
		// Known by its path, else by its session id (placeStream), so a
		// file that moved to another cwd-dir keeps its stream; a stream
		// not present (archived, the file back from its archive) is
		// placed again, as live.
		fst := a.state.Streams[a.byPath[rel]]
		if fst == nil || fst.Path != rel || fst.State != repo.StatePresent {
			fst = a.placeStream(rel, kind)
		}
		if fst == nil {
			return job{}, false
		}
		fst.Unseen = false // seen here: from now on, gone means deleted
		return job{kind: kind, rel: rel, fst: fst}, true
	case store.KindArchive:
		id, livePath, ok := a.opts.Store.Archived(rel)
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
		if fst != nil && fst.State == repo.StateArchived && fst.Size == fi.Size() && fst.MtimeNs == fi.ModTime().UnixNano() && !fst.Adopt {
			fst.Unseen = false
			return job{}, false
		}
		if fst == nil {
			fst = &FileState{SessionID: id, Stream: repo.SessionStream, Path: livePath, State: repo.StateArchived, Changed: a.now().UTC()}
			a.state.Streams[streamKey(id, repo.SessionStream)] = fst
		}
		fst.Unseen = false
		if fst.Path != livePath {
			// Moved, then archived before a scan saw the move: the archive
			// says where it last lived.
			delete(a.byPath, fst.Path)
			fst.Path, fst.Changed = livePath, a.now().UTC()
		}
		return job{kind: kind, rel: rel, fst: fst}, true
	}
	return job{}, false
}

// placeStream finds the stream of a file at a path the state does not
// know it at, by its session id: new, moved, or back from a restore.
func (a *Agent) placeStream(rel string, kind store.Kind) *FileState {
	var id, stream string
	if kind == store.KindSession {
		id = a.opts.Store.SessionID(rel, store.ReadHead(a.abs(rel))) // from its first bytes, or else its name
		stream = repo.SessionStream
	} else {
		var inner string
		var ok bool
		if id, inner, ok = a.opts.Store.Artifact(rel); !ok {
			return nil
		}
		stream = repo.ArtifactStream(inner)
	}
	if id == "" {
		a.log.Warn("not a session file of "+a.opts.Store.Name()+" (no session id in it or its name); skipping", "path", rel)
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
				// An artifact both in the sessions folder and in the archive
				// (a session restored over its archive): the live one is
				// the source, quietly, as a live file is over its archive.
				live := a.underSessions(rel)
				if kind != store.KindArtifact || live == a.underSessions(fst.Path) {
					a.log.Warn("two files hold the same session id; backing up the first only", "session", id, "path", fst.Path, "ignored", rel)
					return nil
				}
				if !live {
					return nil
				}
			}
			what := "session moved"
			if kind == store.KindArtifact {
				what = "artifact moved"
			}
			a.log.Info(what, "session", id, "from", fst.Path, "to", rel)
		}
		delete(a.byPath, fst.Path)
		fst.Path = rel
		fallthrough
	case fst.State != repo.StatePresent:
		// Moved, or back (a restore): saved even when the remote holds
		// every byte and nothing is uploaded, or status would count it
		// pending.
		fst.State, fst.Changed = repo.StatePresent, a.now().UTC()
		a.replanned.Store(true)
	}
	a.state.touch(fst) // new, moved or back: saved even if its sync fails
	a.byPath[rel] = key
	return fst
}

// underSessions reports whether rel is in the sessions folder (the store's
// first root), not in an archive.
func (a *Agent) underSessions(rel string) bool {
	return strings.HasPrefix(rel, a.opts.Store.Roots()[0]+"/")
}
