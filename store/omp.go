package store

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"

	"github.com/ompsync/ompsync/safename"
	"github.com/ompsync/ompsync/session"
	"github.com/ompsync/ompsync/transcript"
)

// OMP is omp's store (oh-my-pi, npm @oh-my-pi/pi-coding-agent): the agent
// dir (~/.omp/agent) holds sessions/<cwd-dir>/<time>_<id>.jsonl, each with
// an artifact folder named like it without .jsonl, the content-addressed
// blobs/ they reference, and archive/sessions/ of gzipped cold sessions
// and their artifact folders.
// Files start with a 256-byte title slot that omp rewrites in place; the
// header line names the session; entries merge by id and parentId. See
// ../shared/docs/omp-sessions.md.
func OMP() Store {
	return family{
		name: "omp", slot: true, artifacts: true, blobs: true, archive: true,
		// Credentials and omp's local databases, never backed up.
		secrets: []string{"auth.json", "agent.db", "agent.db-wal", "agent.db-shm"},
		// Every running omp keeps its agent database open, so a scan of open
		// files finds omp's processes (and their working folders) even while
		// they hold no session file open: after a session's first write, and
		// after a resume, until omp next appends.
		marker:  "/agent.db",
		homeRel: true,
		resume:  "omp --resume",
		// omp's agent_dir has a default of its own (config's
		// defaultAgentDir): omp also looks under $XDG_DATA_HOME.
		home: Home{Title: "omp's agent folder", Env: "PI_CODING_AGENT_DIR", Dir: ".omp/agent"},
	}
}

// family is the omp format family, begun by pi-mono's session manager and
// shared by omp and pi: sessions/<cwd-dir>/<time>_<id>.jsonl, a header
// line {"type":"session","id":...,"cwd":...} first (after omp's title
// slot), then entries with an 8-hex id and the parentId they follow.
type family struct {
	name                      string
	slot                      bool // files may start with omp's title slot
	artifacts, blobs, archive bool
	secrets                   []string // names never backed up, anywhere
	marker                    string
	// homeRel: folders of a cwd under $HOME are named "-<rel>" (current
	// omp); otherwise always "--<abs>--" (pi, older omp).
	homeRel bool
	resume  string
	home    Home
}

func (f family) Home() Home { return f.home }

func (f family) Name() string { return f.name }

func (f family) Roots() []string {
	roots := []string{"sessions"}
	if f.blobs {
		roots = append(roots, "blobs")
	}
	if f.archive {
		roots = append(roots, "archive/sessions")
	}
	return roots
}

func (f family) Classify(rel string) Kind {
	parts := cleanParts(rel)
	if parts == nil {
		return KindIgnored
	}
	base := parts[len(parts)-1]
	for _, s := range f.secrets {
		if base == s {
			return KindIgnored
		}
	}
	switch {
	case len(parts) == 3 && parts[0] == "sessions" && strings.HasSuffix(base, ".jsonl"):
		return KindSession
	case f.artifacts && len(parts) >= 4 && parts[0] == "sessions":
		return KindArtifact
	case f.blobs && len(parts) == 2 && parts[0] == "blobs":
		return KindBlob
	case f.archive && len(parts) >= 4 && parts[0] == "archive" && parts[1] == "sessions":
		// gc gzips a session (older omp moved it plain) and moves its
		// artifact folder, uncompressed, beside it: those are the same
		// session's artifacts, the only copy of them left.
		switch {
		case len(parts) >= 5 && f.artifacts:
			return KindArtifact
		case len(parts) == 4 && (strings.HasSuffix(base, ".jsonl.gz") || strings.HasSuffix(base, ".jsonl")):
			return KindArchive
		}
	}
	return KindIgnored
}

func (f family) SessionID(rel string, head []byte) string {
	if h, _, err := session.ReadHeader(head); err == nil && safename.SessionID(h.ID) {
		return h.ID
	}
	if id, ok := f.IDFromName(rel); ok {
		return id
	}
	return ""
}

// IDFromName reads the id out of "<timestamp>_<id>.jsonl" (or an archived
// "<...>.jsonl.gz", or an artifact folder "<timestamp>_<id>").
func (f family) IDFromName(name string) (string, bool) {
	name = path.Base(name)
	name = strings.TrimSuffix(name, ".gz")
	name = strings.TrimSuffix(name, ".jsonl")
	i := strings.LastIndexByte(name, '_')
	if i < 0 {
		return "", false
	}
	id := name[i+1:]
	return id, safename.SessionID(id)
}

func (f family) Describe(head []byte) (Info, bool) {
	h, slot, err := session.ReadHeader(head)
	if err != nil {
		return Info{}, false
	}
	info := Info{ID: h.ID, Cwd: h.Cwd, Title: h.Title}
	if f.slot && slot.Title != "" {
		info.Title = slot.Title
	}
	if info.Title == "" {
		info.Title = firstPrompt(f, head)
	}
	return info, true
}

// firstPrompt is the first thing the user typed in head's whole lines,
// shortened: the title of a session its agent has not titled (yet).
func firstPrompt(f transcript.Format, head []byte) string {
	for i, line := range bytes.Split(head[:session.SettledLen(head)], []byte("\n")) {
		// A user's message names its role: the lines before it (tool
		// output, the model's answers, 64 KiB of them in a head) are
		// passed over unparsed, which cost a restore a tenth of its CPU.
		if !bytes.Contains(line, []byte(`"user"`)) {
			continue
		}
		e, ok := f.Text(line, i+1)
		if !ok || e.Role != "user" {
			continue
		}
		for _, p := range e.Parts {
			if p.Kind == transcript.Text && strings.TrimSpace(p.Text) != "" {
				return shorten(p.Text, 80)
			}
		}
	}
	return ""
}

