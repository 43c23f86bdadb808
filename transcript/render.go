package transcript

import (
	"bufio"
	"bytes"
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
	// EntryIDs puts each entry's id in brackets after its time, on its
	// first line (ompsync mcp: a reader can go to an entry search named).
	EntryIDs bool
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
	return RenderFrom(w, bytes.NewReader(data), opts)
}

// maxLine bounds the one line RenderFrom holds at a time: a longer entry
// is named in a line of its own instead of shown.
const maxLine = 64 << 20

// headerBytes is how much of a file's start RenderFrom reads its header
// from, as ReadHeader needs it.
const headerBytes = 64 << 10

// RenderFrom is Render reading the file from r a line at a time, so that
// memory stays the longest line (at most maxLine), whatever the file's
// size.
func RenderFrom(w io.Writer, r io.Reader, opts RenderOptions) error {
	loc := opts.Location
	if loc == nil {
		loc = time.UTC
	}
	format := opts.Format
	if format == nil {
		format = OMP()
	}
	br := bufio.NewReaderSize(r, headerBytes)
	bw := bufio.NewWriter(w)
	if opts.Heading != "" {
		fmt.Fprintln(bw, opts.Heading)
	} else if start, _ := br.Peek(headerBytes); len(start) > 0 {
		if h, slot, err := session.ReadHeader(start); err == nil {
			title := slot.Title
			if title == "" {
				title = h.Title
			}
			fmt.Fprintln(bw, Heading(h.ID, title, h.Cwd))
		}
	}
	var line []byte
	for n := 1; ; n++ {
		var long int64
		var err error
		line, long, err = readLine(br, line[:0])
		if err != nil && err != io.EOF {
			return err
		}
		if long > 0 {
			fmt.Fprintf(bw, "-  (line %d: %d MiB, more than the %d MiB a transcript shows of one line; left out)\n", n, long>>20, maxLine>>20)
		} else if len(line) > 0 || err == nil { // every line Entries reads
			if e, ok := format.Text(line, n); ok {
				writeEntry(bw, e, loc, opts.Thinking, opts.EntryIDs)
			}
		}
		if err == io.EOF {
			break
		}
	}
	return bw.Flush()
}

// readLine reads one line, without its newline, onto buf; a line longer
// than maxLine is read past and its length returned as long instead.
func readLine(br *bufio.Reader, buf []byte) (line []byte, long int64, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if long == 0 && len(buf)+len(frag) > maxLine+1 {
			long, buf = int64(len(buf)), buf[:0]
		}
		if long > 0 {
			long += int64(len(frag))
		} else {
			buf = append(buf, frag...)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == nil:
			if long > 0 {
				return buf, long - 1, nil
			}
			return buf[:len(buf)-1], 0, nil
		default:
			return buf, long, err
		}
	}
}

// writeEntry writes one entry's parts, a line each (a text's further lines
// indented under it).
func writeEntry(bw *bufio.Writer, e Entry, loc *time.Location, thinking, ids bool) {
	at := "-"
	if !e.Time.IsZero() {
		at = e.Time.In(loc).Format(time.DateTime)
	}
	if ids && e.ID != "" {
		at += "  [" + e.ID + "]"
	}
	for _, p := range e.Parts {
		var head, body string
		switch p.Kind {
		case Thinking:
			if !thinking {
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
