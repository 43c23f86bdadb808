package project

import (
	"bytes"
	"cmp"
	"io"
	"strings"
)

// Mapping moves a session between two working folders: every "cwd" value
// a session line records that is From, or a folder below it, becomes the
// same under To. Only the JSON key "cwd" is touched (omp's and pi's
// header, each Claude Code line, Codex's session meta and turn contexts):
// tool arguments and conversation text keep the paths they quote.
//
// The rewrite is its own inverse: To->From gives back the bytes From->To
// was given, so the copies of one session on two machines, each in its own
// machine's form, compare and merge line by line as one. A mapping between
// a Windows and a POSIX folder (C:\Users\ana\app to /home/ana/app) moves
// the folder itself and leaves its subfolders as recorded: the separators
// of the rest of a value are not converted, so that the rewrite stays
// exact both ways.
type Mapping struct {
	From, To string
}

// Identity reports whether m changes nothing.
func (m Mapping) Identity() bool { return m.From == m.To || m.From == "" || m.To == "" }

const cwdKey = `"cwd":"`

// windowsStyle reports whether p is a Windows path (C:\..., \\server\...).
func windowsStyle(p string) bool {
	return len(p) >= 2 && p[1] == ':' || strings.HasPrefix(p, `\\`) || strings.Contains(p, `\`) && !strings.Contains(p, "/")
}

// jsonString is s as it appears between the quotes of a JSON string, as
// JSON.stringify and encoding/json write a path (no HTML escaping).
func jsonString(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			const hex = "0123456789abcdef"
			b.WriteString(`\u00`)
			b.WriteByte(hex[r>>4])
			b.WriteByte(hex[r&0xf])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Writer rewrites what is written through it by m and passes it on to w,
// in constant memory whatever the length of a line: only a fixed tail (a
// needle's length and the bytes that decide it) waits for the next write
// (or Close).
func (m Mapping) Writer(w io.Writer) *Rewriter {
	// A root folder keeps its separator.
	from, to := cmp.Or(strings.TrimRight(m.From, `/\`), m.From), cmp.Or(strings.TrimRight(m.To, `/\`), m.To)
	r := &Rewriter{w: w, needle: []byte(cwdKey + jsonString(from)), repl: []byte(cwdKey + jsonString(to))}
	if w := windowsStyle(from); w == windowsStyle(to) {
		r.sep = []byte("/")
		if w {
			r.sep = []byte(`\\`)
		}
	}
	return r
}

// Rewriter is Mapping.Writer's writer.
type Rewriter struct {
	w            io.Writer
	needle, repl []byte
	sep          []byte // the separator that continues a folder below From; nil: the folder alone
	pend         []byte
	// Written counts the bytes passed on to w.
	Written int64
	// Changed counts the values rewritten.
	Changed int
}

// boundary reports whether b, what follows the needle, ends the folder
// (the closing quote) or goes below it (a separator).
func (r *Rewriter) boundary(b []byte) bool {
	return len(b) > 0 && (b[0] == '"' || r.sep != nil && bytes.HasPrefix(b, r.sep))
}

func (r *Rewriter) Write(p []byte) (int, error) {
	data := p
	if len(r.pend) > 0 {
		data = append(r.pend, p...)
		r.pend = nil
	}
	if err := r.scan(data, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// scan passes data on, rewritten. Unless final, it keeps back the bytes
// a needle may start in and the bytes to come decide.
func (r *Rewriter) scan(data []byte, final bool) error {
	safe := len(data) // a needle found before it is decided now
	if !final {
		safe -= len(r.needle) + max(len(r.sep), 1) - 1
	}
	done := 0
	for at := 0; ; {
		i := bytes.Index(data[at:], r.needle)
		if i < 0 || at+i >= safe {
			break
		}
		i += at
		at = i + 1
		if !r.boundary(data[i+len(r.needle):]) {
			continue // a folder name's start, not the folder
		}
		if err := r.emit(data[done:i]); err != nil {
			return err
		}
		if err := r.emit(r.repl); err != nil {
			return err
		}
		r.Changed++
		done = i + len(r.needle)
		at = done
	}
	keep := max(done, safe)
	if err := r.emit(data[done:keep]); err != nil {
		return err
	}
	r.pend = append(r.pend[:0], data[keep:]...)
	return nil
}

func (r *Rewriter) emit(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	n, err := r.w.Write(b)
	r.Written += int64(n)
	return err
}

// Close passes on what was kept back.
func (r *Rewriter) Close() error {
	data := r.pend
	r.pend = nil
	return r.scan(data, true)
}
