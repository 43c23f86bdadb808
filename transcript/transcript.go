// Package transcript reads the conversation out of a session file: who
// said what, when, with tool calls and their results, for people (ompsync
// cat --text) and for search (ompsync grep). It reads omp's and pi's lines
// itself (Parse); another agent's lines are read by that agent's Format,
// which package store holds beside the rest of what it knows of the agent.
// It only reads: the bytes of a session are never changed here, and lines
// it does not understand are skipped, not refused.
package transcript

import (
	"bytes"
	"cmp"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Part kinds.
const (
	Text       = "text"       // what a user or the model wrote
	Thinking   = "thinking"   // the model's reasoning
	ToolCall   = "toolCall"   // a tool call: name and arguments
	ToolResult = "toolResult" // what a tool returned
	Summary    = "summary"    // a compaction's or branch's summary, a custom message
)

// Entry is one line of a session that holds text.
type Entry struct {
	// Line is the line's number in the file, from 1.
	Line int
	// ID is the entry's id ("" in legacy files, which have none).
	ID string
	// Role is the message's role (user, assistant, toolResult,
	// bashExecution), or for an entry that is not a message its type
	// (compaction, branch_summary, custom_message).
	Role  string
	Time  time.Time
	Parts []Part
}

// Part is one block of an entry's content.
type Part struct {
	Kind string
	// Name is the tool's, for tool calls and results.
	Name string
	Text string
}

type rawEntry struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Timestamp json.RawMessage `json:"timestamp"`
	Message   *rawMessage     `json:"message"`
	Content   json.RawMessage `json:"content"` // custom_message
	Summary   string          `json:"summary"` // compaction, branch_summary
}

type rawMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolName  string          `json:"toolName"`
	Command   string          `json:"command"` // bashExecution
	Output    string          `json:"output"`
	Timestamp json.RawMessage `json:"timestamp"`
}

type rawBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Format reads the conversation out of one agent's session lines.
type Format interface {
	// Text reads line n (numbered from 1, without its newline): the entry
	// it holds, false for a line that holds no conversation text.
	Text(line []byte, n int) (Entry, bool)
}

// Parse reads one line (without its newline) numbered n. It reports false
// for lines that hold no conversation text: the title slot, the header,
// model changes, omp's bookkeeping, and lines that are not JSON.
func Parse(line []byte, n int) (Entry, bool) {
	// Cheap refusals first: most bookkeeping lines never reach the scanner.
	if len(line) == 0 || line[0] != '{' {
		return Entry{}, false
	}
	r, ok := scanEntry(line)
	if !ok {
		return Entry{}, false
	}
	return entry(r, n, scanContent)
}

// entry makes an Entry of a decoded line, reading contents with content.
func entry(r rawEntry, n int, content func(raw []byte, kind, tool string) []Part) (Entry, bool) {
	e := Entry{Line: n, ID: r.ID, Time: parseTime(r.Timestamp)}
	switch r.Type {
	case "message":
		m := r.Message
		if m == nil || m.Role == "" { // no one said it: not a message omp wrote
			return Entry{}, false
		}
		e.Role = m.Role
		if e.Time.IsZero() {
			e.Time = parseTime(m.Timestamp)
		}
		if m.Role == "bashExecution" {
			e.Parts = append(e.Parts, Part{Kind: ToolCall, Name: "bash", Text: m.Command})
			if m.Output != "" {
				e.Parts = append(e.Parts, Part{Kind: ToolResult, Name: "bash", Text: m.Output})
			}
			break
		}
		kind := Text
		if m.Role == "toolResult" {
			kind = ToolResult
		}
		e.Parts = content(bytes.TrimSpace(m.Content), kind, m.ToolName)
	case "compaction", "branch_summary":
		e.Role = r.Type
		if r.Summary != "" {
			e.Parts = []Part{{Kind: Summary, Text: r.Summary}}
		}
	case "custom_message":
		e.Role = r.Type
		e.Parts = content(bytes.TrimSpace(r.Content), Summary, "")
	default:
		return Entry{}, false
	}
	if len(e.Parts) == 0 {
		return Entry{}, false
	}
	return e, true
}

