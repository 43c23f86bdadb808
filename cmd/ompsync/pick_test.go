package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/session"
)

// slotLine is omp's 256-byte title slot.
func slotLine(title string) string {
	s := fmt.Sprintf(`{"type":"title","v":1,"title":%q,"updatedAt":"2026-10-07T02:00:00.000Z","pad":"`, title)
	return s + strings.Repeat(" ", session.TitleSlotSize-len(s)-3) + "\"}\n"
}

// messageLine is one message entry of role with one text block.
func messageLine(id, parent, role, at, text string) string {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	return fmt.Sprintf(`{"type":"message","id":%q,"parentId":%s,"timestamp":%q,"message":{"role":%q,"content":[{"type":"text","text":%q}]}}`+"\n", id, p, at, role, text)
}

// synthSession is a session file of id in cwd with n entries.
func synthSession(id, cwd, title string, n int) []byte {
	s := slotLine(title) + fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-10-07T00:45:40.854Z","cwd":%q}`+"\n", id, cwd)
	parent := ""
	for i := range n {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		eid := fmt.Sprintf("%08x", i+1)
		s += messageLine(eid, parent, role, "2026-10-07T01:00:00.000Z", fmt.Sprintf("line %d of %s", i, title))
		parent = eid
	}
	return []byte(s)
}

var ambIDs = []string{
	"019a0001-0000-7000-8000-000000000001",
	"019a0001-0000-7000-8000-000000000002",
	"019a0001-0000-7000-8000-000000000003",
}

// ambiguousRemote backs up three sessions whose ids share 8 hex digits;
// the second is the newest, the third the next.
func ambiguousRemote(t *testing.T) (url string, rels []string) {
	url = "file://" + t.TempDir() + "/remote"
	e := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	for i, id := range ambIDs {
		rel := fmt.Sprintf("sessions/-w%d/2026-10-07T00-45-40-00%dZ_%s.jsonl", i, i, id)
		rels = append(rels, rel)
		e.write(rel, synthSession(id, fmt.Sprintf("/home/u/w%d", i), fmt.Sprintf("title %d", i), 4), mtime0.Add(time.Duration([]int{0, 60, 1}[i])*time.Minute))
	}
	if r := e.run("agent", "--once"); r.code != 0 {
		t.Fatalf("agent --once: %d %s", r.code, r.stderr)
	}
	return url, rels
}

// An ambiguous prefix off a terminal: a short table of the candidates,
// newest first, then one ompsync line; exit 1, nothing written. --latest
// takes the newest; a file name or path names its session.
func TestAmbiguousPrefixCommand(t *testing.T) {
	url, rels := ambiguousRemote(t)
	e := newRestoreEnv(t, url, backend.S3Options{}, "desktop")
	r := e.run("restore", "019a0001")
	if r.code != exitFailure {
		t.Fatalf("ambiguous: exit %d, stderr %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("stderr is not a heading, a table of 3 and a line:\n%s", r.stderr)
	}
	if lines[0] != `session id prefix "019a0001" matches 3 sessions, newest first:` || !strings.Contains(lines[1], "ID") || !strings.Contains(lines[1], "CWD") {
		t.Errorf("heading:\n%s\n%s", lines[0], lines[1])
	}
	for i, want := range []int{1, 2, 0} {
		row := lines[2+i]
		for _, s := range []string{ambIDs[want], fmt.Sprintf("title %d", want), fmt.Sprintf("/home/u/w%d", want), "laptop", mtime0.Add(time.Duration([]int{0, 60, 1}[want]) * time.Minute).Local().Format(time.DateTime)} {
			if !strings.Contains(row, s) {
				t.Errorf("row %d %q lacks %q", i, row, s)
			}
		}
	}
	last := lines[5]
	if !strings.HasPrefix(last, "ompsync: ") || !strings.Contains(last, "ambiguous: it matches 3 sessions") || !strings.Contains(last, "--latest") || strings.Count(r.stderr, "ompsync: ") != 1 {
		t.Errorf("last line %q", last)
	}
	if entries, _ := os.ReadDir(e.path("sessions")); len(entries) != 0 {
		t.Fatalf("an ambiguous prefix wrote %d entries", len(entries))
	}

	if r := e.run("restore", "--latest", "019a0001"); r.code != 0 || !strings.Contains(r.stdout, ambIDs[1]) {
		t.Errorf("--latest: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(e.path(rels[1])); err != nil {
		t.Errorf("--latest did not restore the newest: %v", err)
	}
	if r := e.run("restore", "/somewhere/else/"+rels[2]); r.code != 0 || !strings.Contains(r.stdout, ambIDs[2]) {
		t.Errorf("by path: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := e.run("restore", "--all", "--latest"); r.code != exitUsage {
		t.Errorf("--all --latest: exit %d, want %d", r.code, exitUsage)
	}
}

// On a terminal the candidates are numbered and the user picks one.
func TestAmbiguousPrefixPrompt(t *testing.T) {
	url, rels := ambiguousRemote(t)
	for _, tc := range []struct {
		answer string
		code   int
		want   string // restored id, or the error
	}{
		{"3\n", exitOK, ambIDs[0]},
		{"9\n", exitFailure, `"9" is not one of 1-3`},
		{"\n", exitFailure, "no session was chosen"},
		{"", exitFailure, "no session was chosen"},
	} {
		e := newRestoreEnv(t, url, backend.S3Options{}, "desktop")
		var out, errb bytes.Buffer
		a := &app{stdout: &out, stderr: &errb, env: e.env.lookup, stdin: strings.NewReader(tc.answer), interactive: true}
		code := a.execute(context.Background(), newRootCmd(a), []string{"restore", "019a0001"})
		if code != tc.code {
			t.Errorf("answer %q: exit %d, want %d; %s", tc.answer, code, tc.code, errb.String())
		}
		if !strings.Contains(errb.String(), "which one? 1-3") || !strings.Contains(errb.String(), "#") {
			t.Errorf("answer %q: no numbered prompt: %q", tc.answer, errb.String())
		}
		if tc.code == exitOK {
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("answer %q restored %q", tc.answer, out.String())
			}
			if _, err := os.Stat(e.path(rels[0])); err != nil {
				t.Errorf("the chosen session is not there: %v", err)
			}
		} else if !strings.Contains(errb.String(), tc.want) {
			t.Errorf("answer %q: stderr %q lacks %q", tc.answer, errb.String(), tc.want)
		}
	}
}
