package session_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/mergeref"
	"github.com/ompsync/ompsync/session"
)

// corpusSeeds adds the first lines of the real session files as seeds.
func corpusSeeds(f *testing.F, lines int) [][]byte {
	f.Helper()
	files, _ := filepath.Glob("../testdata/corpus/*.jsonl")
	var out [][]byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for i, l := range bytes.SplitAfter(b, []byte("\n")) {
			if i >= lines || len(l) > 4<<10 {
				break
			}
			out = append(out, l)
		}
	}
	return out
}

// FuzzParseTitleSlot: whatever the first bytes of a file hold, a slot that
// parses is exactly the first 256 bytes, ending in a newline, and nothing
// after them changes what it says.
func FuzzParseTitleSlot(f *testing.F) {
	f.Add(makeSlot(f, "", t0))
	f.Add(makeSlot(f, "Fix the login bug", t0))
	f.Add(append(makeSlot(f, "ünïcödé 名前", t0), `{"type":"session"}`+"\n"...))
	f.Add([]byte(`{"type":"title","title":1}` + strings.Repeat(" ", 229) + "\n"))
	f.Add([]byte(`{"type":"title"` + strings.Repeat(" ", 240) + "\n"))
	for _, l := range corpusSeeds(f, 1) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, ok := session.ParseTitleSlot(b)
		if !ok {
			if session.SlotLen(b) != 0 {
				t.Fatalf("SlotLen = %d for bytes that are no slot", session.SlotLen(b))
			}
			return
		}
		if len(b) < session.TitleSlotSize || b[session.TitleSlotSize-1] != '\n' {
			t.Fatalf("slot accepted without 256 bytes ending in a newline: %q", b)
		}
		if session.SlotLen(b) != session.TitleSlotSize {
			t.Fatalf("SlotLen = %d for a slot", session.SlotLen(b))
		}
		again, ok := session.ParseTitleSlot(append(bytes.Clone(b[:session.TitleSlotSize]), "trailing bytes\n"...))
		if !ok || again != ts {
			t.Fatalf("the slot depends on bytes after it: %+v then %+v", ts, again)
		}
	})
}

// FuzzReadHeader: a header is read from the first line (after any slot),
// is a session line, and does not depend on what follows it.
func FuzzReadHeader(f *testing.F) {
	header := `{"type":"session","version":3,"id":"01a113d2-be76-73c7-986b-d3ac6e3fbb83","timestamp":"2026-10-07T00:45:40.854Z","cwd":"/home/u/.omp/work"}` + "\n"
	f.Add([]byte(header))
	f.Add(append(makeSlot(f, "t", t0), header...))
	f.Add(append(makeSlot(f, "t", t0), header[:40]...))
	f.Add([]byte(`{"type":"session","id":"../../etc","cwd":"\u0000"}` + "\n"))
	f.Add([]byte(`{"type":"message","id":"x"}` + "\n" + header))
	for _, l := range corpusSeeds(f, 2) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, slot, err := session.ReadHeader(b)
		if err != nil {
			if err != session.ErrNoHeader {
				t.Fatalf("error %v is not session.ErrNoHeader", err)
			}
			return
		}
		if h.Type != "session" {
			t.Fatalf("header of type %q", h.Type)
		}
		rest := b[session.SlotLen(b):]
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			t.Fatal("header read from a line without its newline")
		}
		end := session.SlotLen(b) + nl + 1
		h2, slot2, err := session.ReadHeader(append(bytes.Clone(b[:end]), "garbage after the header"...))
		if err != nil || h2 != h || slot2 != slot {
			t.Fatalf("the header depends on bytes after it: %+v %v", h2, err)
		}
	})
}

