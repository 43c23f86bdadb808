package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/ompsync/ompsync/safename"
	"github.com/ompsync/ompsync/session"
	"github.com/ompsync/ompsync/transcript"
)

// Claude is Claude Code's store (npm @anthropic-ai/claude-code): its folder
// (~/.claude, or $CLAUDE_CONFIG_DIR) holds
// projects/<encoded-cwd>/<session-uuid>.jsonl, the cwd with every
// character but ASCII letters and digits turned into "-" (longer than 200
// characters: cut, and a hash of the path added). A session's subagent
// transcripts and tool results lie in the folder named like it without
// .jsonl (<uuid>/subagents/agent-<id>.jsonl); older releases wrote
// agent-<id>.jsonl beside the sessions, backed up as sessions of their own.
// Every entry carries uuid and parentUuid, so copies merge by entry; lines
// without a uuid (queue operations, summaries, costs) are known by their
// bytes. The session id is the file's name (every line also names it as
// sessionId; a subagent's lines name the parent). Nothing outside
// projects/ is read: never .credentials.json, settings.json, history.jsonl
// or .claude.json. `claude --resume <id>` resumes a session.
func Claude() *Store {
	return &Store{
		name:   "claude",
		home:   Home{Title: "Claude Code's folder", Env: "CLAUDE_CONFIG_DIR", Dir: ".claude"},
		roots:  []string{"projects"},
		resume: "claude --resume",
		what:   "a session file under projects/",
		classify: func(parts []string) Kind {
			switch {
			case len(parts) < 3 || parts[0] != "projects":
				return KindIgnored
			case len(parts) == 3 && strings.HasSuffix(parts[2], ".jsonl") && safename.SessionID(strings.TrimSuffix(parts[2], ".jsonl")):
				return KindSession
			case len(parts) >= 4 && safename.SessionID(parts[2]):
				return KindArtifact // projects/<dir>/<uuid>/<inner...>
			}
			return KindIgnored
		},
		idFromName: func(name string) (string, bool) {
			id := strings.TrimSuffix(path.Base(name), ".jsonl")
			return id, safename.SessionID(id)
		},
		describe: claudeDescribe,
		text:     claudeText,
		// Entries merge by uuid and parentUuid.
		merge: session.Format{Entry: claudeEntry},
		openArchive: func(rel string, _ io.Reader, _ int64) (io.ReadCloser, error) {
			return nil, fmt.Errorf("%s: Claude Code archives no session", rel)
		},
		cwdDir: claudeDir,
	}
}

// claudeLine is what ompsync reads of one of Claude Code's lines.
type claudeLine struct {
	Type        string  `json:"type"`
	UUID        string  `json:"uuid"`
	ParentUUID  *string `json:"parentUuid"`
	Timestamp   string  `json:"timestamp"`
	Cwd         string  `json:"cwd"`
	IsSidechain bool    `json:"isSidechain"`
	Summary     string  `json:"summary"`
	CustomTitle string  `json:"customTitle"`
	// The summary /compact left, which Claude Code sends as a user message.
	IsCompactSummary bool `json:"isCompactSummary"`
	Message          *struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// claudeDescribe: the cwd of the first line that names one; the title a /rename
// or a summary gave, else the first thing the user typed. The id is the
// file's name, not a line's (a subagent's lines name their parent).
func claudeDescribe(head []byte) (Info, bool) {
	var info Info
	var prompt string
	found := false
	for _, line := range bytes.Split(head[:session.SettledLen(head)], []byte("\n")) {
		var l claudeLine
		if json.Unmarshal(line, &l) != nil {
			continue
		}
		found = true
		if info.Cwd == "" && l.Cwd != "" {
			info.Cwd = l.Cwd
		}
		switch {
		case l.CustomTitle != "":
			info.Title = l.CustomTitle
		case l.Type == "summary" && l.Summary != "" && info.Title == "":
			info.Title = l.Summary
		case prompt == "" && l.Type == "user" && l.Message != nil && !l.IsSidechain:
			prompt = userText(l.Message.Content)
		}
	}
	if info.Title == "" {
		info.Title = shorten(prompt, 80)
	}
	return info, found
}

// userText is what the user typed: a string, or the text blocks of content
// (a tool result is not typed).
func userText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	for _, b := range blocks {
		if b.Type == "text" && !strings.HasPrefix(b.Text, "<") {
			return b.Text
		}
	}
	return ""
}

