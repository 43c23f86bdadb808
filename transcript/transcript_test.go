package transcript

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/session"
)

// Entries reads data whole, as Lines reads it streamed, calling f for
// every entry until f returns false.
func Entries(data []byte, format Format, f func(Entry) bool) {
	stop := false
	l := &Lines{Format: format, Entry: func(e Entry) { stop = stop || !f(e) }}
	l.Write(data)
	l.Close()
}

// Render is RenderFrom of data, headed as its omp or pi header names it.
func Render(w io.Writer, data []byte, opts RenderOptions) error {
	if h, slot, err := session.ReadHeader(data); err == nil {
		title := slot.Title
		if title == "" {
			title = h.Title
		}
		opts.Heading = Heading(h.ID, title, h.Cwd)
	}
	return RenderFrom(w, bytes.NewReader(data), opts)
}

// sample is a session with a title slot (256 bytes with its newline).
var sample = slot("fix login") + `{"type":"session","version":3,"id":"019a-sample","timestamp":"2026-10-07T00:45:40.854Z","cwd":"/home/u/w"}
{"type":"model_change","id":"m0000001","parentId":null,"timestamp":"2026-10-07T00:45:41.000Z","provider":"p","modelId":"x"}
{"type":"message","id":"a0000001","parentId":"m0000001","timestamp":"2026-10-07T00:46:00.000Z","message":{"role":"user","content":[{"type":"text","text":"Fix the login bug\nin auth.go"}]}}
{"type":"message","id":"a0000002","parentId":"a0000001","timestamp":"2026-10-07T00:46:05.000Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"Look at auth first."},{"type":"text","text":"Reading it."},{"type":"toolCall","id":"t1","name":"read","arguments":{"path":"auth.go"}}]}}
{"type":"message","id":"a0000003","parentId":"a0000002","timestamp":"2026-10-07T00:46:06.000Z","message":{"role":"toolResult","toolCallId":"t1","toolName":"read","content":[{"type":"text","text":"package auth\nfunc Login() {}\n"}],"isError":false}}
{"type":"custom","customType":"tool_execution_start","data":{"toolName":"read"},"id":"c0000001","parentId":"a0000003","timestamp":"2026-10-07T00:46:07.000Z"}
not json at all
{"type":"compaction","id":"k0000001","parentId":"a0000003","timestamp":"2026-10-07T00:47:00.000Z","summary":"The user is fixing a login bug."}
{"type":"message","message":{"role":"user","content":"legacy: no id, string content","timestamp":1791334080000}}
{"type":"message","id":"b0000001","parentId":"k0000001","message":{"role":"bashExecution","command":"go test ./...","output":"ok\n","timestamp":1791334140000}}
`

func slot(title string) string {
	s := `{"type":"title","v":1,"title":"` + title + `","updatedAt":"2026-10-07T02:00:00.000Z","pad":"`
	return s + strings.Repeat(" ", 256-len(s)-3) + "\"}\n"
}

func TestParse(t *testing.T) {
	var got []Entry
	Entries([]byte(sample), nil, func(e Entry) bool { got = append(got, e); return true })
	want := []struct {
		line      int
		id, role  string
		kinds     string
		firstText string
	}{
		{4, "a0000001", "user", "text", "Fix the login bug\nin auth.go"},
		{5, "a0000002", "assistant", "thinking,text,toolCall", "Look at auth first."},
		{6, "a0000003", "toolResult", "toolResult", "package auth\nfunc Login() {}\n"},
		{9, "k0000001", "compaction", "summary", "The user is fixing a login bug."},
		{10, "", "user", "text", "legacy: no id, string content"},
		{11, "b0000001", "bashExecution", "toolCall,toolResult", "go test ./..."},
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		e := got[i]
		var kinds []string
		for _, p := range e.Parts {
			kinds = append(kinds, p.Kind)
		}
		if e.Line != w.line || e.ID != w.id || e.Role != w.role || strings.Join(kinds, ",") != w.kinds || e.Parts[0].Text != w.firstText || e.Time.IsZero() {
			t.Errorf("entry %d: %+v, want %+v", i, e, w)
		}
	}
	if call := got[1].Parts[2]; call.Name != "read" || call.Text != `{"path":"auth.go"}` || call.CallLine() != `read {"path":"auth.go"}` {
		t.Errorf("tool call: %+v, line %q", call, call.CallLine())
	}
	if got[4].Time.UnixMilli() != 1791334080000 {
		t.Errorf("time from the message's milliseconds: %v", got[4].Time)
	}
	n := 0
	Entries([]byte(sample), nil, func(Entry) bool { n++; return n < 2 })
	if n != 2 {
		t.Errorf("Entries went on after false: %d calls", n)
	}
}

