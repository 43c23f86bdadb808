package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ompsync/ompsync/recall"
	"github.com/ompsync/ompsync/remote/backend"
)

// mcpSession is a session for the MCP tests: n lines "line i of TITLE",
// one of which (the third) holds credentials pasted by a user.
func mcpSession(id, title string, n int) []byte {
	s := slotLine(title) + fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-10-07T00:45:40.854Z","cwd":"/home/u/proj"}`+"\n", id)
	parent := ""
	for i := range n {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		eid := fmt.Sprintf("%08x", i+1)
		text := fmt.Sprintf("line %d of %s", i, title)
		if i == 2 {
			text += "\nexport AWS_ACCESS_KEY_ID=" + mcpAKID + "\nexport AWS_SECRET_ACCESS_KEY=" + mcpSecret + "\ntoken " + mcpGHP +
				"\n-----BEGIN RSA PRIVATE KEY-----\n" + mcpKeyBody + "\n-----END RSA PRIVATE KEY-----"
		}
		s += messageLine(eid, parent, role, "2026-10-07T01:00:00.000Z", text)
		parent = eid
	}
	return []byte(s)
}

const (
	mcpAKID    = "AKIAIOSFODNN7EXAMPLE"
	mcpSecret  = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	mcpGHP     = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	mcpKeyBody = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"
	mcpID      = "019b0002-0000-7000-8000-000000000001"
)

// mcpClient runs ompsyncBin mcp in env and connects the SDK's client.
func mcpClient(t *testing.T, env testEnv) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(ompsyncBin, "mcp")
	cmd.Env = env.environ()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns its text and whether it is a tool error;
// a protocol error fails the test.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: protocol error %v", name, args, err)
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	return text, res.IsError
}