// FuzzParseEntry: an entry parses only from valid JSON, and a line that
// does not parse is still a line the merger keeps as it is.
func FuzzParseEntry(f *testing.F) {
	f.Add([]byte(entryLine("aaaa0001", "", t0, "one")))
	f.Add([]byte(entryLine("aaaa0002", "aaaa0001", t0, "two")))
	f.Add([]byte(`{"type":"message","id":1}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"id":"a","id":"b","ID":"c"}`))
	f.Add([]byte("\xff\xfe"))
	for _, l := range corpusSeeds(f, 8) {
		f.Add(bytes.TrimSuffix(l, []byte("\n")))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		e, ok := session.ParseEntry(line)
		if !ok {
			if e != (session.Entry{}) {
				t.Fatalf("a line that does not parse yields %+v", e)
			}
		} else if !json.Valid(line) {
			t.Fatalf("entry parsed from invalid JSON %q", line)
		}
		// The merger keeps the line whatever it is.
		if bytes.IndexByte(line, '\n') >= 0 {
			return
		}
		out, err := mergeref.OMP(append(bytes.Clone(line), '\n'))
		if err != nil {
			t.Fatal(err)
		}
		if _, slot := session.ParseTitleSlot(out); !slot && !bytes.Equal(out, append(bytes.Clone(line), '\n')) {
			t.Fatalf("merge of one line %q gave %q", line, out)
		}
	})
}

// FuzzMergeThree merges three copies. Beyond FuzzMerge (two copies, the
// first one's lines kept): every line of every copy is in the output, an
// entry by its id and timestamp (the first copy's bytes win), any other
// line by its bytes, as often as the copy that holds it most; and the output
// holds nothing that no copy holds.
func FuzzMergeThree(f *testing.F) {
	header := `{"type":"session","version":3,"id":"s","timestamp":"2026-10-07T00:45:40.000Z","cwd":"/w"}` + "\n"
	e1 := entryLine("aaaa0001", "", t0, "one") + "\n"
	e2 := entryLine("bbbb0001", "aaaa0001", t0.Add(time.Second), "b") + "\n"
	e3 := entryLine("cccc0001", "aaaa0001", t0.Add(2*time.Second), "c") + "\n"
	f.Add([]byte(header+e1), []byte(header+e1+e2), []byte(header+e1+e3))
	f.Add(append(makeSlot(f, "x", t0), header+e1...), []byte(header+"garbage\n\n\n"+e1), append(makeSlot(f, "y", t0.Add(time.Hour)), header...))
	f.Add([]byte(header+e2+e1), []byte(e3+e3), []byte("no newline"))
	f.Add([]byte(entryLine("aaaa0001", "", t0, "pruned")+"\n"), []byte(e1), []byte(e1+e1))
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		copies := [][]byte{a, b, c}
		got, err := mergeref.OMP(copies...)
		if err != nil {
			t.Fatal(err)
		}
		checkStreamed(t, session.OMPFormat(), copies...)
		hasSlot := false
		for _, cp := range copies {
			if _, ok := session.ParseTitleSlot(cp); ok {
				hasSlot = true
			}
		}
		var lines []string
		if hasSlot {
			_, lines = splitOut(t, got)
		} else if len(got) > 0 {
			if got[len(got)-1] != '\n' {
				t.Fatal("output does not end with a newline")
			}
			lines = strings.Split(string(got[:len(got)-1]), "\n")
		}
		// key is how the merge rule knows a line.
		key := func(l string) string {
			if e, ok := session.ParseEntry([]byte(l)); ok && e.ID != "" {
				return "entry " + e.ID + " " + e.Timestamp
			}
			return "line " + l
		}
		count := func(ls []string, k func(string) string) map[string]int {
			m := map[string]int{}
			for _, l := range ls {
				m[k(l)]++
			}
			return m
		}
		same := func(l string) string { return l }
		outKeys, outLines := count(lines, key), count(lines, same)
		inLines := map[string]int{}
		for i, cp := range copies {
			cl := copyLines(cp)
			for k, n := range count(cl, key) {
				if outKeys[k] < n {
					t.Fatalf("copy %d holds %q %d times, the output %d times", i, k, n, outKeys[k])
				}
			}
			for l, n := range count(cl, same) {
				inLines[l] = max(inLines[l], n)
				if i == 0 && outLines[l] < n {
					t.Fatalf("a line of the first copy (the local file) is lost: %q", l)
				}
			}
		}
		for l, n := range outLines {
			if n > inLines[l] {
				t.Fatalf("output holds %q %d times; no copy holds it that often", l, n)
			}
		}
	})
}
