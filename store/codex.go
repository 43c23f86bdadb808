package store

import (
	"bytes"
	"encoding/json"
	"io"
	"path"
	"regexp"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ompsync/ompsync/session"
	"github.com/ompsync/ompsync/transcript"
)

// Codex is Codex's store (npm @openai/codex): its folder (~/.codex, or
// $CODEX_HOME) holds sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl, one
// file per session ("rollout"), whose first line, session_meta, names the
// session and its cwd. `codex archive` moves a rollout into
// archived_sessions/ (and unarchive back): a move, as ompsync records it.
// Codex may compress an idle rollout in place into <name>.jsonl.zst; that
// is the session archived, read through zstd. Lines carry no entry ids, so
// two copies that went on apart cannot be merged: restore keeps the local
// file and writes the other machine's copy beside it (<name>.jsonl.<machine>,
// which neither Codex nor ompsync takes for a session). Nothing else in the
// folder is read: never auth.json, config.toml, history.jsonl, the SQLite
// databases or the logs. `codex resume <id>` resumes a session.
func Codex() *Store {
	return &Store{
		name:     "codex",
		home:     Home{Title: "Codex's folder", Env: "CODEX_HOME", Dir: ".codex"},
		roots:    []string{"sessions", "archived_sessions"},
		resume:   "codex resume",
		what:     "a Codex rollout under sessions/ or archived_sessions/",
		classify: codexClassify,
		// The UUID that ends a rollout's name.
		idFromName: func(name string) (string, bool) {
			id := codexIDEnd.FindString(strings.TrimSuffix(path.Base(strings.TrimSuffix(name, ".zst")), ".jsonl"))
			return id, id != ""
		},
		headID: func(head []byte) string {
			info, _ := codexDescribe(head)
			return info.ID
		},
		describe: codexDescribe,
		text:     codexText,
		// <name>.jsonl.zst, compressed in place, was <name>.jsonl.
		archiveExt: ".zst",
		openArchive: func(_ string, r io.Reader, limit int64) (io.ReadCloser, error) {
			d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(limit)+1))
			if err != nil {
				return nil, err
			}
			return d.IOReadCloser(), nil
		},
		beside: true,
	}
}

// codexUUID is the UUID that ends a rollout's name.
const codexUUID = `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`

// codexRollout is a rollout's path, in a year/month/day folder or
// archived, and compressed in place (.zst) or not.
var codexRollout = regexp.MustCompile(`^(sessions/[0-9]{4}/[0-9]{2}/[0-9]{2}|archived_sessions)/rollout-[^/]*` + codexUUID + `\.jsonl(\.zst)?$`)

var codexIDEnd = regexp.MustCompile(codexUUID + `$`)

func codexClassify(parts []string) Kind {
	switch m := codexRollout.FindStringSubmatch(strings.Join(parts, "/")); {
	case m == nil:
		return KindIgnored
	case m[2] != "":
		return KindArchive
	}
	return KindSession
}

// codexDescribe: session_meta's id and cwd; the title is the first thing the
// user typed (Codex's own context messages are in tags). session_meta
// carries Codex's whole system prompt, so the first line often runs past
// the bytes given: its id and cwd, which come first, are read from what
// there is.
func codexDescribe(head []byte) (Info, bool) {
	var info Info
	found := false
	if session.SettledLen(head) == 0 {
		info.ID, info.Cwd, found = codexMetaPrefix(head)
		return info, found
	}
	for _, line := range bytes.Split(head[:session.SettledLen(head)], []byte("\n")) {
		var l codexLine
		if json.Unmarshal(line, &l) == nil && l.Type == "session_meta" {
			info.ID, info.Cwd, found = l.Payload.ID, l.Payload.Cwd, true
			break
		}
	}
	info.Title = firstPrompt(codexText, head, true)
	return info, found
}

