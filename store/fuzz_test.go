package store

import (
	"bytes"
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/safename"
	"github.com/ompsync/ompsync/transcript"
)

// secret names files that hold credentials, settings or local databases
// in any agent's folder.
func secret(base string) bool {
	switch base {
	case "auth.json", "agent.db", "agent.db-wal", "agent.db-shm", ".credentials.json", "settings.json", "settings.local.json", "config.toml", ".claude.json":
		return true
	}
	return false
}

// FuzzClassify: a path any store would back up never leaves its folder and
// is never a credential, a session id taken from a name is a safe path
// segment, and a session path is one restore writes back.
func FuzzClassify(f *testing.F) {
	for _, p := range []string{
		"sessions/-work/2026-10-07T00-45-40-854Z_01a113d2-be76-73c7-986b-d3ac6e3fbb83.jsonl",
		"sessions/-work/2026-10-07T00-45-40-854Z_01a113d2/subagents/0-Explore.jsonl",
		"blobs/0123abcd",
		"archive/sessions/-w/x_id.jsonl.gz",
		"sessions/../auth.json",
		"sessions/-w/../../x_id.jsonl",
		"sessions/-w/.x_id.jsonl.tmp",
		"agent.db",
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		for _, s := range Known() {
			k := s.Classify(rel)
			if id, ok := s.IDFromName(rel); ok && !safename.SessionID(id) {
				t.Fatalf("%s: IDFromName(%q) = %q, not a valid id", s.Name(), rel, id)
			}
			if k == KindIgnored {
				continue
			}
			if rel == "" || path.IsAbs(rel) || path.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") {
				t.Fatalf("%s: Classify(%q) = %s for a path that is not clean and inside", s.Name(), rel, k)
			}
			if secret(path.Base(rel)) {
				t.Fatalf("%s: Classify(%q) = %s: credentials, settings and databases are never backed up", s.Name(), rel, k)
			}
			if k == KindSession {
				if _, err := s.SessionRel(rel, "", ""); err != nil {
					t.Fatalf("%s: %q is a session, yet restore would refuse its path: %v", s.Name(), rel, err)
				}
			}
		}
	})
}

// FuzzText: whatever a line holds, no store's Text panics on it; an entry
// it reads is valid JSON with a role, numbered as asked, and every part is
// of a known kind with text.
func FuzzText(f *testing.F) {
	for _, client := range []string{"pi", "claude", "codex"} {
		for _, fx := range fixtures(f, client) {
			for _, line := range bytes.Split(fx.data, []byte("\n")) {
				if len(line) < 4096 {
					f.Add(line)
				}
			}
		}
	}
	kinds := map[string]bool{transcript.Text: true, transcript.Thinking: true, transcript.ToolCall: true, transcript.ToolResult: true, transcript.Summary: true}
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, s := range Known() {
			e, ok := s.Text(line, 7)
			if !ok {
				continue
			}
			if !json.Valid(line) || e.Line != 7 || e.Role == "" || len(e.Parts) == 0 {
				t.Fatalf("%s: Text(%q) = %+v", s.Name(), line, e)
			}
			for _, p := range e.Parts {
				if !kinds[p.Kind] || p.Text == "" && p.Kind != transcript.ToolCall {
					t.Fatalf("%s: Text(%q): part %+v", s.Name(), line, p)
				}
			}
		}
	})
}
