package main

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ompsync/ompsync/remote/backend"
)

// clientFolders are where each agent's fixtures go below HOME, with the
// agent's credentials and settings planted beside them.
var clientFolders = map[string]string{"pi": ".pi/agent", "claude": ".claude", "codex": ".codex"}

const plantedSecret = "planted-secret-never-uploaded-0b5f"

// plantClients copies every client's fixtures (testdata/clients) into the
// agents' folders under home, and plants a secret in the files each agent
// keeps beside its sessions. It returns the files by agent and path below
// home.
func plantClients(t *testing.T, home string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for client, dir := range clientFolders {
		root := filepath.Join("..", "..", "testdata", "clients", client)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			writeFile(t, filepath.Join(home, dir, rel), string(data), 0o600)
			out[filepath.ToSlash(filepath.Join(dir, rel))] = data
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{".pi/agent/auth.json", ".pi/agent/models.json", ".claude/.credentials.json", ".claude/settings.json",
		".claude/history.jsonl", ".codex/auth.json", ".codex/config.toml", ".codex/history.jsonl"} {
		writeFile(t, filepath.Join(home, p), `{"token":"`+plantedSecret+`"}`+"\n", 0o600)
	}
	return out
}

// filesUnder reads every regular file below home's agent folders.
func filesUnder(t *testing.T, home string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, dir := range []string{".omp", ".pi", ".claude", ".codex", "to"} {
		_ = filepath.WalkDir(filepath.Join(home, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			rel, _ := filepath.Rel(home, p)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.ToSlash(rel)] = data
			return nil
		})
	}
	return out
}

