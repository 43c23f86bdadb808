package clienttest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/omptest"
)

// Claude Code's harness: the native binary of the npm package's platform
// dependency, talking to the fake model's Anthropic Messages API through
// ANTHROPIC_BASE_URL.
const (
	// EnvClaude names the npm prefix Claude Code is installed under.
	EnvClaude = "OMPSYNC_TEST_CLAUDE_PREFIX"
	// ClaudeVersion is the Claude Code release the harness is written against.
	ClaudeVersion = "2.1.332"
	claudeInstall = "npm install --prefix /tmp/claude --ignore-scripts @anthropic-ai/claude-code@" + ClaudeVersion
	claudeBin     = "@anthropic-ai/claude-code-linux-x64/claude"
	// ClaudeModel is the model Claude Code is told to use; the fake
	// answers whatever the name.
	ClaudeModel = "claude-sonnet-4-5"
)

// Claude is an installed Claude Code binary.
type Claude struct{ Bin string }

// FindClaude returns the Claude Code under $OMPSYNC_TEST_CLAUDE_PREFIX, or
// skips the test (fails it under CI=true) saying how to install it.
func FindClaude(t testing.TB) *Claude {
	t.Helper()
	bin, err := locate(EnvClaude, claudeBin, claudeInstall)
	if err != nil {
		skipOrFail(t, "Claude Code "+ClaudeVersion+": "+err.Error())
	}
	return &Claude{Bin: bin}
}

// ClaudeHome is one simulated machine with Claude Code configured to use
// the fake model and nothing else on the network.
type ClaudeHome struct {
	home
	claude *Claude
}

// NewClaudeHome makes a private HOME for Claude Code: onboarding done, the
// fake model's URL and key in the environment, every non-essential request
// (updates, telemetry, error reports) off.
func NewClaudeHome(t testing.TB, c *Claude, model *omptest.Model) *ClaudeHome {
	t.Helper()
	h := &ClaudeHome{home: newHome(t, model), claude: c}
	if err := os.MkdirAll(h.ConfigDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	global := `{"hasCompletedOnboarding": true, "bypassPermissionsModeAccepted": true, "autoUpdates": false}` + "\n"
	if err := os.WriteFile(filepath.Join(h.Dir, ".claude.json"), []byte(global), 0o600); err != nil {
		t.Fatal(err)
	}
	h.env = append(h.env,
		"ANTHROPIC_BASE_URL="+model.URL(),
		"ANTHROPIC_API_KEY=fake-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
		// Tools run without asking, also as root (the CI machine's user).
		"IS_SANDBOX=1",
		"SHELL=/bin/bash",
	)
	return h
}

// ConfigDir is Claude Code's folder, $HOME/.claude.
func (h *ClaudeHome) ConfigDir() string { return filepath.Join(h.Dir, ".claude") }

// ProjectDir is the projects/ folder of Cwd: its path with every character
// but letters and digits turned into "-".
func (h *ClaudeHome) ProjectDir() string {
	return filepath.Join(h.ConfigDir(), "projects", ClaudeProjectName(h.Cwd))
}

// ClaudeProjectName is how Claude Code names the folder of a working
// directory (for paths of up to 200 characters).
func ClaudeProjectName(cwd string) string {
	b := []byte(cwd)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

// SessionFiles lists the session transcripts under projects/*/, sorted.
func (h *ClaudeHome) SessionFiles() []string {
	files, _ := filepath.Glob(filepath.Join(h.ConfigDir(), "projects", "*", "*.jsonl"))
	return files
}

// Print runs one print-mode turn: claude -p PROMPT with tools allowed (and
// flags such as --resume ID before the prompt).
func (h *ClaudeHome) Print(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	all := append([]string{"--model", ClaudeModel, "--dangerously-skip-permissions", "-p"}, args...)
	return run(h.command(ctx, h.claude.Bin, all...))
}
