package transcript

import (
	"bytes"
	"cmp"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A session line is read in one pass by a small JSON scanner that decodes
// only the members a transcript needs and steps over the rest (tool
// results of megabytes, usage figures): encoding/json scans every byte
// twice, then again for each nested value kept raw, and indexing a backup
// for search was bound by it. parseJSON (the encoding/json reading) is
// kept as the reference the tests compare this one with.

// maxDepth bounds nesting: a hostile line cannot make the scanner recurse
// without end.
const maxDepth = 512

type scanner struct {
	b   []byte
	i   int
	bad bool
	// spaces counts the whitespace bytes stepped over between tokens: a
	// value read raw with none in it is already compact.
	spaces int
	// mistyped: a member read (strOr) had a type encoding/json refuses.
	mistyped bool
}

func (s *scanner) fail() { s.bad = true; s.i = len(s.b) }

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
			s.spaces++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// expect consumes c or fails.
func (s *scanner) expect(c byte) {
	if s.peek() != c {
		s.fail()
		return
	}
	s.i++
}

// str reads a string value; ok is false (and nothing consumed) when the
// value is not a string.
func (s *scanner) str() (string, bool) {
	if s.peek() != '"' {
		return "", false
	}
	start := s.i
	if s.strEnd(); s.bad {
		return "", false
	}
	return decode(s.b[start:s.i]), true
}

// strEnd steps over the string at s.i (its opening quote), checked as
// encoding/json checks it.
func (s *scanner) strEnd() {
	for s.i++; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return
		case c == '\\':
			if !s.validEscape() {
				s.fail()
			}
		case c < 0x20:
			s.fail()
		}
	}
	s.fail()
}

// decode is the value of the string raw (quotes and all), checked by
// strEnd, as encoding/json decodes it. The escapes JSON.stringify writes
// are undone here, in one pass; a string with \u escapes or bytes that are
// not UTF-8 (rare: control characters, a broken file) is left to
// encoding/json, which makes one rune of a surrogate pair and U+FFFD of
// what is not a character.
func decode(raw []byte) string {
	if out, ok := unescape(raw[1 : len(raw)-1]); ok && utf8.Valid(out) {
		return string(out)
	}
	var v string
	_ = json.Unmarshal(raw, &v) // checked by strEnd: cannot fail
	return v
}

// unescape undoes the one-letter escapes of b; false when it holds a \u.
func unescape(b []byte) ([]byte, bool) {
	i := bytes.IndexByte(b, '\\')
	if i < 0 {
		return b, true
	}
	out := make([]byte, 0, len(b))
	for ; i >= 0; i = bytes.IndexByte(b, '\\') {
		e := b[i+1]
		if e == 'u' {
			return nil, false
		}
		if j := strings.IndexByte("bfnrt", e); j >= 0 {
			e = "\b\f\n\r\t"[j]
		}
		out = append(append(out, b[:i]...), e) // '"', '\\', '/' stand for themselves
		b = b[i+2:]
	}
	return append(out, b...), true
}

// skip steps over one value of any kind.
func (s *scanner) skip(depth int) {
	if depth > maxDepth {
		s.fail()
		return
	}
	switch s.peek() {
	case '"':
		s.strEnd()
	case '{':
		s.object(depth, func([]byte) { s.skip(depth + 1) })
	case '[':
		s.list('[', ']', func() { s.skip(depth + 1) })
	case 't':
		s.word("true")
	case 'f':
		s.word("false")
	case 'n':
		s.word("null")
	default:
		s.number()
	}
}

// validEscape steps over the escape at s.i but its last byte, reporting
// whether it is one JSON has.
func (s *scanner) validEscape() bool {
	if s.i+1 >= len(s.b) {
		return false
	}
	if s.b[s.i+1] != 'u' {
		s.i++
		return strings.IndexByte(`"\\/bfnrt`, s.b[s.i]) >= 0
	}
	if s.i+6 > len(s.b) {
		return false
	}
	_, err := strconv.ParseUint(string(s.b[s.i+2:s.i+6]), 16, 16)
	s.i += 5
	return err == nil
}

func (s *scanner) word(w string) {
	if !bytes.HasPrefix(s.b[s.i:], []byte(w)) {
		s.fail()
		return
	}
	s.i += len(w)
}

// number steps over the characters a JSON number holds, checked as one.
func (s *scanner) number() {
	start := s.i
	for s.i < len(s.b) && strings.IndexByte("0123456789-+.eE", s.b[s.i]) >= 0 {
		s.i++
	}
	if !json.Valid(s.b[start:s.i]) {
		s.fail()
	}
}

