package repo

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
)

// Mark says that bytes up to End of a generation were on the remote at
// At (Unix milliseconds, the writing machine's clock). A chunk's header
// carries the marks of the uploads its bytes came in, so a reader can tell
// what the backup held at any moment: the agent writes one mark per chunk,
// a compaction keeps the marks of the chunks it merges (docs/FORMAT.md,
// "upload marks"). Encoded as [end, unix_ms].
type Mark struct {
	End int64
	At  int64
}

// MarshalJSON writes [end, unix_ms].
func (m Mark) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, "[%d,%d]", m.End, m.At), nil
}

// UnmarshalJSON reads [end, unix_ms].
func (m *Mark) UnmarshalJSON(b []byte) error {
	var a [2]int64
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	m.End, m.At = a[0], a[1]
	return nil
}

// Time is At as a time.
func (m Mark) Time() time.Time { return time.UnixMilli(m.At).UTC() }

// MaxMarks is the most marks a writer puts in one chunk header: with the
// longest offsets, times, hashes and reference a header stays well under
// the 1024 bytes every reader accepts (maxHeader).
const MaxMarks = 16

// UploadMark is the mark of bytes up to end uploaded at t.
func UploadMark(end int64, t time.Time) []Mark { return []Mark{{End: end, At: t.UnixMilli()}} }

// ThinMarks returns ms with at most n marks. Each mark dropped hands its
// bytes to the next mark, which keeps the later of the two times: a thinned
// list may say bytes arrived later than they did, never earlier. The marks
// dropped are those whose time is closest to the next one's, so the long
// pauses between bursts of work stay visible.
func ThinMarks(ms []Mark, n int) []Mark {
	ms = append([]Mark(nil), ms...)
	for len(ms) > max(n, 1) {
		best := 0
		for i := 1; i < len(ms)-1; i++ {
			if ms[i+1].At-ms[i].At < ms[best+1].At-ms[best].At {
				best = i
			}
		}
		ms[best+1].At = max(ms[best+1].At, ms[best].At)
		ms = append(ms[:best], ms[best+1:]...)
	}
	return ms
}

// validMarks reports whether ms can belong to chunk [start, end): ends
// rising within it, the last at its end, and times that are times.
func validMarks(ms []Mark, start, end int64) bool {
	prev := start
	for _, m := range ms {
		if m.End <= prev || m.End > end || m.At <= 0 {
			return false
		}
		prev = m.End
	}
	return len(ms) == 0 || prev == end
}

// ChunkMarks are the marks of the bytes a chunk adds past held: its own,
// or, for a chunk written without them, one mark at its end at modTime
// (the listing's: when the object was written, which for a chunk a
// compaction made is later than its bytes arrived).
func ChunkMarks(h ChunkHeader, c ChunkRef, held int64) []Mark {
	if len(h.Uploaded) > 0 {
		return slices.DeleteFunc(slices.Clone(h.Uploaded), func(m Mark) bool { return m.End <= held })
	}
	at := int64(math.MaxInt64) // unknown: never "by then"
	if !c.ModTime.IsZero() {
		at = c.ModTime.UnixMilli()
	}
	return []Mark{{End: c.End, At: at}}
}