// appendBlock adds the part a content block holds, if any. compact says
// the arguments hold no whitespace to take out.
func appendBlock(out []Part, b rawBlock, kind, tool string, compact bool) []Part {
	switch b.Type {
	case "text":
		if b.Text != "" {
			out = append(out, Part{Kind: kind, Name: tool, Text: b.Text})
		}
	case "thinking":
		if b.Thinking != "" {
			out = append(out, Part{Kind: Thinking, Text: b.Thinking})
		}
	case "toolCall":
		if compact {
			out = append(out, Part{Kind: ToolCall, Name: b.Name, Text: string(b.Arguments)})
			break
		}
		var args bytes.Buffer
		if len(b.Arguments) > 0 && json.Compact(&args, b.Arguments) != nil {
			args.Reset()
		}
		out = append(out, Part{Kind: ToolCall, Name: b.Name, Text: args.String()})
	}
	return out
}

// parseTime reads an entry's timestamp: RFC 3339 text, or Unix
// milliseconds as messages carry them.
func parseTime(raw json.RawMessage) time.Time {
	if len(raw) == 0 {
		return time.Time{}
	}
	if raw[0] == '"' { // a JSON string: checked as the line was read
		t, _ := time.Parse(time.RFC3339Nano, decode(raw))
		return t
	}
	if ms, err := strconv.ParseInt(string(raw), 10, 64); err == nil && ms > 0 {
		return time.UnixMilli(ms).UTC()
	}
	return time.Time{}
}

// MaxLine bounds the one line of a session Lines holds at a time.
const MaxLine = 64 << 20

// Lines reads a session's lines as its bytes are written to it, in pieces
// of any size: each line, once whole, is read by Format (nil: Parse, omp's and pi's), and
// the entry it holds goes to Entry; a line longer than Max (0: MaxLine) is
// read past, not held, and named to Long. Memory stays the longest line,
// whatever the session's size. Close ends a last line without a newline.
type Lines struct {
	Format Format
	Max    int
	// At is the session offset of the next byte written.
	At    int64
	Entry func(Entry)
	// Long gets line n's offset and its size without its newline.
	Long func(n int, at, size int64)
	// line holds the line begun and not yet ended, unless it grew past
	// Max; size counts its bytes either way, start is its offset, n the
	// lines read.
	line  []byte
	size  int64
	start int64
	n     int
}

// Write reads the whole lines p ends, keeping the rest of the last.
func (l *Lines) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.hold(p)
			l.At += int64(len(p))
			break
		}
		if l.size == 0 && int64(i) <= l.max() {
			l.read(p[:i]) // whole in p: not copied
		} else {
			l.hold(p[:i])
			l.end()
		}
		l.At += int64(i + 1)
		p = p[i+1:]
	}
	return n, nil
}

func (l *Lines) max() int64 { return int64(cmp.Or(l.Max, MaxLine)) }

// hold keeps part of the current line, or only counts it past Max.
func (l *Lines) hold(p []byte) {
	if l.size == 0 {
		l.start = l.At
	}
	l.size += int64(len(p))
	if l.size > l.max() {
		l.line = l.line[:0]
		return
	}
	l.line = append(l.line, p...)
}

// end reads the held line, or names it when it was too long.
func (l *Lines) end() {
	if l.size > l.max() {
		l.n++
		if l.Long != nil {
			l.Long(l.n, l.start, l.size)
		}
	} else {
		l.read(l.line)
	}
	if cap(l.line) > 1<<20 {
		l.line = nil // a long line's buffer is not kept for the short ones
	}
	l.line, l.size = l.line[:0], 0
}

func (l *Lines) read(line []byte) {
	l.n++
	text := Parse
	if l.Format != nil {
		text = l.Format.Text
	}
	if e, ok := text(line, l.n); ok {
		l.Entry(e)
	}
}

// Close reads the last line, if the bytes did not end with a newline.
func (l *Lines) Close() {
	if l.size > 0 {
		l.end()
	}
}

// CallLine is a tool call as the one line a search matches: its name and
// its arguments.
func (p Part) CallLine() string {
	return strings.TrimSpace(p.Name + " " + strings.ReplaceAll(p.Text, "\n", " "))
}
