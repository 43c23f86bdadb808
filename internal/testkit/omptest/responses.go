package omptest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// OpenAI's Responses API, as Codex uses it (POST /v1/responses, streamed as
// server-sent events), answered from the same queue as the chat
// completions. A request that offers no tools is answered like a title
// request, the queue untouched.

type responsesRequest struct {
	Stream bool              `json:"stream"`
	Input  []responsesItem   `json:"input"`
	Tools  []json.RawMessage `json:"tools"`
}

type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // of a message: parts
	Output  json.RawMessage `json:"output"`  // of a function_call_output: a string or parts
}

func partsText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// turn is the user's prompt of the turn and, after a tool call, the tool
// outputs: the items after the last assistant message or call.
func (r *responsesRequest) turn() (prompt, toolResult string) {
	last := -1
	for i, it := range r.Input {
		if it.Type == "function_call" || it.Type == "local_shell_call" || it.Type == "custom_tool_call" ||
			it.Type == "message" && it.Role == "assistant" {
			last = i
		}
	}
	var results []string
	for _, it := range r.Input[last+1:] {
		if strings.HasSuffix(it.Type, "_output") {
			results = append(results, partsText(it.Output))
		}
	}
	end := len(r.Input)
	if len(results) > 0 {
		toolResult = strings.Join(results, "\n")
		if toolResult == "" {
			toolResult = "(empty)"
		}
		end = last
	}
	for i := end - 1; i >= 0; i-- {
		it := r.Input[i]
		if it.Type != "message" && it.Type != "" || it.Role != "user" {
			continue
		}
		text := partsText(it.Content)
		// Codex sends its environment and the project's instructions as
		// user messages of their own, in tags.
		if t := strings.TrimSpace(text); strings.HasPrefix(t, "<") && strings.HasSuffix(t, ">") {
			continue
		}
		return text, toolResult
	}
	return "", toolResult
}

func (m *Model) responses(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "omptest: bad JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	rec := Request{Title: len(req.Tools) == 0, Stream: req.Stream, Body: body}
	for _, t := range req.Tools {
		var tool struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		_ = json.Unmarshal(t, &tool)
		if tool.Name == "" {
			tool.Name = tool.Type
		}
		rec.Tools = append(rec.Tools, tool.Name)
	}
	rec.RawPrompt, rec.ToolResult = req.turn()
	rec.Prompt = rec.RawPrompt
	rec, callID := m.answer(rec)
	if rec.Title {
		rec.Reply.Text = strings.TrimSuffix(strings.TrimPrefix(rec.Reply.Text, "<title>"), "</title>")
	}
	streamResponse(w, rec.Reply, callID, m.nextResponseID())
}

func (m *Model) nextResponseID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.responseIDs++
	return fmt.Sprintf("resp_%04d", m.responseIDs)
}

// streamResponse sends reply as the Responses API's events:
// response.created, the output item (text deltas, or a function call),
// response.output_item.done, response.completed with the usage.
func streamResponse(w http.ResponseWriter, reply Reply, callID, respID string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	send := func(data map[string]any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", data["type"], b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send(map[string]any{"type": "response.created", "response": map[string]any{"id": respID, "object": "response", "status": "in_progress"}})
	var item map[string]any
	if reply.Tool != "" {
		item = map[string]any{"type": "function_call", "id": "fc_" + strings.TrimPrefix(callID, "call_"), "call_id": callID,
			"name": reply.Tool, "arguments": reply.Args, "status": "completed"}
		send(map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	} else {
		itemID := "msg_" + strings.TrimPrefix(respID, "resp_")
		send(map[string]any{"type": "response.output_item.added", "output_index": 0,
			"item": map[string]any{"type": "message", "id": itemID, "role": "assistant", "status": "in_progress", "content": []any{}}})
		for text := reply.Text; text != ""; {
			n := min(len(text), 4096)
			for n < len(text) && !utf8Start(text[n]) {
				n++
			}
			send(map[string]any{"type": "response.output_text.delta", "item_id": itemID, "output_index": 0, "content_index": 0, "delta": text[:n]})
			text = text[n:]
		}
		item = map[string]any{"type": "message", "id": itemID, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}}}
	}
	send(map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	out := (len(reply.Text)+len(reply.Args))/4 + 1
	send(map[string]any{"type": "response.completed", "response": map[string]any{
		"id": respID, "object": "response", "status": "completed", "output": []any{item},
		"usage": map[string]any{"input_tokens": 100, "output_tokens": out, "total_tokens": 100 + out,
			"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}},
	}})
}
