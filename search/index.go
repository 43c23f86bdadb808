// Package search finds text in the sessions of a backup: it turns a
// session's bytes into records (one per line of text: entry id, role, time,
// kind, the line), matches a pattern against them, and keeps them in a
// local cache so that a second search of an unchanged remote reads nothing
// from it, and a session that grew reads only its new bytes.
package search

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ompsync/ompsync/transcript"
)

// Record is one line of text of a session, as search matches it.
type Record struct {
	Entry string // the entry's id ("" in legacy files)
	Role  string
	Kind  string // transcript.Text, Thinking, ToolCall, ToolResult, Summary
	// Ms is the entry's time in Unix milliseconds (0: none).
	Ms   int64
	Text string
}

// Time is the record's time (zero when the entry has none).
func (r Record) Time() time.Time {
	if r.Ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(r.Ms).UTC()
}

// Index appends the records of data, whole lines of a session file, to
// out. Each record is one line: entry, role, kind and time, tab-separated,
// then a tab and the text, which holds no newline (a part's lines become
// records of their own) but may hold tabs. format reads the lines (nil:
// omp's and pi's).
func Index(out, data []byte, format transcript.Format) []byte {
	transcript.Entries(data, format, func(e transcript.Entry) bool {
		out = appendEntry(out, e)
		return true
	})
	return out
}

// appendEntry appends the records of one entry.
func appendEntry(out []byte, e transcript.Entry) []byte {
	var ms int64
	if !e.Time.IsZero() {
		ms = e.Time.UnixMilli()
	}
	id, role := clean(e.ID), clean(e.Role)
	for _, p := range e.Parts {
		text := p.Text
		if p.Kind == transcript.ToolCall {
			text = p.Lines()[0]
		}
		// Line by line without splitting into a slice: the text of a
		// tool result can be megabytes.
		for len(text) > 0 {
			l := text
			if i := strings.IndexByte(text, '\n'); i >= 0 {
				l, text = text[:i], text[i+1:]
			} else {
				text = ""
			}
			l = strings.TrimRight(l, "\r")
			if strings.TrimSpace(l) == "" {
				continue
			}
			out = append(out, id...)
			out = append(out, '\t')
			out = append(out, role...)
			out = append(out, '\t')
			out = append(out, p.Kind...)
			out = append(out, '\t')
			out = strconv.AppendInt(out, ms, 10)
			out = append(out, '\t')
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}

// MaxLine bounds the one line of a session an Indexer holds at a time, as
// transcript.RenderFrom bounds what it shows of one: a longer line is left
// out of the records and named (Indexer.LeftOut), not searched.
const MaxLine = 64 << 20

// LeftLine is a line of a session left out of its records: longer than
// MaxLine.
type LeftLine struct {
	// At is the line's offset in the session file, Size its length
	// without its newline.
	At   int64 `json:"at"`
	Size int64 `json:"size"`
}

// flushRecords is how many bytes of records an Indexer gathers before it
// writes them.
const flushRecords = 256 << 10

// Indexer is Index for a session's bytes as they arrive: written to it in
// pieces of any size, they are cut into lines, each line indexed once it
// is whole and its records written to w. Memory stays the longest line
// (at most MaxLine) and a buffer of records, whatever the session's size.
type Indexer struct {
	w      io.Writer
	format transcript.Format
	max    int
	// line is the line begun and not yet ended; long, when not -1, the
	// length of one past max, read past instead of kept.
	line  []byte
	long  int64
	at    int64 // the session offset of the next byte written
	start int64 // where line begins
	n     int   // lines indexed
	out   []byte
	left  []LeftLine
	err   error
}

// NewIndexer indexes the session bytes from offset at on (for LeftOut's
// offsets) into w; format reads the lines (nil: omp's and pi's), maxLine
// bounds one (0: MaxLine).
func NewIndexer(w io.Writer, at int64, format transcript.Format, maxLine int) *Indexer {
	if format == nil {
		format = transcript.OMP()
	}
	if maxLine <= 0 {
		maxLine = MaxLine
	}
	return &Indexer{w: w, format: format, max: maxLine, long: -1, at: at, start: at}
}

// Write indexes the whole lines p ends, keeping the rest of the last.
func (x *Indexer) Write(p []byte) (int, error) {
	if x.err != nil {
		return 0, x.err
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			x.hold(p)
			x.at += int64(len(p))
			break
		}
		if len(x.line) == 0 && x.long < 0 && i <= x.max {
			x.index(p[:i]) // whole in p: not copied
		} else {
			x.hold(p[:i])
			x.end()
		}
		x.at += int64(i + 1)
		x.start = x.at
		p = p[i+1:]
	}
	if len(x.out) >= flushRecords {
		x.flush()
	}
	return n, x.err
}

// hold keeps part of the current line, or counts it past max.
func (x *Indexer) hold(p []byte) {
	if x.long < 0 && len(x.line)+len(p) > x.max {
		x.long, x.line = int64(len(x.line)), x.line[:0]
	}
	if x.long >= 0 {
		x.long += int64(len(p))
		return
	}
	x.line = append(x.line, p...)
}

// end indexes the held line, or names it when it was too long.
func (x *Indexer) end() {
	if x.long >= 0 {
		x.n++
		x.left = append(x.left, LeftLine{At: x.start, Size: x.long})
		x.long = -1
	} else {
		x.index(x.line)
	}
	if cap(x.line) > 1<<20 {
		x.line = nil // a long line's buffer is not kept for the short ones
	}
	x.line = x.line[:0]
}

func (x *Indexer) index(line []byte) {
	x.n++
	if e, ok := x.format.Text(line, x.n); ok {
		x.out = appendEntry(x.out, e)
	}
}

func (x *Indexer) flush() {
	if x.err == nil && len(x.out) > 0 {
		_, x.err = x.w.Write(x.out)
	}
	x.out = x.out[:0]
	if cap(x.out) > 4*flushRecords {
		x.out = nil // a long line's records are not kept for the rest
	}
}

// Close indexes the last line, if the bytes did not end with a newline
// (as Index does), and writes what records are left.
func (x *Indexer) Close() error {
	if len(x.line) > 0 || x.long >= 0 {
		x.end()
	}
	x.flush()
	return x.err
}

// LeftOut is the lines left out as longer than MaxLine.
func (x *Indexer) LeftOut() []LeftLine { return x.left }

// clean keeps a field free of the separators.
func clean(s string) string {
	if strings.ContainsAny(s, "\t\n") {
		return strings.NewReplacer("\t", " ", "\n", " ").Replace(s)
	}
	return s
}

// textStart is where the text of the record starting at line begins, or
// -1 when the line is not a record.
func textStart(line []byte) int {
	at := 0
	for range 4 {
		i := bytes.IndexByte(line[at:], '\t')
		if i < 0 {
			return -1
		}
		at += i + 1
	}
	return at
}

// parseRecord reads the record in line (without its newline).
func parseRecord(line []byte) (Record, bool) {
	f := bytes.SplitN(line, []byte{'\t'}, 5)
	if len(f) != 5 {
		return Record{}, false
	}
	ms, err := strconv.ParseInt(string(f[3]), 10, 64)
	if err != nil {
		return Record{}, false
	}
	return Record{Entry: string(f[0]), Role: string(f[1]), Kind: string(f[2]), Ms: ms, Text: string(f[4])}, true
}
