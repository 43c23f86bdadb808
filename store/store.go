// Package store holds what ompsync knows about each coding agent's session
// store: the folder its sessions live in and how it names them, which files
// are sessions, artifacts or blobs (and which are locks, sidecars or
// credentials never to touch), where a session's id comes from, the title
// slot an agent rewrites in place, the entry ids two copies merge by (or
// none), and the hints that an agent may be writing a file.
//
// Everything above this package (agent, restore, cmd) works through Store
// and never names an agent's folders itself; the repository format (repo)
// knows no agent at all. Adding an agent is one file here and its tests.
package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/ompsync/ompsync/openfiles"
	"github.com/ompsync/ompsync/safename"
	"github.com/ompsync/ompsync/session"
	"github.com/ompsync/ompsync/transcript"
)

// Kind classifies a path relative to a store's folder.
type Kind int

const (
	KindIgnored  Kind = iota
	KindSession       // a session file (JSON Lines)
	KindArtifact      // a file in a session's artifact folder
	KindBlob          // a content-addressed blob (omp's blobs/<sha256>)
	KindArchive       // a session the agent compressed into its archive
)

// BlobRel is where blob name lives in an agent's folder (omp's
// blobs/<sha256>; the agents without blobs never classify a path as one).
func BlobRel(name string) string { return "blobs/" + name }

func (k Kind) String() string {
	return [...]string{"ignored", "session", "artifact", "blob", "archive"}[k]
}

// Info is what ompsync shows of a session, read from its first bytes.
type Info struct {
	ID    string // the session id the file names itself by, "" when none
	Cwd   string // the folder the agent ran in
	Title string
}

// Home is an agent's folder as the agent finds it itself: the folder an
// environment variable names, else one under the home folder.
type Home struct {
	Title string // what the folder is, for help: "pi's agent folder"
	Env   string // the variable the agent reads: "PI_CODING_AGENT_DIR"
	Dir   string // else this folder under the home folder, slash-separated
}

// Known lists every store ompsync knows, omp first.
func Known() []*Store { return []*Store{OMP(), Pi(), Claude(), Codex()} }

// ByName returns the known store of that name.
func ByName(name string) (*Store, error) {
	var names []string
	for _, s := range Known() {
		if s.Name() == name {
			return s, nil
		}
		names = append(names, s.Name())
	}
	return nil, fmt.Errorf("unknown agent %q (known: %s)", name, strings.Join(names, ", "))
}

// Store is one coding agent's session store. Paths are slash-separated and
// relative to the store's folder (omp's agent dir, ~/.claude, ...).
// One type serves every agent: what differs between the agents is the
// facts and the few readers of their names and lines held here, so each
// question a Store answers is answered one way for all of them.
type Store struct {
	name   string
	home   Home
	roots  []string
	resume string // the command that resumes a session, before its id
	// what a session file is, in the error about a recorded path that is none
	what string
	// classify is Classify of a path's segments, none empty or hidden.
	classify   func(parts []string) Kind
	idFromName func(name string) (string, bool)
	// headID is the id a session file's first bytes name, "" for none;
	// nil when only its name does.
	headID   func(head []byte) string
	describe func(head []byte) (Info, bool)
	text     func(line []byte, n int) (transcript.Entry, bool)
	merge    session.Format // with a nil Entry, copies cannot be merged
	slot     bool           // files may start with omp's title slot
	locks    bool           // the omp family's lock sidecars
	marker   string
	// An archived session lies at archiveDir + its live path + archiveExt;
	// archiveExt is "" for an agent that archives nothing.
	archiveDir, archiveExt string
	openArchive            func(rel string, r io.Reader, limit int64) (io.ReadCloser, error)
	// cwdDir is the folder the agent keeps the sessions of cwd in, "" to
	// keep a recorded one; nil for an agent that files them otherwise.
	cwdDir func(cwd, home string) string
	// homeRel: cwdDir names a folder under the home relative to it (omp).
	homeRel bool
	// beside: a copy that cannot be merged goes beside the session file.
	beside bool
}

// Name names the agent in configuration, on the remote and in output:
// "omp", "pi", "claude", "codex".
func (s *Store) Name() string { return s.name }

// Home is where the agent keeps its files unless configured
// otherwise: config's <name>.dir key follows from it.
func (s *Store) Home() Home { return s.home }

// Roots are the folders below the store's folder that hold what is
// backed up. Nothing outside them is read.
func (s *Store) Roots() []string { return slices.Clone(s.roots) }

// Resume is the command that resumes session id in the agent.
func (s *Store) Resume(id string) string { return s.resume + " " + id }

// ProcessMarker is a file every running process of the agent keeps
// open (omp's agent database), so a scan of open files tells its
// processes; "" when there is none.
func (s *Store) ProcessMarker() string { return s.marker }

// IDFromName reads the session id from a session file's name or path
// as a user may give it (the file an agent shows).
func (s *Store) IDFromName(name string) (string, bool) { return s.idFromName(name) }

// Describe reads what a catalog shows of a session from its first
// bytes; ok is false when they hold no session's start (yet).
func (s *Store) Describe(head []byte) (Info, bool) { return s.describe(head) }

