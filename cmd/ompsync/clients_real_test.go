package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/ompsync/ompsync/internal/testkit/clienttest"
	"github.com/ompsync/ompsync/internal/testkit/omptest"
	"github.com/ompsync/ompsync/internal/testkit/writetest"
	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/restore"
	"github.com/ompsync/ompsync/store"
)

// These tests let the real pi, Claude Code and Codex (internal/testkit/clienttest:
// npm, against the fake model on 127.0.0.1) write every session file, and
// check what ompsync backs up and restores against them, as the real-omp
// tests do for omp.

// client is one machine's real client, as these tests drive it.
type client interface {
	store() *store.Store
	home() string   // $HOME
	folder() string // the client's folder (what ompsync backs up)
	// turn runs one turn: a new session, or resumed by id.
	turn(ctx context.Context, resumeID, prompt string) error
	files() []string // session files
	// deleteSession deletes a session as the client (or its cleanup) does.
	deleteSession(ctx context.Context, id, path string) error
	toolCall() omptest.Reply
}

type piClient struct{ *clienttest.PiHome }

func (c piClient) store() *store.Store { return store.Pi() }
func (c piClient) home() string        { return c.Dir }
func (c piClient) folder() string      { return c.AgentDir() }
func (c piClient) files() []string     { return c.SessionFiles() }
func (c piClient) toolCall() omptest.Reply {
	return omptest.Bash("echo hello from a tool")
}
func (c piClient) turn(ctx context.Context, id, prompt string) error {
	args := []string{prompt}
	if id != "" {
		args = []string{"--session", id, prompt}
	}
	_, _, err := c.Print(ctx, args...)
	return err
}

// pi's /resume picker deletes a session file (to the trash when there is one).
func (c piClient) deleteSession(_ context.Context, _, path string) error { return os.Remove(path) }

type claudeClient struct{ *clienttest.ClaudeHome }

func (c claudeClient) store() *store.Store { return store.Claude() }
func (c claudeClient) home() string        { return c.Dir }
func (c claudeClient) folder() string      { return c.ConfigDir() }
func (c claudeClient) files() []string     { return c.SessionFiles() }
func (c claudeClient) toolCall() omptest.Reply {
	return omptest.ToolCall("Bash", map[string]any{"command": "echo hello from a tool", "description": "say hello"})
}
func (c claudeClient) turn(ctx context.Context, id, prompt string) error {
	args := []string{prompt}
	if id != "" {
		args = []string{"--resume", id, prompt}
	}
	_, _, err := c.Print(ctx, args...)
	return err
}

// Claude Code's cleanup (cleanupPeriodDays) removes old transcripts.
func (c claudeClient) deleteSession(_ context.Context, _, path string) error { return os.Remove(path) }

type codexClient struct{ *clienttest.CodexHome }

func (c codexClient) store() *store.Store { return store.Codex() }
func (c codexClient) home() string        { return c.Dir }
func (c codexClient) folder() string      { return c.ConfigDir() }
func (c codexClient) files() []string     { return c.SessionFiles() }
func (c codexClient) toolCall() omptest.Reply {
	return omptest.ToolCall("exec_command", map[string]any{"cmd": "echo hello from a tool"})
}
func (c codexClient) turn(ctx context.Context, id, prompt string) error {
	args := []string{prompt}
	if id != "" {
		args = []string{"resume", id, prompt}
	}
	_, _, err := c.Exec(ctx, args...)
	return err
}
func (c codexClient) deleteSession(ctx context.Context, id, _ string) error {
	_, _, err := c.Run(ctx, "delete", "--force", id)
	return err
}

// clientMachine is a machine with a real client and ompsync backing up its
// folder (that agent alone).
type clientMachine struct {
	*machineEnv
	c client
}

func newClientMachine(t *testing.T, c client, remoteURL, name string) *clientMachine {
	m := newMachineEnv(t, remoteURL, backend.S3Options{}, name)
	return &clientMachine{m, c}
}

