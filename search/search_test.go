package search

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/transcript"
)

// Index is the reference an Indexer is held to: the records of data, whole
// lines of a session file, made in memory.
func Index(out, data []byte, format transcript.Format) []byte {
	text := transcript.Parse
	if format != nil {
		text = format.Text
	}
	for n, line := range bytes.Split(data, []byte("\n")) {
		if e, ok := text(line, n+1); ok {
			out = appendEntry(out, e)
		}
	}
	return out
}

func msg(id, role, at, text string) string {
	return fmt.Sprintf(`{"type":"message","id":%q,"parentId":null,"timestamp":%q,"message":{"role":%q,"content":[{"type":"text","text":%q}]}}`+"\n", id, at, role, text)
}

var sample = `{"type":"session","version":3,"id":"s1","timestamp":"2026-10-07T00:00:00Z","cwd":"/w"}
` + msg("a1", "user", "2026-10-07T01:00:00Z", "Where is the Login bug?\nsecond line mentions user") +
	msg("a2", "assistant", "2026-10-07T02:00:00Z", "in auth.go\tline 12") +
	msg("a3", "assistant", "2026-10-07T03:00:00Z", "login fixed")

func scan(t *testing.T, p Pattern, since int64) []string {
	t.Helper()
	m, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var scratch []byte
	m.Scan(Index(nil, []byte(sample), nil), since, &scratch, func(r Record) { out = append(out, r.Entry+":"+r.Text) })
	return out
}