// rawValue returns the raw bytes of the next value, stepped over, and
// whether they hold no whitespace between its tokens (so that they need
// not be compacted).
func (s *scanner) rawValue(depth int) ([]byte, bool) {
	s.ws()
	start, spaces := s.i, s.spaces
	s.skip(depth)
	if s.bad {
		return nil, false
	}
	return s.b[start:s.i], s.spaces == spaces
}

// object reads an object, calling member with each key (member must
// consume the value), and reports true. In its place null is nothing
// (false), and any other kind is stepped over and marks the value
// mistyped, as encoding/json refuses it for a struct.
func (s *scanner) object(depth int, member func(key []byte)) bool {
	switch s.peek() {
	case '{':
	case 'n':
		s.word("null")
		return false
	default:
		s.skip(depth)
		s.mistyped = true
		return false
	}
	s.list('{', '}', func() {
		if s.peek() != '"' {
			s.fail()
			return
		}
		key := s.key()
		s.expect(':')
		if !s.bad {
			member(key)
		}
	})
	return true
}

// key reads an object key. Keys are short and plain; one with escapes is
// decoded.
func (s *scanner) key() []byte {
	start := s.i
	if s.strEnd(); s.bad {
		return nil
	}
	if k := s.b[start+1 : s.i-1]; bytes.IndexByte(k, '\\') < 0 {
		return k
	}
	return []byte(decode(s.b[start:s.i]))
}

// list reads the values between open and close, separated by commas, each
// with elem: an object's members or an array's elements.
func (s *scanner) list(open, close byte, elem func()) {
	s.expect(open)
	if s.peek() == close {
		s.i++
		return
	}
	for !s.bad {
		elem()
		switch s.peek() {
		case ',':
			s.i++
		case close:
			s.i++
			return
		default:
			s.fail()
		}
	}
}

// strOr reads a string member's value into dst; any other kind is stepped
// over, leaves dst as it was and marks the value mistyped, as encoding/json
// leaves a string field it cannot fill (the line is then refused there: see
// parseJSON).
func (s *scanner) strOr(dst *string, depth int) {
	v, ok := s.str()
	switch {
	case ok:
		*dst = v
	case s.bad:
	case s.peek() == 'n': // null leaves a field as it was
		s.word("null")
	default:
		s.skip(depth)
		s.mistyped = true
	}
}

// scanEntry is Parse's reading of a line into the same fields parseJSON
// fills. ok is false where encoding/json refuses the line.
func scanEntry(line []byte) (rawEntry, bool) {
	s := &scanner{b: line}
	var r rawEntry
	s.object(0, func(key []byte) {
		switch string(key) {
		case "type":
			s.strOr(&r.Type, 1)
		case "id":
			s.strOr(&r.ID, 1)
		case "summary":
			s.strOr(&r.Summary, 1)
		case "timestamp":
			r.Timestamp, _ = s.rawValue(1)
		case "content":
			r.Content, _ = s.rawValue(1)
		case "message":
			// A second message member fills the first, as encoding/json
			// fills a pointer; null clears it.
			m := cmp.Or(r.Message, &rawMessage{})
			r.Message = m
			if !s.object(1, func(key []byte) {
				switch string(key) {
				case "role":
					s.strOr(&m.Role, 1)
				case "toolName":
					s.strOr(&m.ToolName, 1)
				case "command":
					s.strOr(&m.Command, 1)
				case "output":
					s.strOr(&m.Output, 1)
				case "content":
					m.Content, _ = s.rawValue(2)
				case "timestamp":
					m.Timestamp, _ = s.rawValue(2)
				default:
					s.skip(2)
				}
			}) {
				r.Message = nil
			}
		default:
			s.skip(1)
		}
	})
	s.ws()
	return r, !s.mistyped && !s.bad && s.i == len(s.b)
}

// scanContent is content's reading of a content value with the scanner.
func scanContent(raw []byte, kind, tool string) []Part {
	s := &scanner{b: raw}
	if v, ok := s.str(); ok {
		if v == "" {
			return nil
		}
		return []Part{{Kind: kind, Name: tool, Text: v}}
	}
	if s.peek() != '[' {
		return nil
	}
	var out []Part
	s.list('[', ']', func() {
		var b rawBlock
		var compact bool
		s.object(1, func(key []byte) {
			switch string(key) {
			case "type":
				s.strOr(&b.Type, 2)
			case "text":
				s.strOr(&b.Text, 2)
			case "thinking":
				s.strOr(&b.Thinking, 2)
			case "name":
				s.strOr(&b.Name, 2)
			case "arguments":
				b.Arguments, compact = s.rawValue(2)
			default:
				s.skip(2)
			}
		})
		out = appendBlock(out, b, kind, tool, compact)
	})
	if s.ws(); s.bad || s.mistyped || s.i != len(s.b) {
		return nil
	}
	return out
}
