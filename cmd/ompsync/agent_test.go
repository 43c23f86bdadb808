package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote/backend"
)

// agent --once fails clearly, with exit 1, when there is nothing to back up
// or nowhere to put it, and refuses to run beside another agent.
func TestAgentOnceFailures(t *testing.T) {
	m := newMachineEnv(t, "file://"+t.TempDir(), backend.S3Options{}, "failing")
	if _, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 11, 1); err != nil {
		t.Fatal(err)
	}

	// No agent dir.
	code, out := m.ompsync("agent", "--once", "--agent-dir", filepath.Join(m.home, "nowhere"))
	if code != 1 || !strings.Contains(out, "agent dir") || !strings.Contains(out, "nowhere") {
		t.Fatalf("missing agent dir: exit %d\n%s", code, out)
	}

	// A remote that does not answer: exit 1, no secret in the output.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	down := newMachineEnv(t, "s3://bucket", backend.S3Options{Client: "aws", Endpoint: "http://" + dead, AccessKeyID: "AKIATEST", SecretAccessKey: "s3cr3t-never-printed"}, "failing")
	down.agentDir = m.agentDir
	code, out = down.ompsync("agent", "--once")
	if code != 1 || !strings.Contains(out, "backup pass incomplete") {
		t.Fatalf("unreachable remote: exit %d\n%s", code, out)
	}
	// Its totals say the pass stopped: a bare "0 files checked: 0
	// uploaded" reads as nothing to do.
	if !strings.Contains(out, "incomplete: 0 files checked") || regexp.MustCompile(`(?m)^0 files checked`).MatchString(out) {
		t.Errorf("unreachable remote: the totals do not say the pass was incomplete\n%s", out)
	}
	if strings.Contains(out, "s3cr3t-never-printed") {
		t.Fatalf("the secret key is in the output:\n%s", out)
	}

	// A second agent on the same state dir.
	cmd, first := m.start("agent")
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	waitUntil(t, "the first agent", func() bool { return strings.Contains(first.String(), "agent started") })
	// Its first pass ends with the totals line, as agent --once's does.
	waitUntil(t, "the first pass's totals", func() bool { return strings.Contains(first.String(), "first pass: ") })
	if !strings.Contains(first.String(), "first pass: 1 file checked: 1 uploaded, 0 already up to date") {
		t.Errorf("the first pass's totals:\n%s", first)
	}
	code, out = m.ompsync("agent", "--once")
	if code != 1 || !strings.Contains(out, "another ompsync agent is running") {
		t.Fatalf("second agent: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(m.home, "state", "lock")); err != nil {
		t.Fatal(err)
	}
}

// A missing agent folder is told with the ways to set it: only flags that
// agent has (no --codex-dir), each of which it then takes.
func TestAgentMissingFolderFlags(t *testing.T) {
	env, home := newEnv(t)
	env["OMPSYNC_REMOTE"] = "file://" + t.TempDir()
	for _, name := range config.AgentNames() {
		env["OMPSYNC_AGENTS"] = name
		r := runWith(t, env, "agent", "--once")
		msg := oneErrorLine(t, r)
		if r.code != exitFailure || !strings.Contains(msg, "does not exist: set "+config.FolderKey(name)) {
			t.Fatalf("%s: exit %d, %q", name, r.code, msg)
		}
		for _, flag := range regexp.MustCompile(`--[a-z-]+`).FindAllString(msg, -1) {
			if r := runWith(t, env, "agent", "--once", flag, home); r.code == exitUsage {
				t.Errorf("%s: the error names %s, which agent refuses: %q", name, flag, r.stderr)
			}
		}
	}
	env["OMPSYNC_AGENTS"] = "codex"
	want := "ompsync: codex's folder " + filepath.Join(home, ".codex") + " does not exist: set codex.dir (OMPSYNC_CODEX_DIR, the config file), or leave codex out of agents\n"
	if r := runWith(t, env, "agent", "--once"); r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
}

