// Package bench measures ompsync against what users would otherwise run:
// `rclone copy` of the sessions folder and a whole-file re-uploader, on the
// same S3 server and the same session workload.
//
// The workload is built from real omp and pi session files: entry lines are
// sampled from them (with fresh ids and timestamps), so entry sizes and how
// well they compress are those of real sessions. On top come the few tool
// results of hundreds of KB real sessions have, and omp's title changes
// (the 256-byte slot rewritten in place plus a title_change line).
//
// cmd/ompsync-bench runs the phases and prints one table; run.sh runs
// everything from one command.
package bench

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ompsync/ompsync/session"
)

// Corpus is the pool of real entry lines the workload is drawn from.
type Corpus struct {
	// rest holds each entry line without its id, parentId and timestamp,
	// as the JSON members after the opening brace: `"k":v,...}`.
	rest [][]byte
	// text is the text content of the corpus, the source of large tool
	// results (logs and code compress as real ones do).
	text []byte
}

// LoadCorpus reads every *.jsonl file in dir. Title slots, session headers
// and lines that are not JSON objects are left out.
func LoadCorpus(dir string) (*Corpus, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	c := &Corpus{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read corpus: %w", err)
		}
		for line := range bytes.Lines(b) {
			c.add(bytes.TrimSuffix(line, []byte("\n")))
		}
	}
	if len(c.rest) == 0 {
		return nil, fmt.Errorf("corpus %s: no entry lines", dir)
	}
	if len(c.text) < 1<<20 {
		return nil, fmt.Errorf("corpus %s: %d bytes of text, want at least 1 MiB for large tool results", dir, len(c.text))
	}
	return c, nil
}

func (c *Corpus) add(line []byte) {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return
	}
	var typ string
	_ = json.Unmarshal(m["type"], &typ)
	if typ == "" || typ == "title" || typ == "session" {
		return
	}
	delete(m, "id")
	delete(m, "parentId")
	delete(m, "timestamp")
	b, err := json.Marshal(m) // sorted keys; RawMessage values kept as they were
	if err != nil {
		return
	}
	c.rest = append(c.rest, b[1:])
	collectText(line, &c.text)
}

// collectText appends the string values of a JSON document longer than 200
// bytes: message texts, tool outputs, code.
func collectText(line []byte, out *[]byte) {
	var v any
	if json.Unmarshal(line, &v) != nil {
		return
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if len(v) > 200 {
				*out = append(*out, v...)
				*out = append(*out, '\n')
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			// In key order: the text, and so every workload drawn from
			// it, is the same in every run of the harness.
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(v[k])
			}
		}
	}
	walk(v)
}

// Lines is how many entry lines the corpus holds.
func (c *Corpus) Lines() int { return len(c.rest) }

// Gen draws session content. It is deterministic for a seed and not safe
// for concurrent use.
type Gen struct {
	c   *Corpus
	rng *rand.Rand
	// BigProb is the chance that an entry is a large tool result, sized
	// uniformly in [BigMin, BigMax) bytes.
	BigProb        float64
	BigMin, BigMax int
	// MaxLine, when > 0, skips corpus lines longer than it (small sessions).
	MaxLine int
}

// NewGen returns a generator with omp-like defaults: one entry in 200 is a
// tool result of 100-500 KB.
func NewGen(c *Corpus, seed uint64) *Gen {
	return &Gen{c: c, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), BigProb: 0.005, BigMin: 100 << 10, BigMax: 500 << 10}
}

// Rand is the generator's random source, for callers that draw schedules.
func (g *Gen) Rand() *rand.Rand { return g.rng }

func (g *Gen) hex(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.rng.Uint32())
	}
	return hex.EncodeToString(b)
}

