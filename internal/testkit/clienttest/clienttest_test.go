package clienttest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/omptest"
	"github.com/ompsync/ompsync/store"
)

// checkWritten: the client wrote one session file, where its store looks,
// named by the id the store reads from it, recording the cwd it ran in,
// holding the tool's output.
func checkWritten(t *testing.T, st *store.Store, dir, cwd string, files []string) string {
	t.Helper()
	if len(files) != 1 {
		t.Fatalf("%s wrote %d session files: %v", st.Name(), len(files), files)
	}
	rel, _ := filepath.Rel(dir, files[0])
	rel = filepath.ToSlash(rel)
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if k := st.Classify(rel); k != store.KindSession {
		t.Errorf("%s: its session %s is classified %s", st.Name(), rel, k)
	}
	id := st.SessionID(rel, data[:min(len(data), 8<<10)])
	if name, ok := st.IDFromName(rel); !ok || name != id {
		t.Errorf("%s: the file names session %q, its content %q", st.Name(), name, id)
	}
	if info, ok := st.Describe(data[:min(len(data), 64<<10)]); !ok || info.Cwd != cwd {
		t.Errorf("%s: Describe = %+v, %v; want cwd %s", st.Name(), info, ok, cwd)
	}
	if !strings.Contains(string(data), "hello from a tool") {
		t.Errorf("%s: the tool's output is not in the session", st.Name())
	}
	return id
}

func TestPiWritesWhatTheStoreReads(t *testing.T) {
	t.Parallel()
	m := omptest.NewModel(t)
	h := NewPiHome(t, FindPi(t), m)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	m.Queue(omptest.Bash("echo hello from a tool"), omptest.Text("done"))
	if _, _, err := h.Print(ctx, "run echo"); err != nil {
		t.Fatal(err)
	}
	id := checkWritten(t, store.Pi(), h.AgentDir(), h.Cwd, h.SessionFiles())
	if got := filepath.Base(filepath.Dir(h.SessionFiles()[0])); got != h.CwdDir() {
		t.Errorf("pi's folder %s, want %s", got, h.CwdDir())
	}
	if _, _, err := h.Print(ctx, "--session", id[:13], "again"); err != nil {
		t.Fatal(err)
	}
	checkWritten(t, store.Pi(), h.AgentDir(), h.Cwd, h.SessionFiles())
}

func TestClaudeWritesWhatTheStoreReads(t *testing.T) {
	t.Parallel()
	m := omptest.NewModel(t)
	h := NewClaudeHome(t, FindClaude(t), m)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	m.Queue(omptest.ToolCall("Bash", map[string]any{"command": "echo hello from a tool", "description": "say hello"}), omptest.Text("done"))
	if _, _, err := h.Print(ctx, "run echo"); err != nil {
		t.Fatal(err)
	}
	id := checkWritten(t, store.Claude(), h.ConfigDir(), h.Cwd, h.SessionFiles())
	if got := filepath.Dir(h.SessionFiles()[0]); got != h.ProjectDir() {
		t.Errorf("Claude Code's folder %s, want %s", got, h.ProjectDir())
	}
	if _, _, err := h.Print(ctx, "--resume", id, "again"); err != nil {
		t.Fatal(err)
	}
	checkWritten(t, store.Claude(), h.ConfigDir(), h.Cwd, h.SessionFiles())
}

func TestCodexWritesWhatTheStoreReads(t *testing.T) {
	t.Parallel()
	m := omptest.NewModel(t)
	h := NewCodexHome(t, FindCodex(t), m)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	m.Queue(omptest.ToolCall("exec_command", map[string]any{"cmd": "echo hello from a tool"}), omptest.Text("done"))
	if _, _, err := h.Exec(ctx, "run echo"); err != nil {
		t.Fatal(err)
	}
	id := checkWritten(t, store.Codex(), h.ConfigDir(), h.Cwd, h.SessionFiles())
	if _, _, err := h.Exec(ctx, "resume", id, "again"); err != nil {
		t.Fatal(err)
	}
	checkWritten(t, store.Codex(), h.ConfigDir(), h.Cwd, h.SessionFiles())
}