// A match is within one line of text: never in the entry id, role or time
// that the records also hold, with any kind of pattern.
func TestScan(t *testing.T) {
	for _, tc := range []struct {
		p     Pattern
		since int64
		want  string
	}{
		{Pattern{Text: "Login"}, 0, "a1:Where is the Login bug?"},
		{Pattern{Text: "login", IgnoreCase: true}, 0, "a1:Where is the Login bug?|a3:login fixed"},
		{Pattern{Text: "user"}, 0, "a1:second line mentions user"}, // not the role
		{Pattern{Text: "a2"}, 0, ""},                               // not the id
		{Pattern{Text: "assistant"}, 0, ""},
		{Pattern{Text: "line 12"}, 0, "a2:in auth.go\tline 12"},
		{Pattern{Text: `^login`, Regexp: true}, 0, "a3:login fixed"},
		{Pattern{Text: `^(in|second)`, Regexp: true}, 0, "a1:second line mentions user|a2:in auth.go\tline 12"},
		{Pattern{Text: `bug\?$`, Regexp: true}, 0, "a1:Where is the Login bug?"},
		{Pattern{Text: `L[a-z]+n\b`, Regexp: true, IgnoreCase: true}, 0, "a1:Where is the Login bug?|a3:login fixed"},
		{Pattern{Text: `bug\?\s+second`, Regexp: true}, 0, ""}, // not across lines
		{Pattern{Text: `1\d+`, Regexp: true}, 0, "a2:in auth.go\tline 12"},
		{Pattern{Text: "ÉTÉ", IgnoreCase: true}, 0, ""},
		{Pattern{Text: "login", IgnoreCase: true}, time.Date(2026, 10, 7, 2, 30, 0, 0, time.UTC).UnixMilli(), "a3:login fixed"},
	} {
		if got := strings.Join(scan(t, tc.p, tc.since), "|"); got != tc.want {
			t.Errorf("%+v since %d: %q, want %q", tc.p, tc.since, got, tc.want)
		}
	}
	for _, bad := range []Pattern{{Text: ""}, {Text: "a\nb"}, {Text: "(", Regexp: true}} {
		if _, err := Compile(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	m, _ := Compile(Pattern{Text: "été", IgnoreCase: true})
	var got []string
	var scratch []byte
	m.Scan(Index(nil, []byte(msg("u1", "user", "2026-10-07T01:00:00Z", "un ÉTÉ chaud")), nil), 0, &scratch, func(r Record) { got = append(got, r.Text) })
	if len(got) != 1 {
		t.Errorf("case-insensitive beyond ASCII: %q", got)
	}
	if i := m.Index("un ÉTÉ chaud"); i != 3 {
		t.Errorf("Index: %d", i)
	}
}

func TestCache(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCache(dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	st := &CopyState{Session: "s1", Machine: "desk", Generation: "0000000000000001", Offset: 10}
	if err := store(c, st, false, "a\tuser\ttext\t0\tfirst\n"); err != nil {
		t.Fatal(err)
	}
	// A run cut off after appending records but before saving its state
	// leaves more in the file than the state says: the next append drops it.
	f, _ := os.OpenFile(filepath.Join(dir, "s1", "desk.txt"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("junk\n")
	f.Close()
	got, _ := c.State("s1", "desk")
	if recs := records(t, c, got); recs != "a\tuser\ttext\t0\tfirst\n" {
		t.Fatalf("records %q", recs)
	}
	got.Offset = 20
	if err := store(c, got, true, "b\tuser\ttext\t0\tsecond\n"); err != nil {
		t.Fatal(err)
	}
	got, _ = c.State("s1", "desk")
	recs := records(t, c, got)
	if got.Offset != 20 || recs != "a\tuser\ttext\t0\tfirst\nb\tuser\ttext\t0\tsecond\n" {
		t.Fatalf("after an append: %+v %q", got, recs)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "s1", "desk.txt")); fi.Mode().Perm() != 0o600 || fi.Size() != got.Records {
		t.Errorf("records file: mode %v, %d bytes, %d valid", fi.Mode(), fi.Size(), got.Records)
	}
	// Over the bound: the copy used longest ago goes.
	now = now.Add(2 * time.Hour)
	st2 := &CopyState{Session: "s2", Machine: "desk", Generation: "0000000000000001"}
	if err := store(c, st2, false, strings.Repeat("x", 70)+"\n"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Evict(); err != nil || n != 1 {
		t.Fatalf("evicted %d: %v", n, err)
	}
	if st, _ := c.State("s1", "desk"); st != nil {
		t.Error("the older copy is still there")
	}
	if st, _ := c.State("s2", "desk"); st == nil {
		t.Error("the newer copy went")
	}
	if _, err := c.State("../x", "desk"); err == nil {
		t.Error("an unsafe session id: no error")
	}
	// Records an older ompsync made (no version: Claude Code's and Codex's
	// lines left out) are made again.
	old := []byte(`{"session":"s2","machine":"desk","generation":"0000000000000001","offset":0,"records":71}`)
	os.WriteFile(filepath.Join(dir, "s2", "desk.json"), old, 0o600)
	if st, err := c.State("s2", "desk"); st != nil || err != nil {
		t.Errorf("records of an older version: %+v %v", st, err)
	}
	// Damaged state: nothing usable, not an error.
	os.WriteFile(filepath.Join(dir, "s2", "desk.json"), []byte("{"), 0o600)
	if st, err := c.State("s2", "desk"); st != nil || err != nil {
		t.Errorf("damaged state: %+v %v", st, err)
	}
}

// store keeps recs as st's records, after those st holds with appendTo.
func store(c *Cache, st *CopyState, appendTo bool, recs string) error {
	var from *CopyState
	if appendTo {
		from = st
	}
	p, err := c.Begin(st.Session, st.Machine, from)
	if err != nil {
		return err
	}
	if p == nil {
		return errors.New("records gone")
	}
	if _, err := p.Write([]byte(recs)); err != nil {
		p.Abort()
		return err
	}
	return p.commit(st)
}

// records reads st's records back.
func records(t *testing.T, c *Cache, st *CopyState) string {
	t.Helper()
	rc, err := c.Open(st)
	if err != nil || rc == nil {
		t.Fatalf("open %+v: %v", st, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
