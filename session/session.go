// Package session holds what ompsync knows of session files as JSON Lines:
// settled lines, entries and the merge of copies by entry id, and the line
// format of the omp family (omp's fixed-size title slot, the header line).
// Where each agent keeps its files is package store's. It never changes
// bytes: everything it reads is carried through untouched.
package session

import (
	"bytes"
	"encoding/json"
	"errors"
)

// TitleSlotSize is the size of omp's title slot, newline included. omp
// rewrites these bytes in place when a session is renamed.
const TitleSlotSize = 256

// TitleSlot is the decoded first line of a current omp session file.
type TitleSlot struct {
	Title     string `json:"title"`
	UpdatedAt string `json:"updatedAt"`
}

// ParseTitleSlot reports whether b starts with an omp title slot and decodes it.
func ParseTitleSlot(b []byte) (TitleSlot, bool) {
	if len(b) < TitleSlotSize || b[TitleSlotSize-1] != '\n' {
		return TitleSlot{}, false
	}
	line := b[:TitleSlotSize-1]
	if !bytes.HasPrefix(line, []byte(`{"type":"title"`)) {
		return TitleSlot{}, false
	}
	var s struct {
		Type string `json:"type"`
		TitleSlot
	}
	if err := json.Unmarshal(line, &s); err != nil || s.Type != "title" {
		return TitleSlot{}, false
	}
	return s.TitleSlot, true
}

// SlotLen is TitleSlotSize when b starts with a title slot, else 0.
func SlotLen(b []byte) int {
	if _, ok := ParseTitleSlot(b); ok {
		return TitleSlotSize
	}
	return 0
}

// Header is the session line: the first line, or the second after a title slot.
type Header struct {
	Type          string `json:"type"`
	Version       int    `json:"version,omitempty"`
	ID            string `json:"id"`
	Timestamp     string `json:"timestamp"`
	Cwd           string `json:"cwd"`
	Title         string `json:"title,omitempty"`
	ParentSession string `json:"parentSession,omitempty"`
}

// ErrNoHeader means the bytes do not (yet) start with a complete session header.
var ErrNoHeader = errors.New("no session header")

// ReadHeader decodes the header from the start of a file (the first few KB
// are enough). It returns the title slot too when there is one.
func ReadHeader(b []byte) (Header, TitleSlot, error) {
	slot, hasSlot := ParseTitleSlot(b)
	if hasSlot {
		b = b[TitleSlotSize:]
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return Header{}, slot, ErrNoHeader
	}
	var h Header
	if err := json.Unmarshal(b[:nl], &h); err != nil || h.Type != "session" {
		return Header{}, slot, ErrNoHeader
	}
	return h, slot, nil
}

// Entry is the part of an entry line that ompsync reads: enough to order a
// merge. Everything else stays in the raw line.
type Entry struct {
	Type      string  `json:"type"`
	ID        string  `json:"id"`
	ParentID  *string `json:"parentId"`
	Timestamp string  `json:"timestamp"`
}

// ParseEntry decodes the id fields of one line (without its newline).
// Malformed lines return ok false; callers keep them as opaque bytes.
func ParseEntry(line []byte) (Entry, bool) {
	var e Entry
	if err := json.Unmarshal(line, &e); err != nil {
		return Entry{}, false
	}
	return e, true
}

// SettledLen returns the length of the prefix of b that ends with a newline:
// omp appends whole lines, so bytes after the last newline may still be
// half written.
func SettledLen(b []byte) int {
	return bytes.LastIndexByte(b, '\n') + 1
}
