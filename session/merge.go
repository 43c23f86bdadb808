package session

import (
	"bytes"
	"time"
)

// Format says how one agent's lines are read for a merge. A merge
// (Format.NewIndex, then Index.WriteTo) combines copies of one session file
// that went on in different places into one file that holds the work of all
// of them:
//
//   - Every line of every copy is kept byte for byte and none twice. An entry
//     is known by its id and timestamp (omp's 8-hex ids alone collide once
//     two long branches are merged); a line that is not an entry is known by
//     its bytes. A copy that holds a line n times keeps it n times.
//   - When copies hold different bytes for the same entry (a rewrite that
//     pruned tool output), the first copy's bytes win: pass the local file
//     first and none of its lines is lost.
//   - The title slot is the newest one (by updatedAt). The header is an
//     entry like the others (a move rewrites its cwd, not its id or time):
//     the first copy's comes first.
//   - Every entry comes after its parent. Each copy's new lines stay
//     together, in that copy's order, and copies whose newest line is newer
//     come later, so the last line, which omp takes as the leaf, is the
//     newest work. Timestamps only order; a skewed clock never drops a line.
//
// A last line without a newline (omp was cut off mid-write) is kept and ends
// with one. A merge never fails on content; it refuses only no copies.
type Format struct {
	// Slot: files may start with omp's title slot.
	Slot bool
	// Entry reads a line's entry id, the id of the entry it follows, its
	// time and type; ok is false for a line that is not one (it is then
	// known by its bytes).
	Entry func(line []byte) (e Entry, ok bool)
}

// OMPFormat is the omp family's format: a title slot, entries by id and
// parentId.
func OMPFormat() Format { return Format{Slot: true, Entry: ParseEntry} }

// ParseTime reads an entry's RFC 3339 timestamp, the zero time when it has
// none (or another text): how a merge orders lines and agents' transcripts
// date them.
func ParseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// NewestSlot returns the title slot with the newest updatedAt among the
// copies (nil when none has one). Equal times are broken by the slot's
// bytes, so every machine picks the same slot whatever order it sees the
// copies in, and machines converge instead of each keeping its own.
func NewestSlot(copies [][]byte) []byte {
	var best []byte
	var at time.Time
	for _, c := range copies {
		s, ok := ParseTitleSlot(c)
		if !ok {
			continue
		}
		slot, t := c[:TitleSlotSize], ParseTime(s.UpdatedAt)
		if best == nil || t.After(at) || (t.Equal(at) && bytes.Compare(slot, best) > 0) {
			best, at = slot, t
		}
	}
	return best
}
