package restore

import (
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

	"github.com/ompsync/ompsync/openfiles"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/session"
)

// PathMapping rewrites session folder names that encode an absolute path
// (omp's "--<abs path>--" form, used for sessions outside the home
// directory), e.g. From /Users/ana To /home/ana turns --Users-ana-src-api--
// into --home-ana-src-api--. Home-relative folder names travel between
// machines as they are.
type PathMapping struct {
	From, To string
}

// ParsePathMapping parses FROM=TO; both must be absolute paths.
func ParsePathMapping(s string) (PathMapping, error) {
	from, to, ok := strings.Cut(s, "=")
	if !ok {
		return PathMapping{}, fmt.Errorf("path map %q: want FROM=TO, e.g. /Users/ana=/home/ana", s)
	}
	m := PathMapping{From: path.Clean(filepath.ToSlash(from)), To: path.Clean(filepath.ToSlash(to))}
	for _, p := range []string{m.From, m.To} {
		if !strings.HasPrefix(p, "/") || p == "/" {
			return PathMapping{}, fmt.Errorf("path map %q: %q is not an absolute folder", s, p)
		}
	}
	return m, nil
}

// encodeAbs is how omp names the folder of an absolute path, without the
// surrounding "--".
func encodeAbs(p string) string {
	return strings.NewReplacer("/", "-", "\\", "-", ":", "-").Replace(strings.TrimLeft(p, "/"))
}

// mapDir applies the longest matching mapping to one session folder name.
// The encoding turns both "/" and "-" into "-", so a mapping matches at a
// "-" boundary; that is as exact as the folder names allow.
func mapDir(dir string, maps []PathMapping) string {
	if len(dir) < 4 || !strings.HasPrefix(dir, "--") || !strings.HasSuffix(dir, "--") {
		return dir
	}
	inner := dir[2 : len(dir)-2]
	best, bestLen := "", -1
	for _, m := range maps {
		from := encodeAbs(m.From)
		if from == "" {
			continue
		}
		if inner == from || strings.HasPrefix(inner, from+"-") {
			if len(from) > bestLen {
				best, bestLen = encodeAbs(m.To)+inner[len(from):], len(from)
			}
		}
	}
	if bestLen < 0 || best == "" {
		return dir
	}
	return "--" + best + "--"
}

// sessionRel checks a recorded session path and applies the path map: the
// result is sessions/<folder>/<name>.jsonl with safe segments.
func sessionRel(p string, maps []PathMapping) (string, error) {
	if !repo.SafeRelPath(p) || session.Classify(p) != session.KindSession {
		return "", fmt.Errorf("recorded path %q is not a session file under sessions/", p)
	}
	parts := strings.Split(p, "/")
	parts[1] = mapDir(parts[1], maps)
	out := strings.Join(parts, "/")
	if !repo.SafeRelPath(out) || session.Classify(out) != session.KindSession {
		return "", fmt.Errorf("path map turns %q into %q, which is not a session path", p, out)
	}
	return out, nil
}

// artifactRel is where an artifact file of the session at sessionRel goes:
// in the folder named like the session file without .jsonl.
func artifactRel(sessionRel, rel string) (string, bool) {
	if !repo.SafeRelPath(rel) {
		return "", false
	}
	out := strings.TrimSuffix(sessionRel, ".jsonl") + "/" + rel
	return out, session.Classify(out) == session.KindArtifact
}

// destination is where the session goes: the local file with its id if
// there is one (it stays where the user has it), else the path the newest
// copy recorded, mapped.
func (t *target) destination(localRel string, maps []PathMapping) (string, error) {
	if localRel != "" {
		return localRel, nil
	}
	rel, err := sessionRel(t.newest().Path, maps)
	if err != nil {
		return "", fmt.Errorf("session %s: %w", t.id, err)
	}
	return rel, nil
}

// abs joins a checked relative path to the agent dir.
func abs(agentDir, rel string) string { return filepath.Join(agentDir, filepath.FromSlash(rel)) }

// localIndex maps session ids to their files under sessions/.
type localIndex map[string][]string