// uuid7 returns a UUIDv7-shaped id for t, as current omp names sessions.
func (g *Gen) uuid7(t time.Time) string {
	ms := uint64(t.UnixMilli())
	r := g.hex(10)
	return fmt.Sprintf("%08x-%04x-7%s-%x%s-%s", ms>>16, ms&0xffff, r[:3], 8+g.rng.IntN(4), r[3:6], r[6:18])
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// entry returns one entry line (with its newline) following parent.
func (g *Gen) entry(id, parent string, t time.Time) []byte {
	var b bytes.Buffer
	b.WriteString(`{"id":"` + id + `","parentId":`)
	if parent == "" {
		b.WriteString("null")
	} else {
		b.WriteString(`"` + parent + `"`)
	}
	b.WriteString(`,"timestamp":"` + stamp(t) + `",`)
	if g.BigProb > 0 && g.rng.Float64() < g.BigProb {
		g.bigResult(&b, t)
	} else {
		for {
			r := g.c.rest[g.rng.IntN(len(g.c.rest))]
			if g.MaxLine <= 0 || len(r) <= g.MaxLine {
				b.Write(r)
				break
			}
		}
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// bigResult writes the members of a large tool result: a slice of the
// corpus text, as a bash tool's output would be.
func (g *Gen) bigResult(b *bytes.Buffer, t time.Time) {
	n := g.BigMin + g.rng.IntN(max(1, g.BigMax-g.BigMin))
	var text []byte
	for len(text) < n {
		off := g.rng.IntN(len(g.c.text))
		text = append(text, g.c.text[off:min(len(g.c.text), off+n-len(text))]...)
	}
	msg := map[string]any{
		"role": "toolResult", "toolCallId": "toolu_" + g.hex(12), "toolName": "bash",
		"content": []any{map[string]any{"type": "text", "text": string(text)}},
		"isError": false, "timestamp": t.UnixMilli(),
	}
	mb, _ := json.Marshal(msg)
	b.WriteString(`"message":`)
	b.Write(mb)
	b.WriteString(`,"type":"message"}`)
}

// TitleSlot renders omp's 256-byte title slot (newline included).
func TitleSlot(title string, t time.Time) ([]byte, error) {
	tb, _ := json.Marshal(title)
	line := `{"type":"title","v":1,"title":` + string(tb) + `,"updatedAt":"` + stamp(t) + `","pad":"`
	pad := session.TitleSlotSize - len(line) - len(`"}`) - 1
	if pad < 0 {
		return nil, fmt.Errorf("title %q does not fit the title slot", title)
	}
	return []byte(line + strings.Repeat(" ", pad) + "\"}\n"), nil
}

// Session is one generated session file that the workload appends to.
type Session struct {
	ID  string
	Rel string // sessions/<cwd-dir>/<timestamp>_<id>.jsonl
	Abs string
	// Size is the file's length after the last write.
	Size int64

	last    string // id of the newest entry
	titles  int
	created time.Time
}

// NewSession writes a new session the way omp does: the whole file at once
// (temp file renamed into place) with a title slot, the header and entries
// lines.
func (g *Gen) NewSession(agentDir, cwdDir string, t time.Time, entries int) (*Session, error) {
	return g.newSession(agentDir, cwdDir, t, func(n, _ int) bool { return n < entries })
}

// NewSessionSize is NewSession with entries added until the file holds at
// least size bytes.
func (g *Gen) NewSessionSize(agentDir, cwdDir string, t time.Time, size int) (*Session, error) {
	return g.newSession(agentDir, cwdDir, t, func(_, have int) bool { return have < size })
}

func (g *Gen) newSession(agentDir, cwdDir string, t time.Time, more func(entries, size int) bool) (*Session, error) {
	s := &Session{ID: g.uuid7(t), created: t}
	return s, g.writeSession(agentDir, cwdDir, s, t, "", func(b *bytes.Buffer) {
		for n := 0; more(n, b.Len()); n++ {
			b.Write(g.next(s, t))
		}
	})
}

// writeSession writes s as omp writes a new session file: title slot,
// header (naming parent, if any), then what body adds, at once (a temp
// file renamed into place).
func (g *Gen) writeSession(agentDir, cwdDir string, s *Session, t time.Time, parent string, body func(*bytes.Buffer)) error {
	name := strings.NewReplacer(":", "-", ".", "-").Replace(stamp(t)) + "_" + s.ID + ".jsonl"
	s.Rel = "sessions/" + cwdDir + "/" + name
	s.Abs = filepath.Join(agentDir, filepath.FromSlash(s.Rel))
	slot, err := TitleSlot("", t)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.Write(slot)
	hdr, _ := json.Marshal(session.Header{Type: "session", Version: 3, ID: s.ID, Timestamp: stamp(t), Cwd: "/home/u/" + strings.TrimPrefix(cwdDir, "-"), ParentSession: parent})
	b.Write(hdr)
	b.WriteByte('\n')
	body(&b)
	if err := os.MkdirAll(filepath.Dir(s.Abs), 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(s.Abs), "."+name+".1.tmp")
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.Abs); err != nil {
		return err
	}
	s.Size = int64(b.Len())
	return nil
}

func (g *Gen) next(s *Session, t time.Time) []byte {
	id := g.hex(4)
	line := g.entry(id, s.last, t)
	s.last = id
	return line
}

// Append appends n entries, one write each, as omp does with O_APPEND. It
// returns the bytes appended.
func (g *Gen) Append(s *Session, t time.Time, n int) (int64, error) {
	f, err := os.OpenFile(s.Abs, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 0, err
	}
	var total int64
	for range n {
		k, err := f.Write(g.next(s, t))
		total += int64(k)
		if err != nil {
			f.Close()
			return total, err
		}
	}
	s.Size += total
	return total, f.Close()
}

// Retitle does what omp's /rename does: the title slot is overwritten in
// place, then a title_change entry is appended. It returns the bytes
// appended (the slot rewrite changes no length).
func (g *Gen) Retitle(s *Session, t time.Time) (int64, error) {
	s.titles++
	title := fmt.Sprintf("Benchmark session %s, title %d", s.ID[:8], s.titles)
	slot, err := TitleSlot(title, t)
	if err != nil {
		return 0, err
	}
	f, err := os.OpenFile(s.Abs, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	if _, err := f.WriteAt(slot, 0); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	id := g.hex(4)
	tb, _ := json.Marshal(title)
	line := []byte(`{"id":"` + id + `","parentId":"` + s.last + `","timestamp":"` + stamp(t) + `","title":` + string(tb) + `,"type":"title_change"}` + "\n")
	s.last = id
	a, err := os.OpenFile(s.Abs, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 0, err
	}
	n, err := a.Write(line)
	s.Size += int64(n)
	if cerr := a.Close(); err == nil {
		err = cerr
	}
	return int64(n), err
}

// CwdDirs returns n omp cwd-dir names (home-relative, as current omp
// writes them).
func CwdDirs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("-src-project%03d", i)
	}
	return out
}

// ErrNoCorpus explains where the corpus is expected.
var ErrNoCorpus = errors.New("no session corpus: pass -corpus (the folder of real session files, e.g. testdata/corpus)")

// Fork writes a new session the way omp's fork does: a new file with a
// fresh id and parentSession naming the parent, holding every entry of
// the parent re-serialized from memory (byte for byte the same but for
// some assistant entries, which gain a field), then extra new entries.
func (g *Gen) Fork(agentDir, cwdDir string, t time.Time, parent *Session, extra int) (*Session, error) {
	b, err := os.ReadFile(parent.Abs)
	if err != nil {
		return nil, err
	}
	body := b[session.SlotLen(b):]
	if i := bytes.IndexByte(body, '\n'); i >= 0 {
		body = body[i+1:] // the parent's header
	}
	var entries bytes.Buffer
	for line := range bytes.Lines(body) {
		if bytes.Contains(line, []byte(`"role":"assistant"`)) && g.rng.IntN(4) == 0 && bytes.HasSuffix(line, []byte("}\n")) {
			entries.Write(line[:len(line)-2])
			entries.WriteString(`,"errorId":0}` + "\n")
			continue
		}
		entries.Write(line)
	}
	s := &Session{ID: g.uuid7(t), created: t, last: parent.last}
	return s, g.writeSession(agentDir, cwdDir, s, t, parent.ID, func(w *bytes.Buffer) {
		w.Write(entries.Bytes())
		for range extra {
			w.Write(g.next(s, t))
		}
	})
}
