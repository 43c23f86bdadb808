package search

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// Pattern is what to look for.
type Pattern struct {
	Text string
	// IgnoreCase matches without regard to case; Regexp takes Text as a Go
	// regular expression (RE2 syntax) instead of a fixed string.
	IgnoreCase, Regexp bool
}

// Matcher finds a pattern in records.
type Matcher struct {
	lit  []byte         // a fixed string (lower-cased when fold)
	fold bool           // lit is matched against ASCII-lowered text
	re   *regexp.Regexp // otherwise
	// whole: re may search a whole buffer of records at once, each hit
	// checked against its record's text; a pattern anchored at the start
	// of the text cannot, and is matched record by record.
	whole bool
}

// Compile checks p and prepares it.
func Compile(p Pattern) (*Matcher, error) {
	if p.Text == "" {
		return nil, errors.New("empty pattern")
	}
	if strings.ContainsAny(p.Text, "\n") {
		return nil, errors.New("the pattern holds a newline; a match is within one line")
	}
	if !p.Regexp && (!p.IgnoreCase || isASCII(p.Text)) {
		m := &Matcher{lit: []byte(p.Text), fold: p.IgnoreCase}
		if m.fold {
			m.lit = lowerASCII(nil, m.lit)
		}
		return m, nil
	}
	expr := p.Text
	if !p.Regexp {
		expr = regexp.QuoteMeta(expr)
	}
	flags := "(?m)"
	if p.IgnoreCase {
		flags = "(?mi)"
	}
	re, err := regexp.Compile(flags + expr)
	if err != nil {
		return nil, fmt.Errorf("pattern: %w", err)
	}
	tree, err := syntax.Parse(flags+expr, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("pattern: %w", err)
	}
	return &Matcher{re: re, whole: !anchored(tree)}, nil
}

// anchored reports whether re uses ^ or \A, which in a buffer of records
// match at a record's start, not its text's.
func anchored(re *syntax.Regexp) bool {
	if re.Op == syntax.OpBeginLine || re.Op == syntax.OpBeginText {
		return true
	}
	for _, s := range re.Sub {
		if anchored(s) {
			return true
		}
	}
	return false
}

// Scan calls f for every record of recs (records as an Indexer writes them)
// whose text matches and whose time is not before since (Unix ms; 0 takes
// every record). scratch is reused between calls.
func (m *Matcher) Scan(recs []byte, since int64, scratch *[]byte, f func(Record)) {
	hay := recs
	if m.fold {
		*scratch = lowerASCII((*scratch)[:0], recs)
		hay = *scratch
	}
	emit := func(lineStart, lineEnd int) {
		r, ok := parseRecord(recs[lineStart:lineEnd])
		if ok && (since == 0 || r.Ms >= since) {
			f(r)
		}
	}
	for at := 0; at < len(hay); {
		hit := m.next(hay, at)
		if hit < 0 {
			return
		}
		start := bytes.LastIndexByte(hay[:hit], '\n') + 1
		end := lineEnd(hay, hit)
		// The hit may lie in the record's other fields, or (a regular
		// expression) begin here and end on a later line: the text alone
		// decides.
		if ts := textStart(hay[start:end]); ts >= 0 {
			text := hay[start+ts : end]
			var ok bool
			if m.re != nil {
				ok = m.re.Match(text)
			} else {
				ok = hit >= start+ts || bytes.Contains(text, m.lit)
			}
			if ok {
				emit(start, end)
			}
		}
		at = end + 1
	}
}

// next is where the first hit in hay from at on begins, -1 when none
// does: for a pattern matched record by record (!whole), the record at at.
func (m *Matcher) next(hay []byte, at int) int {
	var i int
	switch {
	case m.re == nil:
		i = bytes.Index(hay[at:], m.lit)
	case !m.whole:
		return at
	default:
		i = -1
		if loc := m.re.FindIndex(hay[at:]); loc != nil {
			i = loc[0]
		}
	}
	if i < 0 {
		return -1
	}
	return at + i
}

// scanBuffer is how much of a file of records ScanFrom reads at a time.
const scanBuffer = 1 << 20

// maxRecord bounds one record ScanFrom holds: the longest line an Indexer
// keeps, and its entry id, role and time.
const maxRecord = MaxLine + 1<<20

// Buffers are what ScanFrom reuses between calls.
type Buffers struct {
	buf, scratch []byte
}

// ScanFrom is Scan of the records r holds, read a buffer at a time: memory
// stays the buffer (or the longest record), whatever the records' size.
func (m *Matcher) ScanFrom(r io.Reader, since int64, bufs *Buffers, f func(Record)) error {
	if cap(bufs.buf) < scanBuffer {
		bufs.buf = make([]byte, 0, scanBuffer)
	}
	buf := bufs.buf[:0]
	defer func() {
		if cap(buf) > scanBuffer {
			buf = nil // a long record's buffer is not kept
		}
		bufs.buf = buf[:0]
	}()
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= maxRecord {
				return fmt.Errorf("search: a record longer than %d MiB", maxRecord>>20)
			}
			buf = slices.Grow(buf, len(buf))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			m.Scan(buf, since, &bufs.scratch, f)
			return nil
		}
		if err != nil {
			return err
		}
		// Whole records only: a match is within one.
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			m.Scan(buf[:i+1], since, &bufs.scratch, f)
			buf = buf[:copy(buf, buf[i+1:])]
		}
	}
}

func lineEnd(b []byte, from int) int {
	if i := bytes.IndexByte(b[from:], '\n'); i >= 0 {
		return from + i
	}
	return len(b)
}

// lowerASCII appends b with A-Z lowered to dst: the same length, so offsets
// in it are offsets in b.
func lowerASCII(dst, b []byte) []byte {
	dst = append(dst, b...)
	for i, c := range dst[len(dst)-len(b):] {
		if c-'A' < 26 {
			dst[len(dst)-len(b)+i] = c + 'a' - 'A'
		}
	}
	return dst
}

func isASCII(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r >= utf8.RuneSelf })
}

// Index is where text's first match begins (0 when none does).
func (m *Matcher) Index(text string) int {
	b := []byte(text)
	if m.fold {
		b = lowerASCII(nil, b)
	}
	if m.re == nil {
		return max(bytes.Index(b, m.lit), 0)
	}
	if loc := m.re.FindIndex(b); loc != nil {
		return loc[0]
	}
	return 0
}

// excerptWidth bounds an Excerpt, in runes: grep's line and the MCP
// search's snippet alike.
const excerptWidth = 200

// Excerpt is text, tabs as spaces, or when longer than excerptWidth runes
// the part around its first match: a minified file a tool read is one line.
func (m *Matcher) Excerpt(text string) string {
	const width = excerptWidth
	text = strings.ReplaceAll(text, "\t", " ")
	if utf8.RuneCountInString(text) <= width {
		return text
	}
	at := max(0, m.Index(text))
	from := max(0, at-width/4)
	for from > 0 && !utf8.RuneStart(text[from]) {
		from--
	}
	to := min(len(text), from+width)
	for to < len(text) && !utf8.RuneStart(text[to]) {
		to++
	}
	out := text[from:to]
	if from > 0 {
		out = "..." + out
	}
	if to < len(text) {
		out += "..."
	}
	return out
}