// run runs ompsync as this machine, for the client's agent alone.
func (m *clientMachine) run(args ...string) (int, string) {
	m.t.Helper()
	name := m.c.store().Name()
	cmd, out := m.startWith([]string{"HOME=" + m.c.home(), "OMPSYNC_AGENTS=" + name,
		"OMPSYNC_" + strings.ToUpper(name) + "_DIR=" + m.c.folder()}, args...)
	code := 0
	if err := cmd.Wait(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			m.t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return code, out.String()
}

func (m *clientMachine) must(args ...string) string {
	m.t.Helper()
	code, out := m.run(args...)
	if code != 0 {
		m.t.Fatalf("ompsync %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// theSession is the client's one session file and its id.
func (m *clientMachine) theSession() (path, id string) {
	m.t.Helper()
	files := m.c.files()
	if len(files) != 1 {
		m.t.Fatalf("%s holds %d session files, want 1: %v", m.c.store().Name(), len(files), files)
	}
	rel, _ := filepath.Rel(m.c.folder(), files[0])
	id, ok := m.c.store().IDFromName(filepath.ToSlash(rel))
	if !ok {
		m.t.Fatalf("no session id in %s", files[0])
	}
	return files[0], id
}

// sameFile checks that the file restored at got holds the bytes and mtime
// of the one the client wrote at path.
func sameFile(t *testing.T, path, got string) {
	t.Helper()
	want, wfi := readFile(t, path), stat(t, path)
	if !bytes.Equal(readFile(t, got), want) {
		t.Fatalf("%s restored with bytes that differ from the %d the client wrote", got, len(want))
	}
	if gfi := stat(t, got); !gfi.ModTime().Equal(wfi.ModTime()) {
		t.Errorf("%s restored with mtime %v, the client's %v", got, gfi.ModTime(), wfi.ModTime())
	}
}

func stat(t *testing.T, p string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// resumeAppends has the client resume session id (its file at path) and
// checks it appended to the file without changing what was there.
func resumeAppends(ctx context.Context, t *testing.T, c client, id, path, prompt string) {
	t.Helper()
	before := readFile(t, path)
	if err := c.turn(ctx, id, prompt); err != nil {
		t.Fatalf("%s resuming %s: %v", c.store().Name(), id, err)
	}
	after := readFile(t, path)
	if !bytes.HasPrefix(after, before) || len(after) <= len(before) || !bytes.Contains(after, []byte(prompt)) {
		t.Errorf("%s did not append its turn to %s (%d bytes before, %d after)", c.store().Name(), path, len(before), len(after))
	}
}

// lsState is the state ls gives the session.
func (m *clientMachine) lsState(id string) string {
	m.t.Helper()
	code, out := m.run("ls", "--json")
	if code != 0 {
		m.t.Fatalf("ls: exit %d\n%s", code, out)
	}
	for _, line := range strings.Split(out, "\n") {
		var l struct{ Agent, ID, State string }
		if json.Unmarshal([]byte(line), &l) == nil && l.ID == id {
			if l.Agent != m.c.store().Name() {
				m.t.Errorf("ls names the agent of %s %q", id, l.Agent)
			}
			return l.State
		}
	}
	return ""
}

// realClientLifecycle: a new session with a tool call, resumed, backed up
// each time; restored by id prefix on a new machine, byte for byte, and
// resumed there by the client; deleted as the client deletes it, recorded
// as deleted, and back with restore.
func realClientLifecycle(t *testing.T, newClient func(*omptest.Model) client) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	model := omptest.NewModel(t)
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	laptop := newClientMachine(t, newClient(model), url, "laptop")

	model.Queue(laptop.c.toolCall(), omptest.Text("the tool said hello"))
	if err := laptop.c.turn(ctx, "", "run a tool for me"); err != nil {
		t.Fatal(err)
	}
	path, id := laptop.theSession()
	if !bytes.Contains(readFile(t, path), []byte("hello from a tool")) {
		t.Fatal("the tool's output is not in the session")
	}
	laptop.must("agent", "--once")
	if err := laptop.c.turn(ctx, id, "a second turn"); err != nil {
		t.Fatal(err)
	}
	if err := laptop.c.turn(ctx, id, "a third turn"); err != nil {
		t.Fatal(err)
	}
	if p, _ := laptop.theSession(); p != path {
		t.Fatalf("the resumed session moved from %s to %s", path, p)
	}
	laptop.must("agent", "--once")
	searchable(t, laptop, id)

	// Another machine, another home folder (the laptop's is not there):
	// the session goes into the folders that name the desk's cwd (pi's
	// --<cwd>--, Claude Code's -<cwd>), its cwd rewritten for it, so the
	// client finds it where it looks for the new home's.
	desk := newClientMachine(t, newClient(model), url, "desk")
	laptopCwd, deskCwd := filepath.Join(laptop.c.home(), "work"), filepath.Join(desk.c.home(), "work")
	laptopBack := away(t, laptopCwd)
	out := desk.must("restore", id[:8])
	if !strings.Contains(out, "created") {
		t.Errorf("restore %s did not create the session:\n%s", id[:8], out)
	}
	if hint := "resume it with: cd " + deskCwd + " && " + desk.c.store().Resume(id) + "\n"; !strings.Contains(out, hint) {
		t.Errorf("restore %s does not say %q:\n%s", id[:8], hint, out)
	}
	restored, _ := desk.theSession()
	if want := writetest.Through(readFile(t, path), project.Mapping{From: laptopCwd, To: deskCwd}.Writer); !bytes.Equal(readFile(t, restored), want) {
		t.Errorf("%s restored with bytes that are not the laptop's with the desk's folder", restored)
	}
	resumeAppends(ctx, t, desk.c, id, restored, "resumed after restore")
	laptopBack()

	if err := laptop.c.deleteSession(ctx, id, path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("%s did not delete %s: %v", laptop.c.store().Name(), path, err)
	}
	laptop.must("agent", "--once")
	if st := laptop.lsState(id); st != "deleted" {
		t.Errorf("after the client deleted it, ls says the session is %q", st)
	}
	// The deleted session stays on the remote and comes back with restore,
	// as the laptop last backed it up.
	third := newClientMachine(t, newClient(model), url, "third")
	third.must("restore", "--machine", "laptop", id[:8])
	back, _ := third.theSession()
	code, cat := laptop.run("cat", "--machine", "laptop", id)
	if got := readFile(t, back); code != 0 || !strings.HasSuffix(cat, string(got)) || len(got) == 0 {
		t.Errorf("the deleted session restored from the remote (%d bytes) is not what the laptop backed up (cat: exit %d)", len(got), code)
	}
}

// searchable: grep finds the prompts, the reply, the tool call and the
// tool's output in the session the client wrote, each in omp's roles, and
// cat --text shows them.
func searchable(t *testing.T, m *clientMachine, id string) {
	t.Helper()
	name := m.c.store().Name()
	for _, tc := range []struct{ pattern, role string }{
		{"run a tool for me", "user"},
		{"a third turn", "user"},
		{"the tool said hello", "assistant"},
		{"hello from a tool", "assistant/toolCall"},
		{"hello from a tool", "toolResult"},
	} {
		code, out := m.run("-q", "grep", tc.pattern)
		found := false
		for _, l := range strings.Split(out, "\n") {
			found = found || strings.HasPrefix(l, id+"  ") && strings.Contains(l, "  "+tc.role+"  ") && strings.Contains(l, tc.pattern)
		}
		if code != 0 || !found {
			t.Errorf("%s: grep %q: exit %d, no %s line of session %s:\n%s", name, tc.pattern, code, tc.role, id, out)
		}
	}
	code, out := m.run("cat", "--text", id)
	for _, want := range []string{"session " + id, "  user: run a tool for me\n", "  assistant: the tool said hello\n",
		"  assistant: -> ", "  toolResult: <- ", "  user: a third turn\n"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("%s: cat --text: exit %d, no %q in\n%s", name, code, want, out)
		}
	}
}

func TestRealPiBackupRestore(t *testing.T) {
	pi := clienttest.FindPi(t)
	realClientLifecycle(t, func(m *omptest.Model) client { return piClient{clienttest.NewPiHome(t, pi, m)} })
}

func TestRealClaudeBackupRestore(t *testing.T) {
	c := clienttest.FindClaude(t)
	realClientLifecycle(t, func(m *omptest.Model) client { return claudeClient{clienttest.NewClaudeHome(t, c, m)} })
}

func TestRealCodexBackupRestore(t *testing.T) {
	c := clienttest.FindCodex(t)
	realClientLifecycle(t, func(m *omptest.Model) client { return codexClient{clienttest.NewCodexHome(t, c, m)} })
}

// diverged: one session continued on two machines from the same copy;
// both back up.
func diverged(ctx context.Context, t *testing.T, newClient func(*omptest.Model) client) (laptop, desk *clientMachine, id, rel string) {
	model := omptest.NewModel(t)
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	laptop = newClientMachine(t, newClient(model), url, "laptop")
	if err := laptop.c.turn(ctx, "", "the first turn"); err != nil {
		t.Fatal(err)
	}
	path, id := laptop.theSession()
	laptop.must("agent", "--once")
	desk = newClientMachine(t, newClient(model), url, "desk")
	desk.must("restore", id)
	rel, _ = filepath.Rel(laptop.c.folder(), path)
	if _, err := os.Stat(filepath.Join(desk.c.folder(), rel)); err != nil {
		t.Fatal(err)
	}
	if err := laptop.c.turn(ctx, id, "on the laptop"); err != nil {
		t.Fatal(err)
	}
	if err := desk.c.turn(ctx, id, "on the desk"); err != nil {
		t.Fatal(err)
	}
	laptop.must("agent", "--once")
	desk.must("agent", "--once")
	return laptop, desk, id, rel
}

// Claude Code's copies continued on two machines merge by uuid: every line
// of both is in the merged file, and Claude Code resumes it.
func TestRealClaudeMergeByUUID(t *testing.T) {
	c := clienttest.FindClaude(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	laptop, desk, id, rel := diverged(ctx, t, func(m *omptest.Model) client { return claudeClient{clienttest.NewClaudeHome(t, c, m)} })
	mine := readFile(t, filepath.Join(laptop.c.folder(), rel))
	theirs := readFile(t, filepath.Join(desk.c.folder(), rel))
	// The client has exited; its file changed seconds ago, which alone
	// holds a restore back: --force.
	out := laptop.must("restore", "--force", id)
	if !strings.Contains(out, "merged") {
		t.Fatalf("restore of the diverged copies did not merge:\n%s", out)
	}
	merged := readFile(t, filepath.Join(laptop.c.folder(), rel))
	count := func(b []byte) map[string]int {
		n := map[string]int{}
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			n[l]++
		}
		return n
	}
	have := count(merged)
	for name, copy := range map[string][]byte{"laptop": mine, "desk": theirs} {
		for l, n := range count(copy) {
			if have[l] < n {
				t.Errorf("the merged file lost a line of the %s's copy: %.120s", name, l)
			}
		}
	}
	for _, turn := range []string{"on the laptop", "on the desk"} {
		if !bytes.Contains(merged, []byte(turn)) {
			t.Errorf("the merged file lacks the turn %q", turn)
		}
	}
	resumeAppends(ctx, t, laptop.c, id, filepath.Join(laptop.c.folder(), rel), "after the merge")
}

// Codex's copies that diverged cannot be merged (no entry ids): the local
// file stays as it was, the other machine's copy is written beside it, and
// restore says so; Codex resumes the local one.
func TestRealCodexDivergedCopiesBeside(t *testing.T) {
	c := clienttest.FindCodex(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	laptop, desk, id, rel := diverged(ctx, t, func(m *omptest.Model) client { return codexClient{clienttest.NewCodexHome(t, c, m)} })
	mine := readFile(t, filepath.Join(laptop.c.folder(), rel))
	theirs := readFile(t, filepath.Join(desk.c.folder(), rel))
	out := laptop.must("restore", "--force", id)
	if !strings.Contains(out, rel+".desk") {
		t.Errorf("restore does not say where the desk's copy went:\n%s", out)
	}
	if got := readFile(t, filepath.Join(laptop.c.folder(), rel)); !bytes.Equal(got, mine) {
		t.Error("restore changed the laptop's own copy")
	}
	if got := readFile(t, filepath.Join(laptop.c.folder(), rel+".desk")); !bytes.Equal(got, theirs) {
		t.Errorf("the copy beside holds %d bytes, the desk's %d", len(got), len(theirs))
	}
	// Neither Codex nor the next backup takes the copy beside for a session.
	laptop.must("agent", "--once")
	if code, out := laptop.run("ls", "--json"); code != 0 || strings.Count(out, "\n") != 1 {
		t.Errorf("ls after the copy beside: exit %d\n%s", code, out)
	}
	resumeAppends(ctx, t, laptop.c, id, filepath.Join(laptop.c.folder(), rel), "after the restore")
	if again := laptop.must("restore", "--force", id); !strings.Contains(again, "unchanged") {
		t.Errorf("a second restore wrote again:\n%s", again)
	}
}

// `codex archive` moves a rollout into archived_sessions/: a move, which
// the backup records and restore follows, so the archived session comes
// back archived on another machine and `codex unarchive` finds it there.
func TestRealCodexArchive(t *testing.T) {
	c := clienttest.FindCodex(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	model := omptest.NewModel(t)
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	laptop := newClientMachine(t, codexClient{clienttest.NewCodexHome(t, c, model)}, url, "laptop")
	if err := laptop.c.turn(ctx, "", "a session to archive"); err != nil {
		t.Fatal(err)
	}
	path, id := laptop.theSession()
	laptop.must("agent", "--once")
	cx := laptop.c.(codexClient)
	if _, _, err := cx.Run(ctx, "archive", id); err != nil {
		t.Fatal(err)
	}
	archived := filepath.Join(cx.ConfigDir(), "archived_sessions", filepath.Base(path))
	if _, err := os.Stat(archived); err != nil {
		t.Fatalf("codex archive left no %s: %v", archived, err)
	}
	laptop.must("agent", "--once")
	if st := laptop.lsState(id); st != "present" {
		t.Errorf("ls says the archived rollout is %q", st)
	}
	desk := newClientMachine(t, codexClient{clienttest.NewCodexHome(t, c, model)}, url, "desk")
	desk.must("restore", id)
	dx := desk.c.(codexClient)
	sameFile(t, archived, filepath.Join(dx.ConfigDir(), "archived_sessions", filepath.Base(path)))
	if _, _, err := dx.Run(ctx, "unarchive", id); err != nil {
		t.Fatalf("codex unarchive of the restored rollout: %v", err)
	}
	if len(dx.SessionFiles()) != 1 {
		t.Errorf("after unarchive the desk holds %d rollouts under sessions/", len(dx.SessionFiles()))
	}
}

// A Claude Code subagent's transcript, in the session's folder, is backed up
// and restored with its session, byte for byte.
func TestRealClaudeSubagent(t *testing.T) {
	c := clienttest.FindClaude(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	model := omptest.NewModel(t)
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	laptop := newClientMachine(t, claudeClient{clienttest.NewClaudeHome(t, c, model)}, url, "laptop")
	model.Queue(omptest.ToolCall("Agent", map[string]any{"description": "look around", "prompt": "say hi", "subagent_type": "general-purpose"}),
		omptest.Text("the subagent is on it"), omptest.Text("hi from the subagent"))
	if err := laptop.c.turn(ctx, "", "use a subagent"); err != nil {
		t.Fatal(err)
	}
	path, id := laptop.theSession()
	subs, _ := filepath.Glob(filepath.Join(strings.TrimSuffix(path, ".jsonl"), "subagents", "agent-*.jsonl"))
	if len(subs) == 0 {
		t.Fatal("Claude Code wrote no subagent transcript")
	}
	laptop.must("agent", "--once")
	desk := newClientMachine(t, claudeClient{clienttest.NewClaudeHome(t, c, model)}, url, "desk")
	away(t, filepath.Join(laptop.c.home(), "work")) // not on the desk
	out := desk.must("restore", id, "--path-map", laptop.c.home()+"="+desk.c.home())
	if !strings.Contains(out, "artifact files") {
		t.Errorf("restore says nothing of the subagent's files:\n%s", out)
	}
	restored, _ := desk.theSession()
	for _, sub := range subs {
		rel, _ := filepath.Rel(strings.TrimSuffix(path, ".jsonl"), sub)
		got := filepath.Join(strings.TrimSuffix(restored, ".jsonl"), rel)
		if !bytes.Equal(readFile(t, got), readFile(t, sub)) {
			t.Errorf("the subagent transcript %s was not restored as Claude Code wrote it", rel)
		}
	}
	resumeAppends(ctx, t, desk.c, id, restored, "after the subagent")
}

// grep and cat --text read the files the real clients wrote (the fixtures
// of testdata/clients) as they read omp's: one line per match, the
// session, its title, the entry, the role and the text; the transcript
// with its heading.
func TestClientFixturesGrepCat(t *testing.T) {
	url := "file://" + t.TempDir() + "/remote"
	laptop := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	plantClients(t, laptop.env["HOME"])
	if r := laptop.run("agent", "--once"); r.code != 0 {
		t.Fatalf("agent --once: exit %d\n%s", r.code, r.stderr)
	}
	const (
		claudeID = "11553328-b63c-4a3b-b365-66125e479bde"
		codexID  = "01a23141-2e5d-7f81-a9c1-830907380787"
		at       = `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`
	)
	desk := newRestoreEnv(t, url, backend.S3Options{}, "desk")
	for _, tc := range []struct {
		agent, pattern string
		want           []string // regular expressions, one a line, newest session first
	}{
		{"claude", "Run echo", []string{claudeID + `  "Run echo for me"  2ac1845a-3238-4053-a331-b6f25c817d82  user  ` + at + `  Run echo for me`}},
		{"claude", "hello", []string{
			claudeID + `  "Run echo for me"  30b267ab-f127-4a27-8d6c-38df2f46c446  assistant/toolCall  ` + at + `  Bash \{"command":"echo hello from a tool","description":"Say hello"\}`,
			claudeID + `  "Run echo for me"  a9ee45b9-115b-4255-9a74-8b37e781695f  toolResult  ` + at + `  hello from a tool`,
			claudeID + `  "Run echo for me"  5288621f-325d-49ed-8229-dcddffc44378  assistant  ` + at + `  The tool said hello\.`,
		}},
		{"codex", "Run echo", []string{codexID + `  "Run echo for me"  msg_01a23141-2f70-7200-82d4-3b89181b203b  user  ` + at + `  Run echo for me`}},
		{"codex", "hello", []string{
			codexID + `  "Run echo for me"  fc_0003  assistant/toolCall  ` + at + `  exec_command \{"cmd":"echo hello from a tool"\}`,
			codexID + `  "Run echo for me"  fco_01a23141-2fe1-7701-bc1f-6bb278f500f0  toolResult  ` + at + `  hello from a tool`,
			codexID + `  "Run echo for me"  msg_0002  assistant  ` + at + `  The tool said hello\.`,
		}},
	} {
		r := desk.run("grep", "--agent", tc.agent, tc.pattern)
		got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		ok := r.code == 0 && len(got) == len(tc.want)
		for i := 0; ok && i < len(got); i++ {
			ok = regexp.MustCompile("^" + tc.want[i] + "$").MatchString(got[i])
		}
		if !ok {
			t.Errorf("grep --agent %s %q: exit %d\n%s%s\nwant\n%s", tc.agent, tc.pattern, r.code, r.stdout, r.stderr, strings.Join(tc.want, "\n"))
		}
	}
	// Without --agent, every agent's: pi's, Claude Code's, Codex's (and
	// the JSON names the agent).
	r := desk.run("grep", "--json", "And again, briefly")
	agents := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m restore.GrepMatch
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("grep --json: %v in %q", err, l)
		}
		agents[m.Agent] = m.Role + " " + m.Kind + " " + m.Text
	}
	for _, agent := range []string{"pi", "claude", "codex"} {
		if agents[agent] != "user text And again, briefly" {
			t.Errorf("grep --json: %s's match %q (exit %d)", agent, agents[agent], r.code)
		}
	}

	for id, want := range map[string][]string{
		claudeID: {
			"session " + claudeID + "  Run echo for me  (/home/u/work)",
			"user: Run echo for me",
			`assistant: -> Bash {"command":"echo hello from a tool","description":"Say hello"}`,
			"toolResult: <- hello from a tool",
			"assistant: The tool said hello.",
			"assistant: No response requested.",
			"user: And again, briefly",
			"assistant: ok 0002",
		},
		codexID: {
			"session " + codexID + "  Run echo for me  (/home/u/work)",
			"user: <environment_context>",
			"user: Run echo for me",
			`assistant: -> exec_command {"cmd":"echo hello from a tool"}`,
			"toolResult: <- Chunk ID: 372266 Wall time: 0.0000 seconds Process exited with code 0 Original token count: 5 Output: hello from a tool (6 lines)",
			"assistant: The tool said hello.",
			"user: And again, briefly",
			"assistant: ok 0003",
		},
	} {
		r := desk.run("cat", "--text", id[:13])
		// The heading, then each entry's first line without its time
		// (the lines that go on an entry's text are indented).
		entry := regexp.MustCompile("^" + at + "  (.*)$")
		var got []string
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, "session ") {
				got = append(got, l)
			} else if m := entry.FindStringSubmatch(l); m != nil {
				got = append(got, m[1])
			}
		}
		if r.code != 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("cat --text %s: exit %d\n%s%s\nwant the lines\n%s", id[:13], r.code, r.stdout, r.stderr, strings.Join(want, "\n"))
		}
		// history names each copy by the title the session's first prompt gives.
		if r := desk.run("history", "--json", id[:13]); r.code != 0 || !strings.Contains(r.stdout, `"title":"Run echo for me"`) {
			t.Errorf("history %s: exit %d\n%s%s", id[:13], r.code, r.stdout, r.stderr)
		}
	}
}

// A rollout Codex compressed in place (<name>.jsonl.zst, its background
// maintenance of idle rollouts, which a test cannot wait for: here the
// real rollout of testdata/clients through zstd) is backed up as the
// session archived; restore on another machine writes the rollout Codex
// reads, byte for byte what was compressed, and grep reads its text.
func TestCodexCompressedRollout(t *testing.T) {
	const rel = "sessions/2026/12/01/rollout-2026-12-01T10-58-05-01a23141-2e5d-7f81-a9c1-830907380787.jsonl"
	const id = "01a23141-2e5d-7f81-a9c1-830907380787"
	url := "file://" + t.TempDir() + "/remote"
	laptop := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	data := readFile(t, "../../testdata/clients/codex/"+rel)
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(laptop.env["HOME"], ".codex", rel+".zst"), string(enc.EncodeAll(data, nil)), 0o600)
	if r := laptop.run("agent", "--once"); r.code != 0 || !strings.Contains(r.stdout, "codex: 1 file checked: 1 uploaded") {
		t.Fatalf("agent --once: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := laptop.run("ls", "--json")
	var l struct{ Agent, ID, Path, State string }
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &l); err != nil || l.Agent != "codex" || l.ID != id || l.Path != rel || l.State != "archived" {
		t.Errorf("ls --json: exit %d, %+v (%v)\n%s", r.code, l, err, r.stdout)
	}
	desk := newRestoreEnv(t, url, backend.S3Options{}, "desk")
	if r := desk.run("restore", id[:13]); r.code != 0 || !strings.Contains(r.stdout, "created") {
		t.Fatalf("restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := readFile(t, filepath.Join(desk.env["HOME"], ".codex", rel)); !bytes.Equal(got, data) {
		t.Errorf("restored %d bytes, the rollout held %d", len(got), len(data))
	}
	if r := desk.run("-q", "grep", "Run echo for me"); r.code != 0 || !strings.HasPrefix(r.stdout, id+`  "Run echo for me"  msg_`) {
		t.Errorf("grep of the compressed rollout: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// Sync works for every client's sessions at once: what pi, Claude Code and
// Codex wrote on one machine appears, byte for byte, in each client's
// folder on another that runs agent --pull, and SIGTERM stops it, exit 0.
func TestPullEveryClient(t *testing.T) {
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	const agents = "OMPSYNC_AGENTS=pi,claude,codex"
	laptop := newMachineEnv(t, url, backend.S3Options{}, "laptop")
	want := plantClients(t, laptop.home)
	if code, out := laptop.startWithWait([]string{agents}, "agent", "--once"); code != 0 {
		t.Fatalf("agent --once: exit %d\n%s", code, out)
	}
	desk := newMachineEnv(t, url, backend.S3Options{}, "desk")
	for _, dir := range clientFolders {
		if err := os.MkdirAll(filepath.Join(desk.home, dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cmd, out := desk.startWith([]string{agents}, "agent", "--pull", "--pull-interval", "100ms", "--interval", "100ms")
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	for rel, data := range want {
		if strings.HasSuffix(rel, ".jsonl") {
			waitUntil(t, rel+" pulled", func() bool {
				b, err := os.ReadFile(filepath.Join(desk.home, rel))
				return err == nil && bytes.Equal(b, data)
			})
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent --pull after SIGTERM: %v\n%s", err, out)
	}
	for _, secret := range []string{".claude/.credentials.json", ".codex/auth.json", ".pi/agent/auth.json"} {
		if _, err := os.Stat(filepath.Join(desk.home, secret)); !os.IsNotExist(err) {
			t.Errorf("%s came to the desk: %v", secret, err)
		}
	}
}