func claudeEntry(line []byte) (session.Entry, bool) {
	var l claudeLine
	if json.Unmarshal(line, &l) != nil {
		return session.Entry{}, false
	}
	return session.Entry{Type: l.Type, ID: l.UUID, ParentID: l.ParentUUID, Timestamp: l.Timestamp}, true
}

// claudeDir names the projects/ folder of a path as Claude Code does:
// /home/ana/src is "-home-ana-src". The folder of a path longer than 200
// characters ends in a hash of the path (Bun's), which ompsync cannot
// make: a session moved there keeps its recorded folder ("").
func claudeDir(p, _ string) string {
	b := []byte(p)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	if len(b) > 200 {
		return ""
	}
	return string(b)
}

// claudeBlock is one block of a message's content, in the Anthropic
// Messages API's shapes.
type claudeBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Thinking string          `json:"thinking"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`   // tool_use
	Content  json.RawMessage `json:"content"` // tool_result: a string or text blocks
}

// claudeText: the user and assistant entries' message.content, a string or
// blocks (text, thinking, tool_use's input, tool_result's content); a user
// entry holding only tool results is a toolResult, as omp's are. The API
// requests, attachments and other bookkeeping lines (the system prompt,
// tool lists, costs) hold no conversation.
func claudeText(line []byte, n int) (transcript.Entry, bool) {
	// The bookkeeping lines are most of a file's bytes (each API request
	// carries the system prompt): a line whose type is not one of these is
	// not decoded at all. Claude Code writes JSON.stringify's compact JSON.
	if !bytes.Contains(line, []byte(`"type":"user"`)) && !bytes.Contains(line, []byte(`"type":"assistant"`)) && !bytes.Contains(line, []byte(`"type":"summary"`)) {
		return transcript.Entry{}, false
	}
	var l claudeLine
	if json.Unmarshal(line, &l) != nil {
		return transcript.Entry{}, false
	}
	e := transcript.Entry{Line: n, ID: l.UUID, Time: session.ParseTime(l.Timestamp)}
	switch {
	case l.Type == "summary" && l.Summary != "":
		e.Role = "summary"
		e.Parts = []transcript.Part{{Kind: transcript.Summary, Text: l.Summary}}
	case (l.Type == "user" || l.Type == "assistant") && l.Message != nil:
		e.Role, e.Parts = l.Type, claudeContent(l.Message.Content)
		if l.IsCompactSummary {
			e.Role = "compaction"
			for i := range e.Parts {
				e.Parts[i].Kind = transcript.Summary
			}
		}
		if len(e.Parts) > 0 && !slices.ContainsFunc(e.Parts, func(p transcript.Part) bool { return p.Kind != transcript.ToolResult }) {
			e.Role = "toolResult"
		}
	}
	return e, len(e.Parts) > 0
}

func claudeContent(raw json.RawMessage) []transcript.Part {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil
		}
		return []transcript.Part{{Kind: transcript.Text, Text: s}}
	}
	var blocks []claudeBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	var out []transcript.Part
	for _, b := range blocks {
		var p transcript.Part
		switch b.Type {
		case "text":
			p = transcript.Part{Kind: transcript.Text, Text: b.Text}
		case "thinking":
			p = transcript.Part{Kind: transcript.Thinking, Text: b.Thinking}
		case "tool_use", "server_tool_use":
			out = append(out, transcript.Part{Kind: transcript.ToolCall, Name: b.Name, Text: compactJSON(b.Input)})
			continue
		case "tool_result":
			p = transcript.Part{Kind: transcript.ToolResult, Text: blockText(b.Content)}
		}
		if p.Text != "" {
			out = append(out, p)
		}
	}
	return out
}
