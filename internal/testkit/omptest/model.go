package omptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// ModelID is the model omp is told to use: the provider "fake" that
// NewHome declares in models.yml, with its one model.
const ModelID = "fake/fake-model"

// Reply is one scripted answer of the fake model: text, or one tool call.
type Reply struct {
	Text string // the assistant text (when Tool is empty)
	Tool string // a tool name (bash, read, write, ...): the reply is a call of it
	Args string // the tool call's arguments, a JSON object
}

// Text is a reply of plain text.
func Text(s string) Reply { return Reply{Text: s} }

// LongText is a text reply of about size bytes: marker, then numbered lines
// of filler, so a test can find both the marker and the end ("<marker> end").
func LongText(marker string, size int) Reply {
	var b strings.Builder
	b.WriteString(marker)
	b.WriteByte('\n')
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "%s line %06d: the quick brown fox jumps over the lazy dog\n", marker, i)
	}
	b.WriteString(marker + " end")
	return Reply{Text: b.String()}
}

// Looping is a text reply that repeats one sentence until omp's loop guard
// (model.loopGuard) cuts the stream: omp retries the turn and, once the
// retry succeeds, marks the cut message with retryRecovery and rewrites its
// whole session file (temp file and rename), as seen with real models.
func Looping() Reply { return Text(strings.Repeat("I will check the file again now. ", 600)) }

// ToolCall is a reply that calls tool with args (marshaled to JSON). omp runs
// the tool and sends the result in its next request, which gets the next
// reply in the queue.
func ToolCall(tool string, args any) Reply {
	b, err := json.Marshal(args)
	if err != nil {
		panic(fmt.Sprintf("omptest: tool arguments: %v", err))
	}
	return Reply{Tool: tool, Args: string(b)}
}

// Bash calls omp's bash tool.
func Bash(command string) Reply { return ToolCall("bash", map[string]any{"command": command}) }

// Read calls omp's read tool on path (absolute, or relative to omp's cwd).
func Read(path string) Reply { return ToolCall("read", map[string]any{"path": path}) }

// Write calls omp's write tool.
func Write(path, content string) Reply {
	return ToolCall("write", map[string]any{"path": path, "content": content})
}

// Request is one request the fake model received.
type Request struct {
	Title      bool   // a title-generation request (answered with a title, the queue untouched)
	Stream     bool   // stream: true
	Prompt     string // what the user typed for this turn, without the <system-reminder> omp puts first
	RawPrompt  string // the same with it
	ToolResult string // in a request that follows a tool call: the tool results' text
	Tools      []string
	Reply      Reply // what the model answered
	Body       []byte
}

// Model is a fake model server on 127.0.0.1 that speaks OpenAI's chat
// completions (omp, pi), Anthropic's Messages API (Claude Code: messages.go)
// and OpenAI's Responses API (Codex: responses.go). Replies come
// from a queue (Queue); when it is empty the model answers "ok NNNN", a
// counter that makes every reply distinct. Title-generation requests get a
// title and never take from the queue.
type Model struct {
	srv *httptest.Server

	mu       sync.Mutex
	queue    []Reply
	requests []Request
	title    string // "" = "Fake title N"
	defaults int    // default replies given
	titles   int
	calls    int // tool call ids
	// responseIDs numbers the Responses API's answers.
	responseIDs int
}

// NewModel starts a fake model for the test; it stops when the test ends.
func NewModel(t testing.TB) *Model {
	t.Helper()
	m := &Model{}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", m.chat)
	mux.HandleFunc("/chat/completions", m.chat)
	mux.HandleFunc("/v1/models", m.models)
	mux.HandleFunc("/models", m.models)
	mux.HandleFunc("/v1/messages", m.messages)
	mux.HandleFunc("/v1/messages/count_tokens", m.countTokens)
	mux.HandleFunc("/v1/responses", m.responses)
	m.srv = httptest.NewServer(mux)
	t.Cleanup(m.srv.Close)
	return m
}

// BaseURL is the URL omp is given (ending in /v1).
func (m *Model) BaseURL() string { return m.srv.URL + "/v1" }

// URL is the server's root, for clients that add /v1 themselves
// (ANTHROPIC_BASE_URL).
func (m *Model) URL() string { return m.srv.URL }

// Queue appends replies, answered in order by the coming chat requests.
func (m *Model) Queue(replies ...Reply) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue = append(m.queue, replies...)
}

// Pending is how many queued replies have not been sent.
func (m *Model) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.queue)
}

// SetTitle sets the answer to later title-generation requests ("" restores
// the default "Fake title N").
func (m *Model) SetTitle(title string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.title = title
}

// Requests returns a copy of every request received, in order.
func (m *Model) Requests() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Request(nil), m.requests...)
}

// Prompts returns the user prompt of every chat request that did not carry
// a tool result, in order: what the user typed, once per turn.
func (m *Model) Prompts() []string {
	var out []string
	for _, r := range m.Requests() {
		if !r.Title && r.ToolResult == "" {
			out = append(out, r.Prompt)
		}
	}
	return out
}

// Replies returns the text of every non-title text reply sent, in order.
func (m *Model) Replies() []string {
	var out []string
	for _, r := range m.Requests() {
		if !r.Title && r.Reply.Tool == "" {
			out = append(out, r.Reply.Text)
		}
	}
	return out
}

