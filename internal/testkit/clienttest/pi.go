package clienttest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/omptest"
)

// Pi's harness: the npm package run by Bun (the one omp's tests install;
// pi wants Node 20.6 or newer, which Debian's npm does not bring).
const (
	// EnvPi names the npm prefix pi is installed under.
	EnvPi = "OMPSYNC_TEST_PI_PREFIX"
	// PiVersion is the pi release the harness is written against.
	PiVersion  = "0.73.1"
	piInstall  = "npm install --prefix /tmp/pi --ignore-scripts @mariozechner/pi-coding-agent@" + PiVersion
	piCLI      = "@mariozechner/pi-coding-agent/dist/cli.js"
	piModelRef = "fake/fake-model"
)

// Pi is an installed pi: its cli.js and the Bun that runs it.
type Pi struct {
	CLI, Bun string
}

// FindPi returns the pi under $OMPSYNC_TEST_PI_PREFIX, run by the Bun of
// the omp install ($OMPSYNC_TEST_OMP_PREFIX). Without them the test is
// skipped (failed under CI=true) with a message saying how to install.
func FindPi(t testing.TB) *Pi {
	t.Helper()
	cli, err := locate(EnvPi, piCLI, piInstall)
	if err != nil {
		skipOrFail(t, "pi "+PiVersion+": "+err.Error())
	}
	o := omptest.Find(t)
	return &Pi{CLI: cli, Bun: o.Bun}
}

// PiHome is one simulated machine with pi configured to use the fake model.
type PiHome struct {
	home
	pi *Pi
}

// NewPiHome makes a private HOME for pi with the fake model declared in
// ~/.pi/agent/models.json.
func NewPiHome(t testing.TB, pi *Pi, model *omptest.Model) *PiHome {
	t.Helper()
	h := &PiHome{home: newHome(t, model), pi: pi}
	if err := os.MkdirAll(h.AgentDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	models := fmt.Sprintf(`{"providers": {"fake": {
  "baseUrl": %q, "api": "openai-completions", "apiKey": "fake-key",
  "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
  "models": [{"id": "fake-model", "name": "Fake", "contextWindow": 128000, "maxTokens": 4096, "reasoning": false, "input": ["text", "image"]}]}}}
`, model.BaseURL())
	// Nothing to install at start, no update check, no telemetry.
	settings := `{"quietStartup": true, "enableInstallTelemetry": false, "defaultProvider": "fake", "defaultModel": "fake-model"}` + "\n"
	for name, content := range map[string]string{"models.json": models, "settings.json": settings} {
		if err := os.WriteFile(filepath.Join(h.AgentDir(), name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.env = append(h.env, "PI_OFFLINE=1", "PI_SKIP_VERSION_CHECK=1", "PI_TELEMETRY=0")
	return h
}

// AgentDir is pi's agent dir, $HOME/.pi/agent.
func (h *PiHome) AgentDir() string { return filepath.Join(h.Dir, ".pi", "agent") }

// CwdDir is the sessions/ folder pi uses for Cwd: the absolute path with
// "/" turned into "-", between "--".
func (h *PiHome) CwdDir() string { return "--" + encodePath(h.Cwd) + "--" }

// SessionFiles lists the session files under sessions/*/, sorted.
func (h *PiHome) SessionFiles() []string {
	files, _ := filepath.Glob(filepath.Join(h.AgentDir(), "sessions", "*", "*.jsonl"))
	return files
}

// Print runs one print-mode turn: pi --model fake/fake-model -p args...
// (the prompt, and flags such as --session ID).
func (h *PiHome) Print(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	cmd := h.command(ctx, h.pi.Bun, append([]string{h.pi.CLI, "--model", piModelRef, "-p"}, args...)...)
	return run(cmd)
}