// Text reads the conversation out of line n of a session file (for
// grep, cat --text): who said what, tool calls and their results, in
// the roles omp's lines have (user, assistant, toolResult, ...).
func (s *Store) Text(line []byte, n int) (transcript.Entry, bool) { return s.text(line, n) }

// MergeFormat is how copies of a session file that went on in
// different places are merged line by line (session.Format's rule
// with its entry ids and title slot, streamed by session.Index); ok
// is false for a format without entry ids, whose
// copies cannot be merged.
func (s *Store) MergeFormat() (session.Format, bool) { return s.merge, s.merge.Entry != nil }

// OpenArchive reads the session's bytes out of r, the archived file
// at rel (its compression is the store's to know); the decoder holds
// at most about limit bytes in memory.
func (s *Store) OpenArchive(rel string, r io.Reader, limit int64) (io.ReadCloser, error) {
	return s.openArchive(rel, r, limit)
}

// Classify says what a path is. Credentials, settings, databases,
// locks and temp files are KindIgnored.
func (s *Store) Classify(rel string) Kind {
	if parts := cleanParts(rel); parts != nil {
		return s.classify(parts)
	}
	return KindIgnored
}

// SessionID is the id of the session file at rel, from its first bytes
// (head, up to 8 KiB) or else its name; "" when it has none.
func (s *Store) SessionID(rel string, head []byte) string {
	if s.headID != nil {
		if id := s.headID(head); safename.SessionID(id) {
			return id
		}
	}
	if id, ok := s.idFromName(rel); ok {
		return id
	}
	return ""
}

// SlotLen is the length of the title slot the agent rewrites in place
// at the start of b (omp's 256 bytes), or 0.
func (s *Store) SlotLen(b []byte) int {
	if !s.slot {
		return 0
	}
	return session.SlotLen(b)
}

// SlotTitle decodes a title slot (the first SlotLen bytes of a file);
// ok is false when slot is no longer one.
func (s *Store) SlotTitle(slot []byte) (string, bool) {
	if !s.slot {
		return "", false
	}
	ts, ok := session.ParseTitleSlot(slot)
	return ts.Title, ok
}

// NewestSlot is the newest title slot among copies (nil for none).
func (s *Store) NewestSlot(copies [][]byte) []byte {
	if !s.slot {
		return nil
	}
	return session.NewestSlot(copies)
}

// EntryKey is what a merge knows the line (without its newline) by when
// it is an entry: its id and timestamp. ok is false for any other line
// (a merge knows it by its bytes), and for every line of a format
// without entry ids.
func (s *Store) EntryKey(line []byte) (string, bool) {
	if s.merge.Entry == nil {
		return "", false
	}
	e, ok := s.merge.Entry(line)
	if !ok || e.ID == "" {
		return "", false
	}
	return e.ID + "\x00" + e.Timestamp, true
}

// Artifact says which session an artifact file belongs to and its path
// inside that session's artifact folder.
//
// Artifact: <root>/<folder>/<session>/<inner...>, the session's artifact
// folder named like its file without .jsonl; omp's gc moves one into
// archive/ as it is. Both feed the same stream (named by inner), so an
// archived folder uploads nothing again, and restore puts it back beside
// the session file.
func (s *Store) Artifact(rel string) (string, string, bool) {
	if s.Classify(rel) != KindArtifact {
		return "", "", false
	}
	parts := strings.Split(strings.TrimPrefix(rel, s.archiveDir), "/")
	id, ok := s.idFromName(parts[2])
	if !ok {
		return "", "", false
	}
	return id, strings.Join(parts[3:], "/"), true
}

// ArtifactRel is where the artifact inner of the session file at
// sessionRel goes; ok is false when the agent keeps no such file.
//
// ArtifactRel: in the folder named like the live session file without
// .jsonl.
func (s *Store) ArtifactRel(sessionRel, inner string) (string, bool) {
	if !safename.RelPath(inner) || !strings.HasPrefix(sessionRel, s.roots[0]+"/") {
		return "", false
	}
	out := strings.TrimSuffix(sessionRel, ".jsonl") + "/" + inner
	return out, s.Classify(out) == KindArtifact
}

// Archived says which session an archived file holds and the path of
// the session file it was archived from; ArchiveOf is the inverse
// ("" for an agent that archives nothing).
func (s *Store) Archived(rel string) (string, string, bool) {
	if s.Classify(rel) != KindArchive {
		return "", "", false
	}
	id, ok := s.idFromName(rel)
	if !ok {
		return "", "", false
	}
	return id, strings.TrimSuffix(strings.TrimPrefix(rel, s.archiveDir), s.archiveExt), true
}

func (s *Store) ArchiveOf(live string) string {
	if s.archiveExt == "" {
		return ""
	}
	return s.archiveDir + live + s.archiveExt
}