// scanLocal lists sessions/*/*.jsonl under agentDir by session id: from the
// file name, or the header when the name carries none. A missing agent dir
// is an empty index.
func scanLocal(agentDir string) (localIndex, error) {
	idx := localIndex{}
	dirs, err := os.ReadDir(filepath.Join(agentDir, "sessions"))
	if errors.Is(err, fs.ErrNotExist) {
		return idx, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read local sessions: %w", err)
	}
	for _, d := range dirs {
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			continue
		}
		files, err := os.ReadDir(filepath.Join(agentDir, "sessions", d.Name()))
		if err != nil {
			return nil, fmt.Errorf("read local sessions: %w", err)
		}
		for _, f := range files {
			rel := "sessions/" + d.Name() + "/" + f.Name()
			if !f.Type().IsRegular() || session.Classify(rel) != session.KindSession {
				continue
			}
			id := headerID(abs(agentDir, rel))
			if id == "" {
				id, _ = session.IDFromFileName(f.Name())
			}
			if session.ValidID(id) {
				idx[id] = append(idx[id], rel)
			}
		}
	}
	for _, rels := range idx {
		sort.Strings(rels)
	}
	return idx, nil
}

// headerID reads the session id from a file's header, as the agent does.
func headerID(p string) string {
	h, _ := readHeader(p)
	return h.ID
}

// readHeader reads a session file's header from its first 8 KiB.
func readHeader(p string) (session.Header, bool) {
	f, err := os.Open(p)
	if err != nil {
		return session.Header{}, false
	}
	defer f.Close()
	b := make([]byte, 8<<10)
	n, _ := io.ReadFull(f, b)
	h, _, err := session.ReadHeader(b[:n])
	return h, err == nil
}

// headerCwd reads the cwd from a session file's header, or "".
func headerCwd(p string) string {
	h, ok := readHeader(p)
	if !ok {
		return ""
	}
	return h.Cwd
}

// find returns the local file of a session, or "".
func (idx localIndex) find(id string) string {
	if rels := idx[id]; len(rels) > 0 {
		return rels[0]
	}
	return ""
}

// openScan is the latest scan of open files. A scan older than maxScanAge
// is taken again: a restore of many sessions checks each one against a scan
// at most a second old, at one scan a second, not one a session.
type openScan struct {
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
	snap, err := session.ScanOpen()
	if err != nil {
		return nil, fmt.Errorf("cannot tell which processes hold session files open, so nothing is changed: %w", err)
	}
	o.snap, o.taken = snap, o.now()
	return snap, nil
}

// liveReason says why the session file at rel must not be changed now: a
// process holds it open (omp keeps its descriptor for as long as the session
// is open and stops saving it once the file changes under it: nothing
// overrides that), a lock sidecar exists, or it changed within window. ""
// means idle.
func liveReason(agentDir, rel string, now time.Time, window time.Duration, open *openfiles.Snapshot) (why string, held bool) {
	p := abs(agentDir, rel)
	if hs := open.Holders(p); len(hs) > 0 {
		names := make([]string, len(hs))
		for i, h := range hs {
			names[i] = h.String()
		}
		return fmt.Sprintf("%s is open in %s; close that session (changing the file now would make omp stop saving it)", rel, strings.Join(names, ", ")), true
	}
	// omp holds no descriptor after a session's first write, or after a
	// resume until it next appends, yet remembers the file's size: an omp
	// running in the session's folder may have it open.
	if cwd := headerCwd(p); cwd != "" {
		for _, pid := range session.OmpProcesses(open) {
			if open.Cwd(pid) == cwd {
				return fmt.Sprintf("%s may be open in omp (pid %d, running in the session's folder %s); close that session or use --force", rel, pid, cwd), false
			}
		}
	}
	// omp makes a lock sidecar around each write and removes it
	// microseconds later (a flock file on macOS may stay): only a fresh
	// one says omp is writing; an old one is left from a crash.
	dir, base := filepath.Split(p)
	for _, lock := range []string{"." + base + ".lock", base + ".lock"} {
		if fi, err := os.Lstat(filepath.Join(dir, lock)); err == nil {
			if age := now.Sub(fi.ModTime()); age < window && age > -window {
				return fmt.Sprintf("%s is locked (%s was made %s ago); omp may be writing it: close that session or use --force", rel, lock, age.Round(time.Millisecond)), false
			}
		}
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return "", false
	}
	if age := now.Sub(fi.ModTime()); age < window && age > -window {
		return fmt.Sprintf("%s changed %s ago; omp may be writing it: close that session or use --force", rel, age.Round(time.Millisecond)), false
	}
	return "", false
}