// Every tool through the SDK's client over stdio, against the binary and a
// real remote: results within the budget, a huge match set paged, bad
// arguments tool errors, credentials masked.
func TestMCPCommand(t *testing.T) {
	t.Parallel()
	forEachRemote(t, func(t *testing.T, url string, s3 backend.S3Options) {
		e := newRestoreEnv(t, url, s3, "laptop")
		const n = 3000 // about 100 KiB of matches: four pages at least
		e.write("sessions/-p/2026-10-07T00-45-40-000Z_"+mcpID+".jsonl", mcpSession(mcpID, "recall test", n), mtime0)
		for i, id := range ambIDs {
			e.write(fmt.Sprintf("sessions/-w%d/2026-10-07T00-45-40-00%dZ_%s.jsonl", i, i, id), synthSession(id, "/home/u/w", fmt.Sprintf("title %d", i), 4), mtime0.Add(time.Duration(i+1)*time.Minute))
		}
		e.mustRun("agent", "--once")
		cs := mcpClient(t, newRestoreEnv(t, url, s3, "desktop").env)

		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools.Tools {
			names = append(names, tl.Name)
			if !strings.Contains(tl.Description, "32 KiB") {
				t.Errorf("%s's description does not state the budget", tl.Name)
			}
		}
		if strings.Join(names, " ") != "list_sessions read_session search session_history" {
			t.Errorf("tools %v", names)
		}

		// Paged: every match once, each page within the budget.
		seen := map[string]bool{}
		cursor, pages := "", 0
		for {
			text, isErr := call(t, cs, "search", map[string]any{"pattern": "of recall test", "cursor": cursor})
			if isErr || len(text) > recall.Budget {
				t.Fatalf("page %d: error %v, %d bytes", pages, isErr, len(text))
			}
			var page struct {
				Total      int            `json:"total"`
				Matches    []recall.Match `json:"matches"`
				NextCursor string         `json:"next_cursor"`
			}
			if err := json.Unmarshal(unwrap(t, text), &page); err != nil {
				t.Fatalf("page %d: %v", pages, err)
			}
			pages++
			if page.Total != n {
				t.Fatalf("page %d: total %d, want %d", pages, page.Total, n)
			}
			for _, m := range page.Matches {
				if m.Session != mcpID || m.Title != "recall test" || m.Entry == "" || m.Role == "" {
					t.Fatalf("match %+v", m)
				}
				seen[m.Entry+m.Snippet] = true
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if len(seen) != n || pages < 4 {
			t.Errorf("%d matches in %d pages, want %d in 4 or more", len(seen), pages, n)
		}

		// Credentials: none comes back unmasked, from any tool.
		for _, q := range []map[string]any{{"pattern": "AWS_"}, {"pattern": "ghp_"}, {"pattern": "PRIVATE KEY"}, {"pattern": "MIIEow"}} {
			text, isErr := call(t, cs, "search", q)
			if isErr || !strings.Contains(text, `"redacted":`) || !strings.Contains(text, mcpID) {
				t.Errorf("search %v: error %v, %s", q, isErr, text)
			}
			assertMasked(t, text)
		}
		text, isErr := call(t, cs, "read_session", map[string]any{"id": mcpID[:13], "around": "00000003"})
		if isErr || !strings.Contains(text, "[00000003]  user: line 2 of recall test") || !strings.Contains(text, `"next_line":`) || len(text) > recall.Budget {
			t.Errorf("read_session around: error %v, %d bytes, %.300s", isErr, len(text), text)
		}
		assertMasked(t, text)
		text, isErr = call(t, cs, "read_session", map[string]any{"id": mcpID, "line": 2900})
		if isErr || !strings.Contains(text, "line 2999 of recall test") || strings.Contains(text, "next_line") {
			t.Errorf("read_session's end: error %v, %.300s", isErr, text)
		}

		text, isErr = call(t, cs, "list_sessions", map[string]any{})
		if isErr || !strings.Contains(text, `"total":4`) || strings.Index(text, ambIDs[2]) > strings.Index(text, mcpID) {
			t.Errorf("list_sessions: error %v, %s", isErr, text)
		}
		text, isErr = call(t, cs, "session_history", map[string]any{"id": mcpID[:13]})
		if isErr || !strings.Contains(text, `"machine":"laptop"`) {
			t.Errorf("session_history: error %v, %s", isErr, text)
		}

		// Bad arguments: tool errors, one line saying what to change.
		for _, tc := range []struct {
			tool string
			args map[string]any
			want string
		}{
			{"search", map[string]any{"pattern": ""}, "pattern is empty"},
			{"search", map[string]any{"pattern": "(", "regexp": true}, "pattern"},
			{"search", map[string]any{"pattern": "x", "since": "soon"}, "since"},
			{"search", map[string]any{"pattern": "x", "cursor": "z"}, "next_cursor"},
			{"search", map[string]any{"pattern": "x", "agent": "vim"}, "want one of"},
			{"read_session", map[string]any{"id": "0123abcd"}, "0123abcd"},
			{"read_session", map[string]any{"id": "019a0001"}, "ambiguous"},
			{"read_session", map[string]any{"id": mcpID, "around": "no such text"}, "no line"},
			{"session_history", map[string]any{"id": ""}, "id is empty"},
		} {
			text, isErr := call(t, cs, tc.tool, tc.args)
			if !isErr || !strings.Contains(text, tc.want) || strings.Contains(text, "\n") {
				t.Errorf("%s %v: error %v, %q; want a tool error with %q", tc.tool, tc.args, isErr, text, tc.want)
			}
		}
	})
}

func assertMasked(t *testing.T, text string) {
	t.Helper()
	for _, s := range []string{mcpAKID, mcpSecret, mcpGHP, mcpKeyBody} {
		if strings.Contains(text, s) {
			t.Errorf("%q unmasked in %.300s", s, text)
		}
	}
}

// unwrap is a result's JSON, out of the envelope that counts what was
// masked, when there is one.
func unwrap(t *testing.T, text string) []byte {
	t.Helper()
	var env struct {
		Redacted int             `json:"redacted"`
		Result   json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(text), &env); err != nil {
		t.Fatalf("%v in %.300s", err, text)
	}
	if env.Result != nil {
		return env.Result
	}
	return []byte(text)
}

// mcp.redact false returns what the session holds; an unreachable remote
// is a tool error of one line.
func TestMCPRedactOffAndNoRemote(t *testing.T) {
	url := "file://" + t.TempDir() + "/remote"
	e := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	e.write("sessions/-p/2026-10-07T00-45-40-000Z_"+mcpID+".jsonl", mcpSession(mcpID, "recall test", 4), mtime0)
	e.mustRun("agent", "--once")
	// --help names each tool and what it costs.
	if r := e.run("mcp", "--help"); r.code != 0 || !strings.Contains(r.stdout, "session_history") || strings.Count(r.stdout, "Cost:") != 4 {
		t.Errorf("mcp --help: exit %d, %s", r.code, r.stdout)
	}
	e.env["OMPSYNC_MCP_REDACT"] = "false"
	text, isErr := call(t, mcpClient(t, e.env), "search", map[string]any{"pattern": "AWS_SECRET"})
	if isErr || !strings.Contains(text, mcpSecret) || strings.Contains(text, "redacted") {
		t.Errorf("mcp.redact false: error %v, %s", isErr, text)
	}

	e.env["OMPSYNC_REMOTE"] = "file://" + t.TempDir() + "/nothing-here"
	cs := mcpClient(t, e.env)
	for tool, args := range map[string]map[string]any{"search": {"pattern": "x"}, "list_sessions": {}, "read_session": {"id": "019b"}, "session_history": {"id": "019b"}} {
		text, isErr := call(t, cs, tool, args)
		if !isErr || !strings.Contains(text, "nothing-here") || strings.Contains(text, "\n") {
			t.Errorf("%s on a missing remote: error %v, %q", tool, isErr, text)
		}
	}
}

// The search tool's project is the session's, from the catalog its grep
// read (no second listing): a session in a checkout matches under its
// project's name, one outside any does not; a damaged catalog is one
// problem, not one per listing.
func TestMCPSearchProject(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "remote")
	e := newRestoreEnv(t, "file://"+dir, backend.S3Options{}, "laptop")
	clone := filepath.Join(t.TempDir(), "app")
	for _, args := range [][]string{{"init", "-q", clone}, {"-C", clone, "remote", "add", "origin", "http://127.0.0.1/me/app.git"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	e.write("sessions/-app/2026-10-07T00-45-40-000Z_"+ambIDs[0]+".jsonl", synthSession(ambIDs[0], clone, "in app", 4), mtime0)
	e.write("sessions/-w/2026-10-07T00-45-40-001Z_"+ambIDs[1]+".jsonl", synthSession(ambIDs[1], "/home/u/w", "elsewhere", 4), mtime0)
	e.mustRun("agent", "--once")
	cs := mcpClient(t, e.env)
	// Another machine whose catalog is damaged: one problem, said once.
	desk := newRestoreEnv(t, "file://"+dir, backend.S3Options{}, "desk")
	desk.write("sessions/-w/2026-10-07T00-45-40-002Z_"+ambIDs[2]+".jsonl", synthSession(ambIDs[2], "/home/u/w", "on desk", 4), mtime0)
	desk.mustRun("agent", "--once")
	flipFile(t, filepath.Join(dir, "v1", "machines", "desk", "catalog"), 0xff)
	for _, tc := range []struct {
		project string
		want    []string // sessions matched, each line 1 of its title
	}{{"", []string{ambIDs[0], ambIDs[1]}}, {"me/app", []string{ambIDs[0]}}, {"me/other", nil}} {
		text, isErr := call(t, cs, "search", map[string]any{"pattern": "line 1 of", "project": tc.project})
		var res struct {
			Matches  []recall.Match `json:"matches"`
			Problems []string       `json:"problems"`
		}
		if isErr {
			t.Fatalf("search in %q: %s", tc.project, text)
		}
		if err := json.Unmarshal(unwrap(t, text), &res); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range res.Matches {
			got = append(got, m.Session)
			if want := map[string]string{ambIDs[0]: "127.0.0.1/me/app"}[m.Session]; m.Project != want {
				t.Errorf("search in %q: %s has project %q, want %q", tc.project, m.Session, m.Project, want)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) || len(res.Problems) != 1 || !strings.Contains(res.Problems[0], "desk") {
			t.Errorf("search in %q: sessions %v, problems %q; want %v and desk's catalog once", tc.project, got, res.Problems, tc.want)
		}
	}
}

// Requests piped in, stdin closed after them (ompsync mcp < requests):
// every call is answered, by id, before the server exits 0; on a missing
// remote the search's answer is a tool error naming it.
func TestMCPStdinClosed(t *testing.T) {
	t.Parallel()
	e := newRestoreEnv(t, "file://"+t.TempDir()+"/remote", backend.S3Options{}, "laptop")
	e.write("sessions/-p/2026-10-07T00-45-40-000Z_"+mcpID+".jsonl", mcpSession(mcpID, "recall test", 4), mtime0)
	e.mustRun("agent", "--once")
	requests := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search","arguments":{"pattern":"line 1 of"}}}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
`
	for _, tc := range []struct {
		remote, want string
		isError      bool
	}{
		{e.env["OMPSYNC_REMOTE"], `\"snippet\":\"line 1 of recall test\"`, false},
		{"file://" + t.TempDir() + "/nothing-here", "nothing-here", true},
	} {
		e.env["OMPSYNC_REMOTE"] = tc.remote
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, ompsyncBin, "mcp")
		cmd.Env, cmd.Stdin = e.env.environ(), strings.NewReader(requests)
		out, err := cmd.Output()
		cancel()
		got := map[int]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var resp struct {
				ID int `json:"id"`
			}
			if json.Unmarshal([]byte(line), &resp) == nil {
				got[resp.ID] = line
			}
		}
		if err != nil || len(got) != 3 || !strings.Contains(got[1], `"serverInfo":{"name":"ompsync"`) ||
			!strings.Contains(got[2], `"name":"session_history"`) || !strings.Contains(got[3], tc.want) ||
			strings.Contains(got[3], `"isError":true`) != tc.isError {
			t.Errorf("remote %s: %v, %d answers, id 3 %.1000s", tc.remote, err, len(got), got[3])
		}
	}
}