func (f family) SlotLen(b []byte) int {
	if !f.slot {
		return 0
	}
	return session.SlotLen(b)
}

func (f family) SlotTitle(slot []byte) (string, bool) {
	if !f.slot {
		return "", false
	}
	ts, ok := session.ParseTitleSlot(slot)
	return ts.Title, ok
}

func (f family) NewestSlot(copies [][]byte) []byte {
	if !f.slot {
		return nil
	}
	return session.NewestSlot(copies)
}

// MergeFormat is omp's for the whole family, pi's files too (pi writes
// no title slot, so none is found at their start).
func (f family) MergeFormat() (session.Format, bool) { return session.OMPFormat(), true }

// Artifact: sessions/<cwd-dir>/<time>_<id>/<inner...>, or the folder gc
// moved to archive/sessions/<cwd-dir>/<time>_<id>/<inner...>. Both feed
// the same stream (named by inner), so an archived folder uploads nothing
// again, and restore puts it back beside the session file.
func (f family) Artifact(rel string) (string, string, bool) {
	if f.Classify(rel) != KindArtifact {
		return "", "", false
	}
	parts := strings.Split(rel, "/")
	if parts[0] == "archive" {
		parts = parts[1:]
	}
	id, ok := f.IDFromName(parts[2])
	if !ok {
		return "", "", false
	}
	return id, strings.Join(parts[3:], "/"), true
}

// ArtifactRel: in the folder named like the session file without .jsonl.
func (f family) ArtifactRel(sessionRel, inner string) (string, bool) {
	if !safename.RelPath(inner) || !strings.HasPrefix(sessionRel, "sessions/") {
		return "", false
	}
	out := strings.TrimSuffix(sessionRel, ".jsonl") + "/" + inner
	return out, f.Classify(out) == KindArtifact
}

// Archived: archive/sessions/<cwd-dir>/<name>.jsonl.gz (or, from older
// omp, a plain <name>.jsonl there) was sessions/<cwd-dir>/<name>.jsonl.
func (f family) Archived(rel string) (string, string, bool) {
	if f.Classify(rel) != KindArchive {
		return "", "", false
	}
	id, ok := f.IDFromName(rel)
	if !ok {
		return "", "", false
	}
	parts := strings.Split(rel, "/")
	return id, "sessions/" + parts[2] + "/" + strings.TrimSuffix(parts[3], ".gz"), true
}

// OpenArchive: gzip, or a plain .jsonl (older omp moved a cold session
// into the archive as it was).
func (family) OpenArchive(rel string, r io.Reader, _ int64) (io.ReadCloser, error) {
	if strings.HasSuffix(rel, ".jsonl") {
		return io.NopCloser(r), nil
	}
	return gzip.NewReader(r)
}

// ArchiveOf: where omp's gc puts a session once it archives it.
func (f family) ArchiveOf(live string) string {
	if !f.archive {
		return ""
	}
	return "archive/" + live + ".gz"
}

// SessionRel: sessions/<folder>/<name>.jsonl, the folder cwd's (CwdDir).
func (f family) SessionRel(p, cwd, home string) (string, error) {
	if !safename.RelPath(p) || f.Classify(p) != KindSession {
		return "", fmt.Errorf("recorded path %q is not a session file under sessions/", p)
	}
	if cwd == "" {
		return p, nil
	}
	parts := strings.Split(p, "/")
	parts[1] = f.CwdDir(cwd, home)
	return checkMoved(f, p, strings.Join(parts, "/"))
}

// checkMoved refuses a session path that moving a session turned into
// something else than a session path (a folder named "..", say).
func checkMoved(s Store, p, out string) (string, error) {
	if !safename.RelPath(out) || s.Classify(out) != KindSession {
		return "", fmt.Errorf("placing %q gives %q, which is not a session path", p, out)
	}
	return out, nil
}

func (f family) Beside(string, string) (string, bool) { return "", false }

// LockFiles: omp's ".<name>.jsonl.lock" around each write, and the
// "<name>.jsonl.lock" of pi-utils' file lock.
func (f family) LockFiles(rel string) []string {
	dir, base := path.Split(rel)
	return []string{dir + "." + base + ".lock", dir + base + ".lock"}
}

func (f family) ProcessMarker() string { return f.marker }

func (f family) Resume(id string) string { return f.resume + " " + id }

func (f family) Text(line []byte, n int) (transcript.Entry, bool) { return transcript.Parse(line, n) }

// CwdDir names the sessions folder of a working directory as the agent
// does: for current omp, home-relative paths become "-" + the relative
// path with separators turned into "-"; others (and every path, for pi)
// "--" + the absolute path + "--".
func (f family) CwdDir(cwd, home string) string {
	cwd = filepath.Clean(cwd)
	if f.homeRel && home != "" {
		home = filepath.Clean(home)
		if cwd == home {
			return "-"
		}
		if rel, ok := strings.CutPrefix(cwd, home+string(filepath.Separator)); ok {
			return "-" + encodeAbs(rel)
		}
	}
	return "--" + encodeAbs(cwd) + "--"
}

// encodeAbs is how the family names the folder of an absolute path,
// without the surrounding "--".
func encodeAbs(p string) string {
	return strings.NewReplacer("/", "-", "\\", "-", ":", "-").Replace(strings.TrimLeft(p, "/"))
}

func (f family) EntryKey(line []byte) (string, bool) {
	return entryKey(session.ParseEntry(line))
}
