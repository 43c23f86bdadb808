package session

import (
	"path/filepath"
	"strings"

	"github.com/ompsync/ompsync/openfiles"
)

// CwdDir encodes a working directory as omp names its session folder:
// home-relative paths become "-" + the relative path with separators
// turned into "-"; others "--" + the absolute path + "--".
func CwdDir(cwd, home string) string {
	repl := strings.NewReplacer("/", "-", "\\", "-", ":", "-")
	cwd = filepath.Clean(cwd)
	if home != "" {
		home = filepath.Clean(home)
		if cwd == home {
			return "-"
		}
		if rel, ok := strings.CutPrefix(cwd, home+string(filepath.Separator)); ok {
			return "-" + repl.Replace(rel)
		}
	}
	return "--" + repl.Replace(strings.TrimLeft(cwd, "/")) + "--"
}

// Kind classifies a path relative to the agent dir.
type Kind int

const (
	KindIgnored  Kind = iota
	KindSession       // sessions/<cwd-dir>/<name>.jsonl
	KindArtifact      // sessions/<cwd-dir>/<name>/**
	KindBlob          // blobs/<sha256>
	KindArchive       // archive/sessions/<cwd-dir>/<name>.jsonl.gz
)

func (k Kind) String() string {
	return [...]string{"ignored", "session", "artifact", "blob", "archive"}[k]
}

// Classify says what a slash-separated path relative to the agent dir is.
// Credentials, local databases, locks, temp files and hidden files are never
// backed up.
func Classify(rel string) Kind {
	parts := strings.Split(rel, "/")
	base := parts[len(parts)-1]
	if IgnoredName(base) {
		return KindIgnored
	}
	for _, p := range parts {
		if p == "" || strings.HasPrefix(p, ".") {
			return KindIgnored
		}
	}
	switch {
	case len(parts) == 3 && parts[0] == "sessions" && strings.HasSuffix(base, ".jsonl"):
		return KindSession
	case len(parts) >= 4 && parts[0] == "sessions":
		return KindArtifact
	case len(parts) == 2 && parts[0] == "blobs":
		return KindBlob
	case len(parts) == 4 && parts[0] == "archive" && parts[1] == "sessions" && strings.HasSuffix(base, ".jsonl.gz"):
		return KindArchive
	}
	return KindIgnored
}

// IgnoredName reports file names omp uses for locks, temp files and backups,
// and the files that hold credentials or local state.
func IgnoredName(base string) bool {
	switch base {
	case "auth.json", "agent.db", "agent.db-wal", "agent.db-shm":
		return true
	}
	if strings.HasPrefix(base, ".") {
		return true
	}
	for _, suf := range []string{".lock", ".lock.os", ".tmp", ".bak"} {
		if strings.HasSuffix(base, suf) {
			return true
		}
	}
	return false
}

// BlobName reports whether name is one of omp's blob names: the sha256 of
// the content, 64 lower-case hex digits.
func BlobName(name string) bool {
	if len(name) != 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// BlobLink splits the name omp gives a blob for image viewers,
// "<sha256>.<ext>" (a hard link to blobs/<sha256>, or a copy where linking
// failed), into the blob's name and the extension.
func BlobLink(name string) (blob, ext string, ok bool) {
	blob, ext, ok = strings.Cut(name, ".")
	if !ok || !BlobName(blob) || ext == "" || len(ext) > 8 {
		return "", "", false
	}
	for i := 0; i < len(ext); i++ {
		if c := ext[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return "", "", false
		}
	}
	return blob, ext, true
}

// processMarker is a file every running omp keeps open, its agent database,
// so a scan of open files finds omp's processes (and their working
// folders) even while they hold no session file open: after a session's
// first write, and after a resume, until omp next appends.
const processMarker = "/agent.db"

// ScanOpen lists which processes hold session files open, and which are
// omp's.
func ScanOpen() (*openfiles.Snapshot, error) { return openfiles.Scan(".jsonl", processMarker) }

// OmpProcesses are the omp processes a ScanOpen saw.
func OmpProcesses(s *openfiles.Snapshot) []int { return s.WithSuffix(processMarker) }