// The long-running agent waits for a missing agent dir, says so once, and
// backs it up once it appears.
func TestAgentWaitsForAgentDir(t *testing.T) {
	m := newMachineEnv(t, "file://"+t.TempDir(), backend.S3Options{}, "patient")
	if err := os.RemoveAll(m.agentDir); err != nil {
		t.Fatal(err)
	}
	cmd, out := m.start("agent", "--interval", "100ms")
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	waitUntil(t, "the waiting message", func() bool { return strings.Contains(out.String(), "waiting for the agent dir") })
	w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 12, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := openTestRepo(t, m.remote, m.s3)
	b, _ := os.ReadFile(w.files[0])
	waitUntil(t, "the session on the remote", func() bool { return remoteSize(t, r, idOf(w.files[0]), "patient") == int64(len(b)) })
	if n := strings.Count(out.String(), "waiting for the agent dir"); n != 1 {
		t.Fatalf("said it was waiting %d times:\n%s", n, out)
	}
}

// omp writes its sessions to $PI_CODING_AGENT_SESSION_DIR when it is set:
// an agent that backs up agent_dir/sessions instead would back up nothing,
// so it refuses to start, in one line that says what to do.
func TestAgentRefusesSessionDirElsewhere(t *testing.T) {
	env, home := newEnv(t)
	agentDir := filepath.Join(home, ".omp", "agent")
	if err := os.MkdirAll(filepath.Join(agentDir, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	args := []string{"agent", "--once", "--agent-dir", agentDir, "--remote", "file://" + filepath.Join(home, "remote"), "--state-dir", filepath.Join(home, "state")}
	env["PI_CODING_AGENT_SESSION_DIR"] = filepath.Join(home, "elsewhere")
	r := runWith(t, env, args...)
	if line := oneErrorLine(t, r); r.code != 1 || !strings.Contains(line, "PI_CODING_AGENT_SESSION_DIR") || !strings.Contains(line, "none would be backed up") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	env["PI_CODING_AGENT_SESSION_DIR"] = filepath.Join(agentDir, "sessions") + "/"
	if r := runWith(t, env, args...); r.code != 0 {
		t.Fatalf("the variable naming agent_dir/sessions: exit %d, stderr %q", r.code, r.stderr)
	}
}

// Ctrl-C during a first run's first pass: the agent stops, uploads what is
// settled and exits 0, with no WARN for the requests the stop cut off and
// no first-pass totals that would count them as failed.
func TestAgentStoppedInFirstPass(t *testing.T) {
	srv := remotetest.SharedServer(t)
	bucket := srv.NewBucket(t)
	// Chunk uploads wait at the gate: the first pass is under way.
	g := newGate(t, srv.Endpoint, func(r *http.Request) bool {
		return r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/sessions/")
	})
	m := newMachineEnv(t, "s3://"+bucket, s3Options(srv, "", g.URL), "first")
	w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 83, 4)
	if err != nil {
		t.Fatal(err)
	}
	w.step()
	cmd, out := m.start("agent")
	<-g.held
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	g.release()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent after Ctrl-C: %v\n%s", err, out)
	}
	if strings.Contains(out.String(), "level=WARN") || strings.Contains(out.String(), "first pass: ") {
		t.Errorf("a stopped first pass warns or counts what the stop cut off:\n%s", out)
	}
	if !strings.Contains(out.String(), "stopped; everything settled is uploaded") {
		t.Errorf("the stop does not say everything settled is uploaded:\n%s", out)
	}
}

// The agent's pull flags are --pull and --pull-interval, as its help and
// the README write them: --help lists them so and an error names them so
// (it listed and named --sync-pull*); --sync-pull-interval still works.
func TestPullFlagNames(t *testing.T) {
	env, _ := newEnv(t)
	r := runWith(t, env, "agent", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "  --pull  ") || !strings.Contains(r.stdout, `  --pull-interval string  `) || strings.Contains(r.stdout, "--sync-pull") {
		t.Errorf("agent --help: exit %d, want --pull and --pull-interval listed, no --sync-pull:\n%s", r.code, r.stdout)
	}
	want := `ompsync: sync.pull_interval (flag --pull-interval): "5" has no unit; write a duration like 30s (the default); units are h, m, s and ms; see 'ompsync agent --help'` + "\n"
	for _, flag := range []string{"--pull-interval", "--sync-pull-interval"} {
		if r := runWith(t, env, "agent", "--once", flag, "5"); r.code != exitUsage || r.stderr != want {
			t.Errorf("agent %s 5: exit %d, stderr %q; want exit 2, %q", flag, r.code, r.stderr, want)
		}
	}
}
