package store

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/mergeref"
)

// fixture is one session file a real client wrote (testdata/clients).
type fixture struct {
	rel  string // relative to the client's folder
	id   string // the session's id, as the client names it
	data []byte
}

func fixtures(t testing.TB, client string) []fixture {
	t.Helper()
	root := filepath.Join("..", "testdata", "clients", client)
	var out []fixture
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		stem := strings.TrimSuffix(d.Name(), ".jsonl")
		out = append(out, fixture{rel: filepath.ToSlash(rel), id: stem[len(stem)-36:], data: data})
		return nil
	})
	if err != nil || len(out) == 0 {
		t.Fatalf("fixtures of %s: %d, %v", client, len(out), err)
	}
	return out
}

// Each client's own files: a session where the client put it, named by
// the id the client gave it, its cwd and title read from its first bytes,
// and written back by restore at the same path.
func TestClientFixtures(t *testing.T) {
	for _, tc := range []struct {
		client string
		st     *Store
		title  string
	}{
		{"pi", Pi(), "Run echo for me"},
		{"claude", Claude(), "Run echo for me"},
		{"codex", Codex(), "Run echo for me"},
	} {
		for _, f := range fixtures(t, tc.client) {
			st := tc.st
			if k := st.Classify(f.rel); k != KindSession {
				t.Errorf("%s: Classify(%s) = %s", tc.client, f.rel, k)
			}
			head := f.data[:min(len(f.data), 8<<10)]
			if id := st.SessionID(f.rel, head); id != f.id { // 8 KiB, as the agent reads
				t.Errorf("%s: SessionID = %q, want %q", tc.client, id, f.id)
			}
			if id, ok := st.IDFromName(f.rel); !ok || id != f.id {
				t.Errorf("%s: IDFromName = %q, %v", tc.client, id, ok)
			}
			// The agent reads 64 KiB when a generation begins.
			info, ok := st.Describe(f.data[:min(len(f.data), 64<<10)])
			if !ok || info.Cwd != "/home/u/work" || info.Title != tc.title {
				t.Errorf("%s: Describe = %+v, %v", tc.client, info, ok)
			}
			// Codex's first line holds its whole system prompt: 8 KiB of it
			// still give the id and cwd.
			if tc.client == "codex" {
				if info, ok := st.Describe(head); !ok || info.ID != f.id || info.Cwd != "/home/u/work" {
					t.Errorf("codex: Describe of the first 8 KiB = %+v, %v", info, ok)
				}
			}
			if rel, err := st.SessionRel(f.rel, "", ""); err != nil || rel != f.rel {
				t.Errorf("%s: SessionRel = %q, %v", tc.client, rel, err)
			}
			if st.SlotLen(f.data) != 0 {
				t.Errorf("%s: a title slot found", tc.client)
			}
			// A copy that stopped earlier adds nothing to the whole file.
			cut := bytes.IndexByte(f.data[len(f.data)/2:], '\n') + len(f.data)/2 + 1
			mf, ok := st.MergeFormat()
			if ok != (tc.client != "codex") {
				t.Errorf("%s: MergeFormat ok = %v: codex's lines alone have no entry ids", tc.client, ok)
			}
			if !ok {
				continue
			}
			var merged bytes.Buffer
			_, err := mergeref.MergeTo(mf, &merged, 1<<30, mergeref.ByteSources(f.data[:cut], f.data)...)
			switch {
			case err != nil || !bytes.Equal(merged.Bytes(), f.data):
				t.Errorf("%s: merging a shorter copy into the file gave %d bytes of %d (%v)", tc.client, merged.Len(), len(f.data), err)
			}
		}
	}
}

// What each client keeps beside its sessions is never backed up.
func TestClientSidecarsIgnored(t *testing.T) {
	for _, tc := range []struct {
		st   *Store
		rels []string
	}{
		{Pi(), []string{"auth.json", "models.json", "settings.json", "sessions/--w--/x_1.jsonl.lock", "sessions/--w--/.x_1.jsonl.tmp", "sessions/--w--/x_1/tool.log", "blobs/" + strings.Repeat("a", 64)}},
		{Claude(), []string{".credentials.json", "settings.json", "settings.local.json", "history.jsonl", ".claude.json", "todos/x.json", "file-history/a/b", "projects/-w/memory.md", "projects/-w/.x.jsonl", "statsig/x"}},
		{Codex(), []string{"auth.json", "config.toml", "history.jsonl", "state_5.sqlite", "state_5.sqlite-wal", "log/codex-tui.log", "session_index.jsonl",
			"sessions/2026/12/01/notes.jsonl", "sessions/2026/12/rollout-x.jsonl", "sessions/2026/12/01/rollout-2026-12-01T10-58-05-01a23141-2e5d-7f81-a9c1-830907380787.jsonl.laptop"}},
	} {
		for _, rel := range tc.rels {
			if k := tc.st.Classify(rel); k != KindIgnored {
				t.Errorf("%s: Classify(%q) = %s", tc.st.Name(), rel, k)
			}
		}
	}
	const rollout = "rollout-2026-12-01T10-58-05-01a23141-2e5d-7f81-a9c1-830907380787.jsonl"
	for rel, want := range map[string]Kind{
		"archived_sessions/" + rollout:                                              KindSession,
		"sessions/2026/12/01/" + rollout + ".zst":                                   KindArchive,
		"archived_sessions/" + rollout + ".zst":                                     KindArchive,
		"projects/-w/11553328-b63c-4a3b-b365-66125e479bde/subagents/agent-a1.jsonl": KindArtifact,
	} {
		st := Codex()
		if strings.HasPrefix(rel, "projects/") {
			st = Claude()
		}
		if k := st.Classify(rel); k != want {
			t.Errorf("%s: Classify(%q) = %s, want %s", st.Name(), rel, k, want)
		}
	}
	if id, live, ok := Codex().Archived("sessions/2026/12/01/" + rollout + ".zst"); !ok || id != "01a23141-2e5d-7f81-a9c1-830907380787" || live != "sessions/2026/12/01/"+rollout {
		t.Errorf("Archived = %q %q %v", id, live, ok)
	}
	if id, inner, ok := Claude().Artifact("projects/-w/11553328-b63c-4a3b-b365-66125e479bde/subagents/agent-a1.jsonl"); !ok || id != "11553328-b63c-4a3b-b365-66125e479bde" || inner != "subagents/agent-a1.jsonl" {
		t.Errorf("Artifact = %q %q %v", id, inner, ok)
	}
}

// A session placed in another working folder goes into that folder's
// project folder, as Claude Code names it; its name stays.
func TestClaudeSessionRelMoves(t *testing.T) {
	for cwd, want := range map[string]string{
		"/home/bob/code/app":           "projects/-home-bob-code-app/u.jsonl",
		"":                             "projects/-Users-ana-src-api/u.jsonl",
		`C:\Users\ana\app`:             "projects/C--Users-ana-app/u.jsonl",
		"/" + strings.Repeat("x", 300): "projects/-Users-ana-src-api/u.jsonl",
	} {
		if got, err := Claude().SessionRel("projects/-Users-ana-src-api/u.jsonl", cwd, "/home/bob"); err != nil || got != want {
			t.Errorf("SessionRel(%q) = %q, %v; want %s", cwd, got, err, want)
		}
	}
	if _, err := Claude().SessionRel("projects/../u.jsonl", "/x", ""); err == nil {
		t.Error("a path leaving projects/ was accepted")
	}
}
