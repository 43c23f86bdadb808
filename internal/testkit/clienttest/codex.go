package clienttest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/omptest"
)

// Codex's harness: the native binary inside the npm package's platform
// dependency, talking to the fake model's Responses API, declared as a
// custom provider in $CODEX_HOME/config.toml.
const (
	// EnvCodex names the npm prefix Codex is installed under.
	EnvCodex = "OMPSYNC_TEST_CODEX_PREFIX"
	// CodexVersion is the Codex release the harness is written against.
	CodexVersion = "0.171.0"
	codexInstall = "npm install --prefix /tmp/codex --ignore-scripts @openai/codex@" + CodexVersion
	codexBin     = "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
)

// Codex is an installed Codex binary.
type Codex struct{ Bin string }

// FindCodex returns the Codex under $OMPSYNC_TEST_CODEX_PREFIX, or skips
// the test (fails it under CI=true) saying how to install it.
func FindCodex(t testing.TB) *Codex {
	t.Helper()
	bin, err := locate(EnvCodex, codexBin, codexInstall)
	if err != nil {
		skipOrFail(t, "Codex "+CodexVersion+": "+err.Error())
	}
	return &Codex{Bin: bin}
}

// CodexHome is one simulated machine with Codex configured to use the fake
// model and nothing else on the network.
type CodexHome struct {
	home
	codex *Codex
}

// NewCodexHome makes a private HOME for Codex with the fake model as its
// provider in ~/.codex/config.toml.
func NewCodexHome(t testing.TB, c *Codex, model *omptest.Model) *CodexHome {
	t.Helper()
	h := &CodexHome{home: newHome(t, model), codex: c}
	if err := os.MkdirAll(h.ConfigDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = %q
wire_api = "responses"
env_key = "FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
`, model.BaseURL())
	if err := os.WriteFile(filepath.Join(h.ConfigDir(), "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	h.env = append(h.env, "FAKE_API_KEY=fake-key", "CODEX_HOME="+h.ConfigDir(), "SHELL=/bin/bash")
	return h
}

// ConfigDir is Codex's folder, $HOME/.codex ($CODEX_HOME).
func (h *CodexHome) ConfigDir() string { return filepath.Join(h.Dir, ".codex") }

// SessionFiles lists the rollouts under sessions/YYYY/MM/DD/, sorted.
func (h *CodexHome) SessionFiles() []string {
	files, _ := filepath.Glob(filepath.Join(h.ConfigDir(), "sessions", "*", "*", "*", "rollout-*.jsonl"))
	return files
}

// Exec runs one turn: codex exec PROMPT, or codex exec resume ID PROMPT.
func (h *CodexHome) Exec(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	return run(h.command(ctx, h.codex.Bin, append([]string{"exec", "--skip-git-repo-check"}, args...)...))
}

// Run runs any codex command line (archive, delete --force ID, ...).
func (h *CodexHome) Run(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	return run(h.command(ctx, h.codex.Bin, args...))
}