// SessionRel checks a session path recorded on the remote and, when
// cwd is not "", moves it into the folder the agent keeps the sessions
// of working folder cwd in on this machine, whose home folder is home
// (the name stays; an agent that does not file sessions by folder
// keeps the path as recorded).
//
// SessionRel: the recorded path with its folder (the second segment)
// the one the agent keeps cwd's sessions in.
func (s *Store) SessionRel(p, cwd, home string) (string, error) {
	if !safename.RelPath(p) || s.Classify(p) != KindSession {
		return "", fmt.Errorf("recorded path %q is not %s", p, s.what)
	}
	if cwd == "" || s.cwdDir == nil {
		return p, nil
	}
	dir := s.cwdDir(cwd, home)
	if dir == "" {
		return p, nil
	}
	parts := strings.Split(p, "/")
	parts[1] = dir
	// A folder named "..", say, would make it no session path.
	out := strings.Join(parts, "/")
	if !safename.RelPath(out) || s.Classify(out) != KindSession {
		return "", fmt.Errorf("placing %q gives %q, which is not a session path", p, out)
	}
	return out, nil
}

// HomeRelative reports whether the agent names the folder of a cwd under
// the home relative to it (omp's "-src-app"): the same name then means
// another folder under another home.
func (s *Store) HomeRelative() bool { return s.homeRel }

// Beside names a copy of the session file at rel kept next to it: the
// copy of another machine that cannot be merged (no entry ids). ok is
// false for a format that merges.
//
// Beside: <name>.jsonl.<machine>.
func (s *Store) Beside(rel, machine string) (string, bool) {
	if !s.beside || !safename.Machine(machine) {
		return "", false
	}
	return rel + "." + machine, true
}

// LockFiles are the sidecars of the session file at rel whose fresh
// existence says the agent is writing it.
//
// LockFiles: omp's ".<name>.jsonl.lock" around each write, and the
// "<name>.jsonl.lock" of pi-utils' file lock.
func (s *Store) LockFiles(rel string) []string {
	if !s.locks {
		return nil
	}
	dir, base := path.Split(rel)
	return []string{dir + "." + base + ".lock", dir + base + ".lock"}
}

// ignoredName reports the names no agent's backup ever takes: hidden
// files, locks, temp files and backups.
func ignoredName(base string) bool {
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

// cleanParts splits rel into its segments, or nil when a segment is empty,
// hidden or ignored (then nothing below it is backed up).
func cleanParts(rel string) []string {
	parts := strings.Split(rel, "/")
	if ignoredName(parts[len(parts)-1]) {
		return nil
	}
	for _, p := range parts {
		// NUL is in no real name, and no agent puts a backslash in one: a
		// reader refuses to restore either (safename.RelPath).
		if p == "" || strings.HasPrefix(p, ".") || strings.ContainsAny(p, "\x00\\") {
			return nil
		}
	}
	return parts
}

// ScanOpen lists which processes hold session files (*.jsonl) open, and
// which are the store's agent (those holding its ProcessMarker).
func ScanOpen(s *Store) (*openfiles.Snapshot, error) {
	if m := s.ProcessMarker(); m != "" {
		return openfiles.Scan(".jsonl", m)
	}
	return openfiles.Scan(".jsonl")
}

// firstPrompt is the first thing the user typed in head's whole lines,
// shortened: the title of a session its agent has not titled (yet). With
// tagged, text in <tags> is the agent's own context, not typed.
func firstPrompt(text func([]byte, int) (transcript.Entry, bool), head []byte, tagged bool) string {
	for i, line := range bytes.Split(head[:session.SettledLen(head)], []byte("\n")) {
		// A user's message names its role: the lines before it (tool
		// output, the model's answers, 64 KiB of them in a head) are
		// passed over unparsed, which cost a restore a tenth of its CPU.
		if !bytes.Contains(line, []byte(`"user"`)) {
			continue
		}
		e, ok := text(line, i+1)
		if !ok || e.Role != "user" {
			continue
		}
		for _, p := range e.Parts {
			t := strings.TrimSpace(p.Text)
			if p.Kind == transcript.Text && t != "" && !(tagged && strings.HasPrefix(t, "<")) {
				return shorten(p.Text, 80)
			}
		}
	}
	return ""
}

// shorten is s on one line, cut to n characters.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// The helpers below read the JSON shapes the agents' Text methods share.

// compactJSON is a tool call's arguments on one line: a JSON value
// compacted, or a string holding JSON (as Codex keeps them) compacted, or
// the string itself; "" for nothing.
func compactJSON(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		if json.Valid([]byte(s)) {
			raw = []byte(s)
		} else {
			return s
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return ""
	}
	return b.String()
}

// blockText is the text a content value holds: a string, or the "text" of
// each of a list of blocks (a tool's output in the Anthropic and OpenAI
// shapes; images and other blocks have none), or an object's "content"
// (older Codex outputs), one block a line.
func blockText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	var s string
	switch raw[0] {
	case '"':
		_ = json.Unmarshal(raw, &s)
		return s
	case '[':
		var blocks []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(raw, &blocks)
		var texts []string
		for _, b := range blocks {
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		}
		return strings.Join(texts, "\n")
	case '{':
		var o struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &o) == nil && len(o.Content) > 0 && o.Content[0] != '{' {
			return blockText(o.Content)
		}
	}
	return ""
}
