package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/transcript"
)

// entries calls f with each entry of data, read by st.
func entries(data []byte, st *Store, f func(transcript.Entry)) {
	l := &transcript.Lines{Format: st, Entry: f}
	l.Write(data)
	l.Close()
}

// said is one part of a transcript as a test compares it: the entry's
// line, role and id, the part's kind, tool name and text.
func said(st *Store, data []byte) []string {
	var out []string
	entries(data, st, func(e transcript.Entry) {
		for _, p := range e.Parts {
			out = append(out, fmt.Sprintf("%d %s %s %s %s %q", e.Line, e.ID, e.Role, p.Kind, p.Name, p.Text))
		}
	})
	return out
}

// Each client's own file reads as the conversation it holds, in the roles
// omp's have: the prompts, the replies, the tool call with its arguments,
// the tool's output, each at its line, with its entry id and time, and
// nothing of the bookkeeping around them (Claude Code's API requests and
// attachments, Codex's instructions and events).
func TestClientFixturesText(t *testing.T) {
	for _, tc := range []struct {
		client string
		st     *Store
		want   []string
	}{
		{"pi", Pi(), []string{
			`4 c6c67527 user text  "Run echo for me"`,
			`5 302a08d3 assistant toolCall bash "{\"command\":\"echo hello from a tool\"}"`,
			`6 e44b68fd toolResult toolResult bash "hello from a tool\n"`,
			`7 d57955a4 assistant text  "The tool said hello."`,
			`8 5bba40d4 user text  "And again, briefly"`,
			`9 ed8ce8fc assistant text  "ok 0001"`,
		}},
		{"claude", Claude(), []string{
			`3 2ac1845a-3238-4053-a331-b6f25c817d82 user text  "Run echo for me"`,
			`21 30b267ab-f127-4a27-8d6c-38df2f46c446 assistant toolCall Bash "{\"command\":\"echo hello from a tool\",\"description\":\"Say hello\"}"`,
			`22 a9ee45b9-115b-4255-9a74-8b37e781695f toolResult toolResult  "hello from a tool"`,
			`29 5288621f-325d-49ed-8229-dcddffc44378 assistant text  "The tool said hello."`,
			// Claude Code's own reply to the resume, in the file as it is.
			`35 65afacb1-6d35-41b1-a836-bd59ac2d13bd assistant text  "No response requested."`,
			`36 a6e56f7d-0578-4565-b401-76cc6fdf6246 user text  "And again, briefly"`,
			`41 81d2cff1-6d5d-4b14-9251-d4b09ff73ab4 assistant text  "ok 0002"`,
		}},
		{"codex", Codex(), []string{
			`8 msg_01a23141-2f70-7200-82d4-3b89181b203b user text  "Run echo for me"`,
			`10 fc_0003 assistant toolCall exec_command "{\"cmd\":\"echo hello from a tool\"}"`,
			`13 fco_01a23141-2fe1-7701-bc1f-6bb278f500f0 toolResult toolResult  "Chunk ID: 372266\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 5\nOutput:\nhello from a tool\n"`,
			`16 msg_0002 assistant text  "The tool said hello."`,
			`23 msg_01a23141-30c9-7790-8ee3-e9ab99ca4c4c user text  "And again, briefly"`,
			`26 msg_0003 assistant text  "ok 0003"`,
		}},
	} {
		for _, f := range fixtures(t, tc.client) {
			got := said(tc.st, f.data)
			if tc.client == "codex" {
				// Codex's context message (the cwd, the shell, the date) is the
				// user's as Codex sends it; it comes first.
				if len(got) == 0 || !strings.Contains(got[0], `user text  "<environment_context>`) {
					t.Errorf("codex: first part %q, want the environment context", got[:min(len(got), 1)])
				} else {
					got = got[1:]
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("%s: transcript\n%s\nwant\n%s", tc.client, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			n := 0
			entries(f.data, tc.st, func(e transcript.Entry) {
				if e.Time.IsZero() || e.Time.Year() != 2026 {
					t.Errorf("%s: line %d has time %v", tc.client, e.Line, e.Time)
				}
				n++
			})
			if n == 0 {
				t.Errorf("%s: no entries", tc.client)
			}
		}
	}
}

// The shapes the fixtures lack, as the clients' sources write them: Claude
// Code's summary and /compact lines, reasoning, a tool result of blocks;
// Codex's reasoning summary, apply_patch's custom tool call, an output of
// content items, a compaction, and its instructions left out.
func TestClientTextShapes(t *testing.T) {
	claude := []string{
		`{"type":"summary","summary":"Fixing the login bug","leafUuid":"u9"}`,
		`{"parentUuid":"u1","type":"user","isCompactSummary":true,"message":{"role":"user","content":"This session is being continued from a previous conversation."},"uuid":"u2","timestamp":"2026-12-01T10:00:00Z"}`,
		`{"parentUuid":"u2","type":"assistant","message":{"role":"assistant","content":[{"type":"thinking","thinking":"Read auth.go first.","signature":"x"},{"type":"redacted_thinking","data":"y"},{"type":"text","text":"Reading it."}]},"uuid":"u3","timestamp":"2026-12-01T10:00:01Z"}`,
		`{"parentUuid":"u3","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"package auth"},{"type":"image","source":{}},{"type":"text","text":"func Login()"}]}]},"uuid":"u4","timestamp":"2026-12-01T10:00:02Z"}`,
		`{"parentUuid":"u4","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"ok"},{"type":"text","text":"and now the tests"}]},"uuid":"u5","timestamp":"2026-12-01T10:00:03Z"}`,
		`{"type":"api-request-blob","message":{"role":"user","content":"a copy of what was sent"}}`,
		`{"type":"user","message":{"role":"user","content":"cut off`,
	}
	codex := []string{
		`{"timestamp":"2026-12-01T10:00:00Z","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>"}]}}`,
		`{"timestamp":"2026-12-01T10:00:01Z","type":"response_item","payload":{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Patch the file."}],"content":null,"encrypted_content":"zz"}}`,
		`{"timestamp":"2026-12-01T10:00:02Z","type":"response_item","payload":{"type":"custom_tool_call","id":"ctc_1","call_id":"c1","name":"apply_patch","input":"*** Begin Patch\n*** End Patch"}}`,
		`{"timestamp":"2026-12-01T10:00:03Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"Done!"},{"type":"input_image","image_url":"data:"}]}}`,
		`{"timestamp":"2026-12-01T10:00:04Z","type":"compacted","payload":{"message":"The user wanted a patch.","replacement_history":[]}}`,
		`{"timestamp":"2026-12-01T10:00:05Z","type":"event_msg","payload":{"type":"user_message","message":"repeated by a response item"}}`,
		`{"timestamp":"2026-12-01T10:00:06Z","type":"response_item","payload":{"type":"local_shell_call","call_id":"c2","status":"completed","action":{"type":"exec","command":["ls","-l"]}}}`,
	}
	for _, tc := range []struct {
		st    *Store
		lines []string
		want  []string
	}{
		{Claude(), claude, []string{
			`1  summary summary  "Fixing the login bug"`,
			`2 u2 compaction summary  "This session is being continued from a previous conversation."`,
			`3 u3 assistant thinking  "Read auth.go first."`,
			`3 u3 assistant text  "Reading it."`,
			`4 u4 toolResult toolResult  "package auth\nfunc Login()"`,
			`5 u5 user toolResult  "ok"`,
			`5 u5 user text  "and now the tests"`,
		}},
		{Codex(), codex, []string{
			`2 rs_1 assistant thinking  "Patch the file."`,
			`3 ctc_1 assistant toolCall apply_patch "*** Begin Patch\n*** End Patch"`,
			`4  toolResult toolResult  "Done!"`,
			`5  compaction summary  "The user wanted a patch."`,
			`7  assistant toolCall shell "{\"type\":\"exec\",\"command\":[\"ls\",\"-l\"]}"`,
		}},
	} {
		got := said(tc.st, []byte(strings.Join(tc.lines, "\n")))
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: transcript\n%s\nwant\n%s", tc.st.Name(), strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

// BenchmarkText reads each client's fixture as grep indexes it: bytes of
// session per second (most of Claude Code's are API-request bookkeeping
// that is never decoded; Codex's first line is its system prompt).
func BenchmarkText(b *testing.B) {
	for _, tc := range []struct {
		client string
		st     *Store
	}{{"pi", Pi()}, {"claude", Claude()}, {"codex", Codex()}} {
		b.Run(tc.client, func(b *testing.B) {
			var data []byte
			for _, f := range fixtures(b, tc.client) {
				data = append(data, f.data...)
			}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				entries(data, tc.st, func(transcript.Entry) {})
			}
		})
	}
}
