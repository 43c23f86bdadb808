package transcript

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// RenderOptions say what a rendered transcript shows.
type RenderOptions struct {
	// Thinking shows the model's reasoning, which is left out by default.
	Thinking bool
	// Location is the time zone of the times shown (nil: UTC).
	Location *time.Location
	// Format reads the session's lines (nil: Parse, omp's and pi's).
	Format Format
	// EntryIDs puts each entry's id in brackets after its time, on its
	// first line (ompsync mcp: a reader can go to an entry search named).
	EntryIDs bool
	// Heading is the first line, naming the session (Heading).
	Heading string
}

// Heading is the line a transcript starts with: the session's id, title
// and folder.
func Heading(id, title, cwd string) string {
	line := "session " + id
	if title != "" {
		line += "  " + oneLine(title)
	}
	if cwd != "" {
		line += "  (" + cwd + ")"
	}
	return line
}

// summaryWidth bounds the one line a tool call or result is summed up in.
const summaryWidth = 160

// RenderFrom writes a readable transcript of the session file r holds: the
// heading, then each entry as its time, its role and its text; a tool call
// and a tool result take one line each, reasoning none unless asked. It
// reads a line at a time (Lines): a line longer than MaxLine is named in a
// line of its own instead of shown.
func RenderFrom(w io.Writer, r io.Reader, opts RenderOptions) error {
	opts.Location = cmp.Or(opts.Location, time.UTC)
	bw := bufio.NewWriter(w)
	if opts.Heading != "" {
		fmt.Fprintln(bw, opts.Heading)
	}
	lines := &Lines{Format: opts.Format, Entry: func(e Entry) { writeEntry(bw, e, opts) },
		Long: func(n int, _, size int64) {
			fmt.Fprintf(bw, "-  (line %d: %d MiB, more than the %d MiB a transcript shows of one line; left out)\n", n, size>>20, MaxLine>>20)
		}}
	if _, err := io.Copy(lines, r); err != nil {
		return err
	}
	lines.Close()
	return bw.Flush()
}

// writeEntry writes one entry's parts, a line each (a text's further lines
// indented under it).
func writeEntry(bw *bufio.Writer, e Entry, opts RenderOptions) {
	at := "-"
	if !e.Time.IsZero() {
		at = e.Time.In(opts.Location).Format(time.DateTime)
	}
	if opts.EntryIDs && e.ID != "" {
		at += "  [" + e.ID + "]"
	}
	for _, p := range e.Parts {
		var head, body string
		switch p.Kind {
		case Thinking:
			if !opts.Thinking {
				continue
			}
			head, body = e.Role+" (thinking)", p.Text
		case ToolCall:
			head, body = e.Role, "-> "+summary(p.Name+" "+p.Text)
		case ToolResult:
			n := strings.Count(strings.TrimRight(p.Text, "\n"), "\n") + 1
			more := ""
			if n > 1 {
				more = fmt.Sprintf(" (%d lines)", n)
			}
			text := p.Text
			if p.Name != "" { // Claude Code's and Codex's results name no tool
				text = p.Name + ": " + text
			}
			head, body = e.Role, "<- "+summary(strings.TrimSpace(text))+more
		default:
			head, body = e.Role, p.Text
		}
		lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
		fmt.Fprintf(bw, "%s  %s: %s\n", at, head, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(bw, "    %s\n", l)
		}
	}
}

// summary is s on one line, cut to summaryWidth characters.
func summary(s string) string {
	s = oneLine(s)
	if utf8.RuneCountInString(s) <= summaryWidth {
		return s
	}
	r := []rune(s)
	return string(r[:summaryWidth-3]) + "..."
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