func TestRender(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, []byte(sample), RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `session 019a-sample  fix login  (/home/u/w)
2026-10-07 00:46:00  user: Fix the login bug
    in auth.go
2026-10-07 00:46:05  assistant: Reading it.
2026-10-07 00:46:05  assistant: -> read {"path":"auth.go"}
2026-10-07 00:46:06  toolResult: <- read: package auth func Login() {} (2 lines)
2026-10-07 00:47:00  compaction: The user is fixing a login bug.
2026-10-07 00:48:00  user: legacy: no id, string content
2026-10-07 00:49:00  bashExecution: -> bash go test ./...
2026-10-07 00:49:00  bashExecution: <- bash: ok
`
	if b.String() != want {
		t.Errorf("transcript:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	Render(&b, []byte(sample), RenderOptions{Thinking: true})
	if !strings.Contains(b.String(), "2026-10-07 00:46:05  assistant (thinking): Look at auth first.\n") {
		t.Errorf("--thinking does not show the reasoning:\n%s", b.String())
	}
}

// corpusFiles is every real session of testdata/corpus: each file's name
// and bytes (none is a failure, not a test of nothing).
func corpusFiles(tb testing.TB) (names []string, data [][]byte) {
	files, _ := filepath.Glob("../testdata/corpus/*.jsonl")
	if len(files) == 0 {
		tb.Fatal("no corpus")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		names, data = append(names, filepath.Base(f)), append(data, b)
	}
	return names, data
}

// Every real session renders, and every entry with text is found.
func TestCorpus(t *testing.T) {
	names, files := corpusFiles(t)
	for i, data := range files {
		f := names[i]
		n := 0
		Entries(data, nil, func(e Entry) bool { n++; return true })
		if n == 0 {
			t.Errorf("%s: no entries with text", f)
		}
		var b bytes.Buffer
		if err := Render(&b, data, RenderOptions{}); err != nil || strings.Count(b.String(), "\n") < n {
			t.Errorf("%s: %d lines for %d entries (%v)", f, strings.Count(b.String(), "\n"), n, err)
		}
	}
}

// A transcript read from a stream holds one line at a time: a line longer
// than it may hold is named, not shown, and the lines around it render as
// they would without it.
func TestRenderFromLongLine(t *testing.T) {
	lines := strings.SplitAfter(sample, "\n")
	long := io.LimitReader(repeatByte('x'), MaxLine+10)
	r := io.MultiReader(strings.NewReader(strings.Join(lines[:3], "")), long, strings.NewReader("\n"+strings.Join(lines[3:], "")))
	var got, want bytes.Buffer
	if err := RenderFrom(&got, r, RenderOptions{Heading: "session 019a-sample  fix login  (/home/u/w)"}); err != nil {
		t.Fatal(err)
	}
	if err := Render(&want, []byte(sample), RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	note := "-  (line 4: 64 MiB, more than the 64 MiB a transcript shows of one line; left out)\n"
	if !strings.Contains(got.String(), note) || strings.Replace(got.String(), note, "", 1) != want.String() {
		t.Errorf("transcript with a long line:\n%s\nwant the one without it, and %q", got.String(), note)
	}
}

// repeatByte reads as b, endlessly.
type repeatByte byte

func (r repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// Lines holds no long line's buffer after it: neither one past Max, read
// past in pieces, nor one just within it.
func TestLinesBuffer(t *testing.T) {
	var got []int
	l := &Lines{Max: 1 << 20, Entry: func(e Entry) { got = append(got, e.Line) }}
	long := strings.Repeat("y", 2<<20) + "\n"
	within := `{"type":"message","id":"w","message":{"role":"user","content":"` + strings.Repeat("y", 1<<20-200) + `"}}` + "\n"
	for i, part := range []string{long, within} {
		for p := []byte(part); len(p) > 0; {
			n := min(100<<10, len(p))
			l.Write(p[:n])
			p = p[n:]
		}
		if cap(l.line) > 1<<20 {
			t.Errorf("line %d: Lines keeps a buffer of %d KiB after it", i+1, cap(l.line)>>10)
		}
	}
	if fmt.Sprint(got) != "[2]" {
		t.Errorf("entries read at lines %v, want [2]", got)
	}
}
