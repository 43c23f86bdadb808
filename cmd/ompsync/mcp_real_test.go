package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/clienttest"
	"github.com/ompsync/ompsync/internal/testkit/omptest"
	"github.com/ompsync/ompsync/remote/backend"
)

// The real Claude Code, configured with ompsync mcp, recalls a session
// another machine backed up and then deleted: its model calls search for a
// marker and gets the session id and the line in the tool result.
func TestRealClaudeMCPSearch(t *testing.T) {
	t.Parallel()
	c := clienttest.FindClaude(t)
	url := "file://" + t.TempDir() + "/remote"
	laptop := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	const marker = "the retry policy is three tries, 2s apart: marker 7f3a"
	rel := "sessions/-p/2026-10-07T00-45-40-000Z_" + mcpID + ".jsonl"
	laptop.write(rel, []byte(slotLine("retry")+`{"type":"session","version":3,"id":"`+mcpID+`","timestamp":"2026-10-07T00:45:40.854Z","cwd":"/home/u/proj"}`+"\n"+
		messageLine("00000001", "", "user", "2026-10-07T01:00:00.000Z", marker)), mtime0)
	laptop.mustRun("agent", "--once")
	if err := os.Remove(laptop.path(rel)); err != nil {
		t.Fatal(err)
	}
	laptop.mustRun("agent", "--once")

	m := omptest.NewModel(t)
	h := clienttest.NewClaudeHome(t, c, m)
	desk := newRestoreEnv(t, url, backend.S3Options{}, "desk")
	env := map[string]string{}
	for k, v := range desk.env {
		env[k] = v
	}
	conf, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"ompsync": map[string]any{"command": ompsyncBin, "args": []string{"mcp"}, "env": env}}})
	confPath := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(confPath, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	m.Queue(omptest.ToolCall("mcp__ompsync__search", map[string]any{"pattern": "marker 7f3a"}), omptest.Text("found it"))
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if out, errOut, err := h.Print(ctx, "--mcp-config", confPath, "--strict-mcp-config", "what did we decide about retries?"); err != nil {
		t.Fatalf("claude: %v\n%s\n%s", err, out, errOut)
	}
	// Claude Code defers MCP tools (it offers ToolSearch, not their names),
	// but calls one the model names.
	var got string
	for _, r := range m.Requests() {
		if r.ToolResult != "" {
			got = r.ToolResult
		}
	}
	if !strings.Contains(got, mcpID) || !strings.Contains(got, "marker 7f3a") || !strings.Contains(got, `"total":1`) {
		t.Errorf("the tool result %q lacks the session id or the line", got)
	}
}
