package transcript

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ompsync/ompsync/session"
)

// RenderOptions say what a rendered transcript shows.
type RenderOptions struct {
	// Thinking shows the model's reasoning, which is left out by default.
	Thinking bool
	// Location is the time zone of the times shown (nil: UTC).
	Location *time.Location
	// Format reads the session's lines (nil: OMP).
	Format Format
	// Heading is the first line, naming the session; when empty, it is
	// read from an omp or pi header, if the file starts with one.
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

// Render writes a readable transcript of a session file: a line naming the
// session, then each entry as its time, its role and its text; a tool call
// and a tool result take one line each, reasoning none unless asked.
func Render(w io.Writer, data []byte, opts RenderOptions) error {
	loc := opts.Location
	if loc == nil {
		loc = time.UTC
	}
	bw := bufio.NewWriter(w)
	if opts.Heading != "" {
		fmt.Fprintln(bw, opts.Heading)
	} else if h, slot, err := session.ReadHeader(data); err == nil {
		title := slot.Title
		if title == "" {
			title = h.Title
		}
		fmt.Fprintln(bw, Heading(h.ID, title, h.Cwd))
	}
	Entries(data, opts.Format, func(e Entry) bool {
		at := "-"
		if !e.Time.IsZero() {
			at = e.Time.In(loc).Format(time.DateTime)
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
		return true
	})
	return bw.Flush()
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