// codexMetaPrefix reads the id and cwd of a session_meta line from its
// first bytes, token by token, until they or the bytes run out.
func codexMetaPrefix(b []byte) (id, cwd string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	depth, key, isMeta, inPayload := 0, "", false, false
	wantValue := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return id, cwd, isMeta && id != ""
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
				inPayload = depth == 2 && key == "payload" && wantValue
			} else {
				depth--
			}
			wantValue = false
			continue
		case string:
			if !wantValue && (v != "" || dec.More()) && depth >= 1 {
				key, wantValue = v, true
				continue
			}
			switch {
			case depth == 1 && key == "type":
				isMeta = v == "session_meta"
			case depth == 2 && inPayload && key == "id":
				id = v
			case depth == 2 && inPayload && key == "cwd":
				cwd = v
			}
		}
		wantValue = false
		if isMeta && id != "" && cwd != "" {
			return id, cwd, true
		}
	}
}

// codexLine is what ompsync reads of one of Codex's lines.
type codexLine struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Payload   struct {
		Type    string          `json:"type"`
		ID      string          `json:"id"`
		Cwd     string          `json:"cwd"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		// reasoning
		Summary json.RawMessage `json:"summary"`
		// function_call (arguments: JSON in a string), custom_tool_call
		// (input), local_shell_call and web_search_call (action)
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Input     json.RawMessage `json:"input"`
		Action    json.RawMessage `json:"action"`
		// function_call_output, custom_tool_call_output: a string or
		// content items
		Output json.RawMessage `json:"output"`
		// compacted
		Message string `json:"message"`
	} `json:"payload"`
}

// codexText: the response items, the conversation as the model saw it: user
// and assistant messages (input_text, output_text), the model's reasoning
// summaries, tool calls (function_call's arguments, custom and shell
// calls) and their outputs, as toolResult entries like omp's; a
// compaction's summary. The developer and system messages are Codex's own
// instructions (omp keeps its system prompt out of its files too), and the
// event_msg lines repeat what the response items hold.
func codexText(line []byte, n int) (transcript.Entry, bool) {
	if !bytes.Contains(line, []byte(`"response_item"`)) && !bytes.Contains(line, []byte(`"compacted"`)) {
		return transcript.Entry{}, false
	}
	var l codexLine
	if json.Unmarshal(line, &l) != nil {
		return transcript.Entry{}, false
	}
	p := &l.Payload
	e := transcript.Entry{Line: n, ID: p.ID, Time: session.ParseTime(l.Timestamp)}
	add := func(kind, name, text string) {
		if text != "" {
			e.Parts = append(e.Parts, transcript.Part{Kind: kind, Name: name, Text: text})
		}
	}
	switch {
	case l.Type == "compacted":
		e.Role = "compaction"
		add(transcript.Summary, "", p.Message)
	case l.Type != "response_item":
	case p.Type == "message" && (p.Role == "user" || p.Role == "assistant"):
		e.Role = p.Role
		var items []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(p.Content, &items)
		for _, it := range items {
			if it.Type == "input_text" || it.Type == "output_text" {
				add(transcript.Text, "", it.Text)
			}
		}
	case p.Type == "reasoning":
		e.Role = "assistant"
		add(transcript.Thinking, "", blockText(p.Summary))
		add(transcript.Thinking, "", blockText(p.Content))
	case p.Type == "function_call":
		e.Role = "assistant"
		add(transcript.ToolCall, p.Name, compactJSON(p.Arguments))
	case p.Type == "custom_tool_call":
		e.Role = "assistant"
		add(transcript.ToolCall, p.Name, compactJSON(p.Input))
	case p.Type == "local_shell_call":
		e.Role = "assistant"
		add(transcript.ToolCall, "shell", compactJSON(p.Action))
	case p.Type == "web_search_call":
		e.Role = "assistant"
		add(transcript.ToolCall, "web_search", compactJSON(p.Action))
	case p.Type == "function_call_output" || p.Type == "custom_tool_call_output":
		e.Role = "toolResult"
		add(transcript.ToolResult, "", blockText(p.Output))
	}
	return e, len(e.Parts) > 0
}
