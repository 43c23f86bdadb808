package omptest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Anthropic's Messages API, as Claude Code uses it (POST /v1/messages,
// streamed as server-sent events), answered from the same queue as the
// chat completions. A request that offers no tools (Claude Code's titles,
// summaries and quota probes) is answered like a title request, the queue
// untouched.

type messagesRequest struct {
	Stream   bool              `json:"stream"`
	System   json.RawMessage   `json:"system"`
	Messages []anthropicMsg    `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
}

type anthropicMsg struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"` // of a tool_result: a string or blocks
}

// blocks decodes content: a string is one text block.
func blocks(raw json.RawMessage) []anthropicBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var bs []anthropicBlock
	_ = json.Unmarshal(raw, &bs)
	return bs
}

// texts joins the text of the blocks of type typ; a tool_result's own
// content is its text.
func texts(bs []anthropicBlock, typ string) string {
	var out []string
	for _, b := range bs {
		if b.Type != typ {
			continue
		}
		if typ == "tool_result" {
			var parts []string
			for _, c := range blocks(b.Content) {
				parts = append(parts, c.Text)
			}
			out = append(out, strings.Join(parts, ""))
			continue
		}
		out = append(out, b.Text)
	}
	return strings.Join(out, "\n")
}

// turn is the user's prompt of the turn, and the tool results when the
// request follows a tool call: the user message after the last assistant
// one holds tool_result blocks.
func (r *messagesRequest) turn() (prompt, toolResult string) {
	last := -1
	for i, msg := range r.Messages {
		if msg.Role == "assistant" {
			last = i
		}
	}
	hasResult := false
	for _, msg := range r.Messages[last+1:] {
		bs := blocks(msg.Content)
		for _, b := range bs {
			if b.Type == "tool_result" {
				hasResult = true
			}
		}
		if t := texts(bs, "tool_result"); t != "" {
			toolResult += t
		}
	}
	end := len(r.Messages)
	if hasResult {
		end = last
		if toolResult == "" {
			toolResult = "(empty)"
		}
	}
	for i := end - 1; i >= 0; i-- {
		if r.Messages[i].Role != "user" {
			continue
		}
		bs := blocks(r.Messages[i].Content)
		if texts(bs, "tool_result") != "" {
			continue
		}
		// Claude Code puts reminders first, each a text block of its own:
		// what the user typed is the last.
		var last string
		for _, b := range bs {
			if b.Type == "text" && !strings.HasPrefix(strings.TrimSpace(b.Text), "<system-reminder>") {
				last = b.Text
			}
		}
		return last, toolResult
	}
	return "", toolResult
}

func (m *Model) messages(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "omptest: bad JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	rec := Request{Title: len(req.Tools) == 0, Stream: req.Stream, Body: body}
	for _, t := range req.Tools {
		var tool struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(t, &tool)
		rec.Tools = append(rec.Tools, tool.Name)
	}
	rec.RawPrompt, rec.ToolResult = req.turn()
	rec.Prompt = stripReminders(rec.RawPrompt)
	rec, callID := m.answer(rec)
	if rec.Title {
		// A title, a summary or a probe: plain text, without the tags.
		rec.Reply.Text = strings.TrimSuffix(strings.TrimPrefix(rec.Reply.Text, "<title>"), "</title>")
	}
	if !req.Stream {
		writeMessage(w, rec.Reply, callID)
		return
	}
	streamMessage(w, rec.Reply, callID)
}

// countTokens answers Claude Code's token counts with a made-up size.
func (m *Model) countTokens(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"input_tokens":100}`)
}

func anthropicUsage(reply Reply) map[string]any {
	return map[string]any{"input_tokens": 100, "output_tokens": (len(reply.Text)+len(reply.Args))/4 + 1,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}

func toolUseID(callID string) string { return "toolu_" + strings.TrimPrefix(callID, "call_") }

func writeMessage(w http.ResponseWriter, reply Reply, callID string) {
	content := []any{map[string]any{"type": "text", "text": reply.Text}}
	stop := "end_turn"
	if reply.Tool != "" {
		content = []any{map[string]any{"type": "tool_use", "id": toolUseID(callID), "name": reply.Tool, "input": json.RawMessage(reply.Args)}}
		stop = "tool_use"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "msg_omptest", "type": "message", "role": "assistant", "model": "fake-model",
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": anthropicUsage(reply),
	})
}

// streamMessage sends reply as Anthropic's events: message_start, one
// content block (text in pieces of at most 4 KiB, or a tool_use with its
// input as one JSON delta), message_delta with the stop reason, message_stop.
func streamMessage(w http.ResponseWriter, reply Reply, callID string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	send := func(event string, data map[string]any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	usage := anthropicUsage(reply)
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_omptest", "type": "message", "role": "assistant", "model": "fake-model", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 100, "output_tokens": 1},
	}})
	stop := "end_turn"
	if reply.Tool != "" {
		stop = "tool_use"
		send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": toolUseID(callID), "name": reply.Tool, "input": map[string]any{}}})
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": reply.Args}})
	} else {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		for text := reply.Text; text != ""; {
			n := min(len(text), 4096)
			for n < len(text) && !utf8Start(text[n]) {
				n++
			}
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "text_delta", "text": text[:n]}})
			text = text[n:]
		}
	}
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": usage["output_tokens"]}})
	send("message_stop", map[string]any{"type": "message_stop"})
}
