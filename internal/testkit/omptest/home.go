package omptest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// Home is one simulated machine: a private HOME with omp configured to use
// the fake model and nothing on the network, and a working folder omp runs in.
type Home struct {
	Dir string // $HOME
	Cwd string // the folder omp runs in: $HOME/work

	t     testing.TB
	omp   *OMP
	model *Model
	env   []string
}

// CwdDir is the sessions/ folder omp 18 uses for Home.Cwd ($HOME/work:
// home-relative, "/" turned into "-").
const CwdDir = "-work"

// configYML turns off what would reach the network or start helpers
// (update and plugin checks, language servers, probes of local model
// servers on loopback ports such as Ollama's 11434), lets tools run without
// asking, and points the title model at the online path, so titles come
// from the fake model instead of a downloaded local model.
const configYML = `startup:
  checkUpdate: false
  quiet: true
  setupWizard: false
marketplace:
  autoUpdate: "off"
lsp:
  enabled: false
providers:
  tinyModel: online
tools:
  approvalMode: yolo
disabledProviders: [ollama, llama.cpp, lm-studio, vllm]
`

// deadProxy is where omp's other HTTP goes: at startup omp fetches model
// catalogs (catalog.stencil.so, hyper.charm.land) whatever the settings say.
// Bun's fetch honors HTTP(S)_PROXY, so those requests fail at once on
// loopback instead of leaving the machine; NO_PROXY keeps the fake model
// direct.
const deadProxy = "http://127.0.0.1:1"

// NewHome makes a private HOME (a t.TempDir) for omp with the fake model
// declared in ~/.omp/agent/models.yml.
func NewHome(t testing.TB, omp *OMP, model *Model) *Home {
	t.Helper()
	dir := t.TempDir()
	// omp resolves its cwd through symlinks before naming the sessions
	// folder; so must the HOME it is compared with.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	h := &Home{Dir: dir, Cwd: filepath.Join(dir, "work"), t: t, omp: omp, model: model}
	models := fmt.Sprintf(`providers:
  fake:
    baseUrl: %s
    apiKey: fake-key
    api: openai-completions
    models:
      - {id: fake-model, name: Fake, contextWindow: 128000, maxTokens: 4096, reasoning: false, input: ["text", "image"]}
`, model.BaseURL())
	for _, d := range []string{h.Cwd, h.AgentDir(), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{"models.yml": models, "config.yml": configYML} {
		if err := os.WriteFile(filepath.Join(h.AgentDir(), name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.env = cleanEnv(dir)
	return h
}

// cleanEnv is the environment omp runs with: the host's PATH and locale,
// nothing else of it (no API keys, no XDG or omp overrides that would move
// the agent dir out of HOME), a private HOME and TMPDIR, and the dead proxy.
func cleanEnv(home string) []string {
	env := []string{
		"HOME=" + home,
		"TMPDIR=" + filepath.Join(home, "tmp"),
		"TERM=dumb",
		"NO_COLOR=1",
		"PI_NOTIFICATIONS=off",
		"HTTP_PROXY=" + deadProxy, "HTTPS_PROXY=" + deadProxy, "http_proxy=" + deadProxy, "https_proxy=" + deadProxy,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PATH" || k == "LANG" || k == "TZ" || strings.HasPrefix(k, "LC_") {
			env = append(env, kv)
		}
	}
	return env
}

// Model is the fake model this machine's omp talks to.
func (h *Home) Model() *Model { return h.model }

// AgentDir is omp's agent dir, $HOME/.omp/agent.
func (h *Home) AgentDir() string { return filepath.Join(h.Dir, ".omp", "agent") }

// SessionDir is the folder of the sessions omp writes for Cwd.
func (h *Home) SessionDir() string { return filepath.Join(h.AgentDir(), "sessions", CwdDir) }

// LogDir is where omp writes its log files (omp.<date>.<pid>.log).
func (h *Home) LogDir() string { return filepath.Join(h.Dir, ".omp", "logs") }

// SessionFiles lists the session files under sessions/*/, sorted.
func (h *Home) SessionFiles() []string {
	files, _ := filepath.Glob(filepath.Join(h.AgentDir(), "sessions", "*", "*.jsonl"))
	sort.Strings(files)
	return files
}

// Env is the environment omp runs with.
func (h *Home) Env() []string { return append([]string(nil), h.env...) }

// Command is an omp command line run in Cwd with this HOME. Cancelling ctx
// kills omp and its process group.
func (h *Home) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, h.omp.Bun, append([]string{h.omp.CLI}, args...)...)
	cmd.Dir = h.Cwd
	cmd.Env = h.Env()
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Run runs omp with args and returns what it printed. err is non-nil when
// omp exits non-zero or ctx ends first; it then includes stderr's tail.
func (h *Home) Run(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	cmd := h.Command(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("omp %s: %w; stderr: %s", strings.Join(args, " "), err, tail(errb.String(), 2000))
	}
	return out.String(), errb.String(), err
}

// Print runs one print-mode turn: omp --model fake/fake-model -p args...
// (args are the prompt, and flags such as --resume ID).
func (h *Home) Print(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	return h.Run(ctx, append([]string{"--model", ModelID, "-p"}, args...)...)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
