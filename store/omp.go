package store

import (
	"compress/gzip"
	"io"
	"path"
	"path/filepath"
	"slices"
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
func OMP() *Store {
	return family{
		slot: true, artifacts: true, blobs: true, archive: true,
		// Credentials and omp's local databases, never backed up.
		secrets: []string{"auth.json", "agent.db", "agent.db-wal", "agent.db-shm"},
		homeRel: true,
	}.store(&Store{
		name: "omp",
		// Every running omp keeps its agent database open, so a scan of open
		// files finds omp's processes (and their working folders) even while
		// they hold no session file open: after a session's first write, and
		// after a resume, until omp next appends.
		marker: "/agent.db",
		resume: "omp --resume",
		// omp's agent_dir has a default of its own (config's
		// defaultAgentDir): omp also looks under $XDG_DATA_HOME.
		home: Home{Title: "omp's agent folder", Env: "PI_CODING_AGENT_DIR", Dir: ".omp/agent"},
	})
}

// family is the omp format family, begun by pi-mono's session manager and
// shared by omp and pi: sessions/<cwd-dir>/<time>_<id>.jsonl, a header
// line {"type":"session","id":...,"cwd":...} first (after omp's title
// slot), then entries with an 8-hex id and the parentId they follow.
type family struct {
	slot                      bool // files may start with omp's title slot
	artifacts, blobs, archive bool
	secrets                   []string // names never backed up, anywhere
	// homeRel: folders of a cwd under $HOME are named "-<rel>" (current
	// omp); otherwise always "--<abs>--" (pi, older omp).
	homeRel bool
}

// store completes s, an agent of the family's name, home, resume command
// and process marker, with what the family shares. Its merge format is
// omp's for the whole family, pi's files too (pi writes no title slot, so
// none is found at their start).
func (f family) store(s *Store) *Store {
	s.roots = []string{"sessions"}
	if f.blobs {
		s.roots = append(s.roots, "blobs")
	}
	if f.archive {
		s.roots = append(s.roots, "archive/sessions")
		// archive/sessions/<cwd-dir>/<name>.jsonl.gz (or, from older omp, a
		// plain <name>.jsonl there) was sessions/<cwd-dir>/<name>.jsonl.
		s.archiveDir, s.archiveExt = "archive/", ".gz"
	}
	s.what = "a session file under sessions/"
	s.classify, s.idFromName, s.describe, s.cwdDir, s.homeRel = f.classify, familyID, f.describe, f.cwdDir, f.homeRel
	s.headID = func(head []byte) string {
		h, _, _ := session.ReadHeader(head)
		return h.ID
	}
	s.text, s.merge = transcript.Parse, session.OMPFormat()
	s.slot, s.locks, s.openArchive = f.slot, true, openGzip
	return s
}

func (f family) classify(parts []string) Kind {
	base := parts[len(parts)-1]
	if slices.Contains(f.secrets, base) {
		return KindIgnored
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

// familyID reads the id out of "<timestamp>_<id>.jsonl" (or an archived
// "<...>.jsonl.gz", or an artifact folder "<timestamp>_<id>").
func familyID(name string) (string, bool) {
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

func (f family) describe(head []byte) (Info, bool) {
	h, slot, err := session.ReadHeader(head)
	if err != nil {
		return Info{}, false
	}
	info := Info{ID: h.ID, Cwd: h.Cwd, Title: h.Title}
	if f.slot && slot.Title != "" {
		info.Title = slot.Title
	}
	if info.Title == "" {
		info.Title = firstPrompt(transcript.Parse, head, false)
	}
	return info, true
}

// openGzip: gzip, or a plain .jsonl (older omp moved a cold session
// into the archive as it was).
func openGzip(rel string, r io.Reader, _ int64) (io.ReadCloser, error) {
	if strings.HasSuffix(rel, ".jsonl") {
		return io.NopCloser(r), nil
	}
	return gzip.NewReader(r)
}

// cwdDir names the sessions folder of a working directory as the agent
// does: for current omp, home-relative paths become "-" + the relative
// path with separators turned into "-"; others (and every path, for pi)
// "--" + the absolute path + "--".
func (f family) cwdDir(cwd, home string) string {
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
