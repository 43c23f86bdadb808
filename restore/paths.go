package restore

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ompsync/ompsync/openfiles"
	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/store"
)

// LocalFile is how a session that has a file here is placed: where the
// user has it.
const LocalFile = "local file"

// destination is where the session goes and the folder it runs in there:
// the local file with its id if there is one (it stays where the user has
// it), else the newest copy's file, placed by opts.Placer in this
// machine's folder for the project it recorded, in the agent's folder for
// that (its name kept).
func (t *target) destination(opts Options, localRel string) (string, project.Placement, error) {
	if localRel != "" {
		return localRel, project.Placement{Cwd: headerCwd(opts.Store, abs(opts.AgentDir, localRel)), How: LocalFile}, nil
	}
	e := t.newest()
	place := project.Placement{Cwd: e.Cwd, How: project.Recorded}
	var cwd, home string
	if opts.Placer != nil {
		id := t.project(e)
		place = opts.Placer.Place(e.Cwd, id)
		// A placed session goes into this machine's agent folder for its
		// cwd, named as the agent names it: from the cwd and home with
		// symlinks resolved (omp's realpath, the kernel's getcwd). At the
		// very folder it recorded, its folder is kept (as a restore on
		// the machine that wrote it gives it back), but for a name made
		// relative to its machine's home (omp's "-src-app", id.Home),
		// which stands for another folder under another home. One left
		// as recorded (its folder not here) keeps its folder, unless
		// this home has the folder its name stands for (another
		// repository's): its agent would take the session for that
		// folder's.
		keep := place.How == project.SamePath && (id.Home == "" || !opts.Store.HomeRelative())
		if !keep && (place.How != project.Recorded || opts.Placer.HomeFolder(id) != "") {
			cwd, home = project.RealPath(place.Cwd), project.RealPath(opts.Placer.Home)
		}
	}
	rel, err := opts.Store.SessionRel(e.Path, cwd, home)
	if err != nil {
		return "", place, fmt.Errorf("session %s: %w", t.id, err)
	}
	return rel, place, nil
}

// project is what the machines recorded of the project of e's folder: e's
// own entry, or another machine's for the same folder (a machine that
// took the session in as recorded, its folder not there, could not tell
// the repository).
func (t *target) project(e machineEntry) project.ID {
	if e.Project != nil && e.Project.Origin != "" {
		return *e.Project
	}
	for _, o := range t.entries {
		if o.Cwd == e.Cwd && o.Project != nil && o.Project.Origin != "" {
			return *o.Project
		}
	}
	if e.Project != nil {
		return *e.Project
	}
	return project.ID{}
}

// abs joins a checked relative path to the agent dir.
func abs(agentDir, rel string) string { return filepath.Join(agentDir, filepath.FromSlash(rel)) }

// headerCwd reads the cwd a session file records, or "".
func headerCwd(st *store.Store, p string) string {
	info, _ := st.Describe(store.ReadHead(p))
	return info.Cwd
}

// openScan is the latest scan of open files. A scan older than maxScanAge
// is taken again: a restore of many sessions checks each one against a scan
// at most a second old, at one scan a second, not one a session.
type openScan struct {
	store *store.Store
	mu    sync.Mutex
	snap  *openfiles.Snapshot
	taken time.Time
	now   func() time.Time
}

const maxScanAge = time.Second

func (o *openScan) get() (*openfiles.Snapshot, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.snap != nil && o.now().Sub(o.taken) < maxScanAge {
		return o.snap, nil
	}
	snap, err := store.ScanOpen(o.store)
	if err != nil {
		return nil, fmt.Errorf("cannot tell which processes hold session files open, so nothing is changed: %w", err)
	}
	o.snap, o.taken = snap, o.now()
	return snap, nil
}

// expire has the next get scan again.
func (o *openScan) expire() {
	o.mu.Lock()
	o.snap = nil
	o.mu.Unlock()
}

// liveReason says why the session file at rel must not be changed now: a
// process holds it open (omp keeps its descriptor for as long as the session
// is open and stops saving it once the file changes under it: nothing
// overrides that), a lock sidecar exists, or it changed within window. ""
// means idle.
func liveReason(st *store.Store, agentDir, rel string, now time.Time, window time.Duration, open *openfiles.Snapshot) (why string, held bool) {
	p := abs(agentDir, rel)
	if hs := open.Holders(p); len(hs) > 0 {
		names := make([]string, len(hs))
		for i, h := range hs {
			names[i] = h.String()
		}
		return fmt.Sprintf("%s is open in %s; close that session (changing the file now would make %s stop saving it)", rel, strings.Join(names, ", "), st.Name()), true
	}
	// omp holds no descriptor after a session's first write, or after a
	// resume until it next appends, yet remembers the file's size: an omp
	// running in the session's folder may have it open.
	agent := st.Name()
	// With no marker there are none: a scan notes no holder under "".
	if pids := open.WithSuffix(st.ProcessMarker()); len(pids) > 0 {
		if cwd := headerCwd(st, p); cwd != "" {
			for _, pid := range pids {
				if open.Cwd(pid) == cwd {
					return fmt.Sprintf("%s may be open in %s (pid %d, running in the session's folder %s); close that session or use --force", rel, agent, pid, cwd), false
				}
			}
		}
	}
	// omp makes a lock sidecar around each write and removes it
	// microseconds later (a flock file on macOS may stay): only a fresh
	// one says omp is writing; an old one is left from a crash.
	for _, lockRel := range st.LockFiles(rel) {
		lock := path.Base(lockRel)
		if fi, err := os.Lstat(abs(agentDir, lockRel)); err == nil {
			if age := now.Sub(fi.ModTime()); age < window && age > -window {
				return fmt.Sprintf("%s is locked (%s was made %s ago); %s may be writing it: close that session or use --force", rel, lock, age.Round(time.Millisecond), agent), false
			}
		}
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return "", false
	}
	if age := now.Sub(fi.ModTime()); age < window && age > -window {
		return fmt.Sprintf("%s changed %s ago; %s may be writing it: close that session or use --force", rel, age.Round(time.Millisecond), agent), false
	}
	return "", false
}
