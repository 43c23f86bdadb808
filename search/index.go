// Package search finds text in the sessions of a backup: it turns a
// session's bytes into records (one per line of text: entry id, role, time,
// kind, the line), matches a pattern against them, and keeps them in a
// local cache so that a second search of an unchanged remote reads nothing
// from it, and a session that grew reads only its new bytes.
package search

import (
	"bytes"
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
		return true
	})
	return out
}

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