type chatRequest struct {
	Stream   bool          `json:"stream"`
	Messages []chatMessage `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text is a message's content: a string, or the text of its parts.
func (c chatMessage) text() string {
	var s string
	if json.Unmarshal(c.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(c.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// isTitle tells omp's title request (utils/title-generator.ts) from a turn:
// its system prompt asks for the title inside <title> tags, and it offers
// no tools.
func (r *chatRequest) isTitle() bool {
	if len(r.Tools) > 0 {
		return false
	}
	for _, msg := range r.Messages {
		if (msg.Role == "system" || msg.Role == "developer") && strings.Contains(msg.text(), "<title>") {
			return true
		}
	}
	return false
}

// turn returns the user's prompt of the turn the request is for and, when
// it follows a tool call, the tool results' text. In a follow-up the
// messages after the last assistant one are tool results, and for an image
// a user message omp adds to carry it ("Attached image(s) from tool
// result:"); the prompt is then the last user message before them.
func (r *chatRequest) turn() (prompt, toolResult string) {
	last := -1 // the last assistant message
	for i, msg := range r.Messages {
		if msg.Role == "assistant" {
			last = i
		}
	}
	var results []string
	for _, msg := range r.Messages[last+1:] {
		if msg.Role == "tool" {
			results = append(results, msg.text())
		}
	}
	end := len(r.Messages)
	if len(results) > 0 {
		end = last
		toolResult = strings.Join(results, "\n")
		if toolResult == "" {
			toolResult = "(empty)" // still marks the request as a tool round trip
		}
	}
	for i := end - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].text(), toolResult
		}
	}
	return "", toolResult
}

func (m *Model) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"fake-model","object":"model","created":0,"owned_by":"omptest"}]}`)
}

func (m *Model) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "omptest: bad JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	rec := Request{Title: req.isTitle(), Stream: req.Stream, Body: body}
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Function.Name)
	}
	rec.RawPrompt, rec.ToolResult = req.turn()
	rec.Prompt = stripReminders(rec.RawPrompt)
	rec, callID := m.answer(rec)
	if req.Stream {
		streamReply(w, rec.Reply, callID)
	} else {
		writeReply(w, rec.Reply, callID)
	}
}

// answer picks the reply to rec (a title, the next queued reply, or a
// default one), records the request and returns it with the reply's tool
// call id ("" for text).
func (m *Model) answer(rec Request) (Request, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var callID string
	switch {
	case rec.Title:
		m.titles++
		rec.Reply = Text(fmt.Sprintf("<title>Fake title %d</title>", m.titles))
		if m.title != "" {
			rec.Reply = Text("<title>" + m.title + "</title>")
		}
	case len(m.queue) > 0:
		rec.Reply = m.queue[0]
		m.queue = m.queue[1:]
	default:
		m.defaults++
		rec.Reply = Text(fmt.Sprintf("ok %04d", m.defaults))
	}
	if rec.Reply.Tool != "" {
		m.calls++
		callID = fmt.Sprintf("call_%04d", m.calls)
	}
	m.requests = append(m.requests, rec)
	return rec, callID
}

const completionID = "chatcmpl-omptest"

func toolCallJSON(reply Reply, callID string) map[string]any {
	return map[string]any{
		"index": 0, "id": callID, "type": "function",
		"function": map[string]any{"name": reply.Tool, "arguments": reply.Args},
	}
}

// usage is a token count omp shows and stores; its size is made up.
func usage(reply Reply) map[string]any {
	out := (len(reply.Text)+len(reply.Args))/4 + 1
	return map[string]any{"prompt_tokens": 100, "completion_tokens": out, "total_tokens": 100 + out}
}

func writeReply(w http.ResponseWriter, reply Reply, callID string) {
	msg := map[string]any{"role": "assistant", "content": reply.Text}
	finish := "stop"
	if reply.Tool != "" {
		msg["content"] = nil
		msg["tool_calls"] = []any{toolCallJSON(reply, callID)}
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": completionID, "object": "chat.completion", "created": time.Now().Unix(), "model": "fake-model",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   usage(reply),
	})
}

// streamReply sends reply as OpenAI SSE chunks: role, content in pieces of
// at most 4 KiB (or the tool call), finish_reason, usage, [DONE]. Pieces
// are few because omp re-emits the whole partial message on each.
func streamReply(w http.ResponseWriter, reply Reply, callID string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	var buf bytes.Buffer
	send := func(choices []any, extra map[string]any) {
		chunk := map[string]any{
			"id": completionID, "object": "chat.completion.chunk", "created": time.Now().Unix(),
			"model": "fake-model", "choices": choices,
		}
		for k, v := range extra {
			chunk[k] = v
		}
		buf.Reset()
		buf.WriteString("data: ")
		_ = json.NewEncoder(&buf).Encode(chunk) // ends in \n
		buf.WriteString("\n")
		_, _ = w.Write(buf.Bytes())
		if flusher != nil {
			flusher.Flush()
		}
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish}}
	}

	send(delta(map[string]any{"role": "assistant", "content": ""}, nil), nil)
	finish := "stop"
	if reply.Tool != "" {
		send(delta(map[string]any{"tool_calls": []any{toolCallJSON(reply, callID)}}, nil), nil)
		finish = "tool_calls"
	} else {
		for text := reply.Text; text != ""; {
			n := min(len(text), 4096)
			for n < len(text) && !utf8Start(text[n]) { // never split a character
				n++
			}
			send(delta(map[string]any{"content": text[:n]}, nil), nil)
			text = text[n:]
		}
	}
	send(delta(map[string]any{}, finish), nil)
	send([]any{}, map[string]any{"usage": usage(reply)})
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// stripReminders drops the <system-reminder> blocks omp puts before what
// the user typed (today's date, the cwd).
func stripReminders(s string) string {
	const open, end = "<system-reminder>", "</system-reminder>"
	for {
		t := strings.TrimLeft(s, " \n")
		if !strings.HasPrefix(t, open) {
			return s
		}
		i := strings.Index(t, end)
		if i < 0 {
			return s
		}
		s = strings.TrimLeft(t[i+len(end):], "\n")
	}
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
