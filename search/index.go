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
			text = p.CallLine()
		}
		// Line by line without splitting into a slice: the text of a
		// tool result can be megabytes.
		for l := range strings.SplitSeq(text, "\n") {
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
const MaxLine = transcript.MaxLine

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

// Indexer turns a session's bytes, written to it in pieces of any size,
// into records: one a line of text (entry, role, kind and time,
// tab-separated, then a tab and the text, which may hold tabs), written to
// w. Memory stays the longest line (transcript.Lines) and a buffer of
// records, whatever the session's size.
type Indexer struct {
	lines transcript.Lines
	w     io.Writer
	out   []byte
	left  []LeftLine
	err   error
}

// NewIndexer indexes the session bytes from offset at on (for LeftOut's
// offsets) into w; format reads the lines (nil: omp's and pi's), maxLine
// bounds one (0: MaxLine).
func NewIndexer(w io.Writer, at int64, format transcript.Format, maxLine int) *Indexer {
	x := &Indexer{w: w}
	x.lines = transcript.Lines{Format: format, Max: maxLine, At: at,
		Entry: func(e transcript.Entry) { x.out = appendEntry(x.out, e) },
		Long:  func(_ int, at, size int64) { x.left = append(x.left, LeftLine{At: at, Size: size}) }}
	return x
}

// Write indexes the whole lines p ends, keeping the rest of the last.
func (x *Indexer) Write(p []byte) (int, error) {
	if x.err != nil {
		return 0, x.err
	}
	x.lines.Write(p)
	if len(x.out) >= flushRecords {
		x.flush()
	}
	return len(p), x.err
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

// Close indexes the last line, if the bytes did not end with a newline,
// and writes what records are left.
func (x *Indexer) Close() error {
	x.lines.Close()
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