// Every agent whose folder exists is backed up by one `agent --once`, into
// its own folder of the repository; `ls` names the agent; a new machine's
// `restore --all` puts each session where its agent looks for it, byte for
// byte; a prefix finds a session whatever agent wrote it; nothing an agent
// keeps beside its sessions leaves the machine.
func TestEveryAgentBackedUpAndRestored(t *testing.T) {
	t.Parallel()
	remoteDir := filepath.Join(t.TempDir(), "remote")
	url := "file://" + remoteDir
	laptop := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	home := laptop.env["HOME"]
	omp, err := os.ReadFile("../../testdata/corpus/omp-v18-title-slot-skill-toolcalls_01a113d2.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	const ompRel = ".omp/agent/sessions/-work/2026-10-07T00-45-40-854Z_01a113d2-be76-73c7-986b-d3ac6e3fbb83.jsonl"
	writeFile(t, filepath.Join(home, ompRel), string(omp), 0o600)
	want := plantClients(t, home)
	want[ompRel] = omp

	r := laptop.run("agent", "--once")
	if r.code != 0 {
		t.Fatalf("agent --once: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, name := range []string{"omp: ", "pi: ", "claude: ", "codex: "} {
		if !strings.Contains(r.stdout+r.stderr, name+"1 file checked") {
			t.Errorf("agent --once printed no totals line starting %q:\n%s%s", name, r.stdout, r.stderr)
		}
	}
	// Each agent in its own folder of the repository; omp's where it always was.
	for _, key := range []string{"v1/machines/laptop/catalog", "v1/agents/pi/machines/laptop/catalog", "v1/agents/claude/machines/laptop/catalog", "v1/agents/codex/machines/laptop/catalog"} {
		if _, err := os.Stat(filepath.Join(remoteDir, filepath.FromSlash(key))); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
	if ids, _ := os.ReadDir(filepath.Join(remoteDir, "v1", "sessions")); len(ids) != 1 || ids[0].Name() != "01a113d2-be76-73c7-986b-d3ac6e3fbb83" {
		t.Errorf("omp's v1/sessions/ holds %v; want omp's session alone", ids)
	}
	_ = filepath.WalkDir(remoteDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(plantedSecret)) {
				t.Errorf("%s holds an agent's credentials or settings", p)
			}
		}
		return nil
	})

	r = laptop.run("ls", "--json")
	agents := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var l struct{ Agent, ID string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("ls --json: %v: %q", err, line)
		}
		agents[l.Agent] = l.ID
	}
	if r.code != 0 || len(agents) != 4 {
		t.Fatalf("ls --json: exit %d, agents %v\n%s", r.code, agents, r.stderr)
	}
	if r := laptop.run("ls"); !strings.HasPrefix(r.stdout, "ID ") || !strings.Contains(r.stdout, "claude") {
		t.Errorf("ls has no AGENT column:\n%s", r.stdout)
	}

	// compact and prune look at this machine's sessions of every agent.
	if r := laptop.run("compact", "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, "of 4 sessions") {
		t.Errorf("compact --dry-run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := laptop.run("prune", "--dry-run", "--retention-generations", "1h"); r.code != 0 || strings.Count(r.stdout, ": dry run: would delete") != 4 {
		t.Errorf("prune --dry-run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A new machine gets every agent's sessions back where each looks.
	desk := newRestoreEnv(t, url, backend.S3Options{}, "desk")
	if r := desk.run("restore", "--all"); r.code != 0 {
		t.Fatalf("restore --all: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	got := filesUnder(t, desk.env["HOME"])
	for rel, data := range want {
		if !bytes.Equal(got[rel], data) {
			t.Errorf("restore --all: %s has %d bytes, the agent wrote %d", rel, len(got[rel]), len(data))
		}
	}
	for rel := range got {
		if _, ok := want[rel]; !ok {
			t.Errorf("restore --all made %s, which no agent wrote", rel)
		}
	}

	// A prefix finds Claude Code's session and puts it in Claude Code's folder.
	third := newRestoreEnv(t, url, backend.S3Options{}, "third")
	if r := third.run("restore", agents["claude"][:8]); r.code != 0 || !strings.Contains(r.stdout, "(claude)") {
		t.Fatalf("restore %s: exit %d\n%s%s", agents["claude"][:8], r.code, r.stdout, r.stderr)
	}
	got = filesUnder(t, third.env["HOME"])
	if len(got) != 1 {
		t.Errorf("restore by a Claude Code prefix wrote %d files: %v", len(got), slices.Collect(maps.Keys(got)))
	}
	for rel, data := range got {
		if !strings.HasPrefix(rel, ".claude/projects/-home-u-work/") || !bytes.Equal(data, want[rel]) {
			t.Errorf("restore by prefix wrote %s", rel)
		}
	}

	// --to is one agent's folder.
	to := filepath.Join(third.env["HOME"], "to")
	if r := third.run("restore", "--all", "--to", to); r.code != exitUsage || !strings.Contains(r.stderr, "--agent") {
		t.Errorf("restore --all --to with four agents: exit %d, %q", r.code, r.stderr)
	}
	if r := third.run("restore", "--all", "--to", to, "--agent", "pi"); r.code != 0 {
		t.Fatalf("restore --all --to --agent pi: exit %d\n%s", r.code, r.stderr)
	}
	for rel, data := range filesUnder(t, third.env["HOME"]) {
		if p, ok := strings.CutPrefix(rel, "to/"); ok && !bytes.Equal(data, want[".pi/agent/"+p]) {
			t.Errorf("restore --to --agent pi wrote %s", rel)
		}
	}
	if _, err := os.Stat(filepath.Join(to, "sessions", "--home-u-work--")); err != nil {
		t.Errorf("pi's session is not in --to: %v", err)
	}
}

// The running agent watches every agent side by side: a Claude Code
// transcript that grows is uploaded as omp's sessions are, with metrics
// told apart by agent, and SIGTERM stops all of them after a last upload,
// exit 0.
func TestRunningAgentWatchesEveryAgent(t *testing.T) {
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	m := newMachineEnv(t, url, backend.S3Options{}, "both")
	want := plantClients(t, m.home)
	const transcript = ".claude/projects/-home-u-work/11553328-b63c-4a3b-b365-66125e479bde.jsonl"
	addr := freeAddr(t)
	cmd, out := m.startWith([]string{"OMPSYNC_AGENTS=omp,claude"}, "agent", "--interval", "1h", "--metrics-addr", addr)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitUntil(t, "both agents start", func() bool {
		return strings.Contains(out.String(), `agent started" agent=omp`) && strings.Contains(out.String(), `agent started" agent=claude`)
	})
	line := `{"type":"user","uuid":"u-after-start","parentUuid":null,"sessionId":"11553328-b63c-4a3b-b365-66125e479bde","timestamp":"2026-12-01T12:00:00.000Z"}` + "\n"
	f, err := os.OpenFile(filepath.Join(m.home, transcript), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(line); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitUntil(t, "metrics of both agents", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `ompsync_bytes_pending{agent="omp"}`) && strings.Contains(string(b), `ompsync_bytes_pending{agent="claude"}`)
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent after SIGTERM: %v\n%s", err, out)
	}
	desk := newMachineEnv(t, url, backend.S3Options{}, "desk")
	if code, o := desk.startWithWait([]string{"OMPSYNC_AGENTS=omp,claude"}, "restore", "--all"); code != 0 {
		t.Fatalf("restore --all: exit %d\n%s", code, o)
	}
	got := readFile(t, filepath.Join(desk.home, transcript))
	if !bytes.Equal(got, append(want[transcript], line...)) {
		t.Errorf("the transcript restored holds %d bytes; %d were written before SIGTERM", len(got), len(want[transcript])+len(line))
	}
	if _, err := os.Stat(filepath.Join(desk.home, ".pi")); err == nil {
		t.Error("pi was backed up, though agents names omp and claude alone")
	}
}

// startWithWait runs `ompsync args...` of machine m with extra environment
// to completion.
func (m *machineEnv) startWithWait(extra []string, args ...string) (int, string) {
	m.t.Helper()
	cmd, out := m.startWith(extra, args...)
	if err := cmd.Wait(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			m.t.Fatal(err)
		}
		return ee.ExitCode(), out.String()
	}
	return 0, out.String()
}

// Sync works for every agent: a Claude Code transcript backed up on one
// machine appears, byte for byte, in Claude Code's folder on another that
// runs agent --pull.
func TestPullAnotherAgent(t *testing.T) {
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	laptop := newMachineEnv(t, url, backend.S3Options{}, "laptop")
	want := plantClients(t, laptop.home)
	const transcript = ".claude/projects/-home-u-work/11553328-b63c-4a3b-b365-66125e479bde.jsonl"
	if code, out := laptop.startWithWait([]string{"OMPSYNC_AGENTS=claude"}, "agent", "--once"); code != 0 {
		t.Fatalf("agent --once: exit %d\n%s", code, out)
	}
	desk := newMachineEnv(t, url, backend.S3Options{}, "desk")
	if err := os.MkdirAll(filepath.Join(desk.home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd, out := desk.startWith([]string{"OMPSYNC_AGENTS=claude"}, "agent", "--pull", "--pull-interval", "100ms", "--interval", "100ms")
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitUntil(t, "the transcript pulled", func() bool {
		b, err := os.ReadFile(filepath.Join(desk.home, transcript))
		return err == nil && bytes.Equal(b, want[transcript])
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent --pull after SIGTERM: %v\n%s", err, out)
	}
}
