package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func backedUp(t *testing.T, c *Config) []string {
	t.Helper()
	got, err := c.BackedUp()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range got {
		out = append(out, a.Store.Name()+"="+a.Dir)
	}
	return out
}

// By default the agent backs up every agent whose folder exists (omp when
// none does), each folder once; the folders follow each agent's own
// environment variable, and ompsync's keys override them.
func TestBackedUpAgents(t *testing.T) {
	env, home := newEnv(t)
	if got := backedUp(t, mustLoad(t, opts(env))); !slices.Equal(got, []string{"omp=" + filepath.Join(home, ".omp/agent")}) {
		t.Errorf("nothing exists: %v", got)
	}
	for _, d := range []string{".claude", ".codex", ".pi/agent"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"pi=" + filepath.Join(home, ".pi/agent"), "claude=" + filepath.Join(home, ".claude"), "codex=" + filepath.Join(home, ".codex")}
	if got := backedUp(t, mustLoad(t, opts(env))); !slices.Equal(got, want) {
		t.Errorf("three folders: %v, want %v", got, want)
	}
	// omp and pi both honour PI_CODING_AGENT_DIR: one folder, backed up once.
	shared := filepath.Join(home, "shared")
	if err := os.MkdirAll(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	env["PI_CODING_AGENT_DIR"] = shared
	env["CLAUDE_CONFIG_DIR"] = filepath.Join(home, "cc")
	env["OMPSYNC_CODEX_DIR"] = filepath.Join(home, ".codex")
	c := mustLoad(t, opts(env))
	if got := backedUp(t, c); !slices.Equal(got, []string{"omp=" + shared, "codex=" + filepath.Join(home, ".codex")}) {
		t.Errorf("shared folder: %v", got)
	}
	if c.AgentDirOf("claude") != filepath.Join(home, "cc") {
		t.Errorf("claude.dir %q does not follow CLAUDE_CONFIG_DIR", c.AgentDirOf("claude"))
	}

	// Listed, the agents are taken as they are, in order; the same folder
	// twice is an error naming both keys.
	env["OMPSYNC_AGENTS"] = "claude,omp"
	if got := backedUp(t, mustLoad(t, opts(env))); !slices.Equal(got, []string{"claude=" + filepath.Join(home, "cc"), "omp=" + shared}) {
		t.Errorf("listed: %v", got)
	}
	env["OMPSYNC_AGENTS"] = "omp,pi"
	if _, err := mustLoad(t, opts(env)).BackedUp(); err == nil || !strings.Contains(err.Error(), "agent_dir, pi.dir") {
		t.Errorf("two agents in one folder: %v", err)
	}
	for _, bad := range []string{"omp,cursor", "pi,pi"} {
		env["OMPSYNC_AGENTS"] = bad
		if _, err := Load(opts(env)); err == nil || !strings.Contains(err.Error(), "agents (env OMPSYNC_AGENTS)") {
			t.Errorf("agents=%s: %v", bad, err)
		}
	}
}
