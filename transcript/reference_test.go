package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// parseJSON is Parse with encoding/json: the reference the scanner is held
// to.
func parseJSON(line []byte, n int) (Entry, bool) {
	if len(line) == 0 || line[0] != '{' {
		return Entry{}, false
	}
	var r rawEntry
	if err := json.Unmarshal(line, &r); err != nil {
		return Entry{}, false
	}
	return entry(r, n, contentJSON)
}

func contentJSON(raw []byte, kind, tool string) []Part {
	if len(raw) == 0 {
		return nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil || s == "" {
			return nil
		}
		return []Part{{Kind: kind, Name: tool, Text: s}}
	}
	var blocks []rawBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	var out []Part
	for _, b := range blocks {
		out = appendBlock(out, b, kind, tool, false)
	}
	return out
}

// crafted are lines the corpus lacks: escapes of every kind, surrogate
// pairs and lone halves, nulls, members of the wrong type, broken JSON.
var crafted = []string{
	`{"type":"message","id":"e1","timestamp":"2026-10-07T00:00:00Z","message":{"role":"user","content":"tab\tquote\"slash\/back\\\\ \u00e9\ud83d\ude00 \ud800 lone \b\f\r\n"}}`,
	`{"type":"message","id":"e2","message":{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"toolCall","name":"bash","arguments":{ "cmd" : "ls  -l" , "n":[1, 2.5e3,true,null]}},{"type":"thinking","thinking":"hm"},{"type":"image","data":"xx"}],"timestamp":1791334080000}}`,
	`{"type":"message","id":"e3","message":null}`,
	`{"type":"message","id":"e4","message":{"role":"toolResult","toolName":"read","content":[{"type":"text","text":"x"}]}} `,
	`{"type":"message","id":5,"message":{"role":"user","content":"wrong id type"}}`,
	`{"type":"message","id":"e6","message":{"role":"user","content":[{"type":"text","text":7}]}}`,
	`{"type":"message","id":"e7","message":{"role":"user","content":["a string element"]}}`,
	`{"type":"message","id":"e8","message":{"role":"user","content":"x"}} trailing`,
	`{"type":"message","id":"e9","message":{"role":"user","content":"unterminated}}`,
	`{"type":"compaction","id":"c1","summary":"sum\nmary","timestamp":"2026-10-07T00:00:00.5Z"}`,
	`{"type":"custom_message","content":[{"type":"text","text":"custom"}],"id":"c2"}`,
	`{"type":"message","message":{"role":"bashExecution","command":"go test","output":"ok"}}`,
	`{"type":"message","message":{"role":"user","content":"x"},"id":"dup","id":"dup2"}`,
	`{"type":"message","message":{"role":"user","content":"bad \x escape"}}`,
	`{"type":"message","message":{"role":"user","content":"` + "ctrl\x01char" + `"}}`,
	`{"type":"message","id":"e10","message":{"role":"user","content":[]}}`,
	`{"type":"message","id":"e11","message":{"role":"user","content":{}}}`,
	`{"type":"message","id":"e12","timestamp":-0.5e-3,"message":{"role":"user","content":"n"}}`,
	`{"type":"message","id":"e13","timestamp":01,"message":{"role":"user","content":"n"}}`,
	`{"type":"message","id":"e14","message":{"role":"user","content":[{"type":"text","text":"a"},null]}}`,
	`{"type":"message","id":"e15","id":null,"message":{"role":"user","content":"a"}}`,
	`{"type":"message","id":"e16","message":{"role":"user"},"message":{"content":"a"}}`,
	`{"type":"message","id":"e17","message":{"role":"user","content":"a"},"message":null}`,
	`{}`, `{`, `{"type":}`, `{"type":"message",}`, `[]`, `{"a":[[[[[]]]]]}`,
}

// The scanner reads every line of every real session, and the crafted
// ones, as encoding/json does.
func TestScannerAgreesWithEncodingJSON(t *testing.T) {
	var lines []string
	_, files := corpusFiles(t)
	for _, b := range files {
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
	}
	if len(lines) < 1000 {
		t.Fatalf("only %d corpus lines", len(lines))
	}
	lines = append(lines, crafted...)
	for i, l := range lines {
		got, gotOK := Parse([]byte(l), i)
		want, wantOK := parseJSON([]byte(l), i)
		if gotOK != wantOK || !reflect.DeepEqual(got, want) {
			t.Errorf("line %d %.120q:\n scanner  %v %+v\n encoding %v %+v", i, l, gotOK, got, wantOK, want)
		}
	}
}

// FuzzScanner: no line panics the scanner or makes it disagree with
// encoding/json about what a line as omp writes it holds (lower-case
// members; encoding/json also takes other cases).
func FuzzScanner(f *testing.F) {
	for _, l := range crafted {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, l string) {
		got, gotOK := Parse([]byte(l), 1)
		if strings.ContainsFunc(l, func(r rune) bool { return r >= 'A' && r <= 'Z' }) {
			return // member names in other cases: encoding/json folds them
		}
		want, wantOK := parseJSON([]byte(l), 1)
		if gotOK != wantOK || !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\n scanner  %v %+v\n encoding %v %+v", l, gotOK, got, wantOK, want)
		}
	})
}
