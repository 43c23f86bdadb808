package restore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/session"
)

// omp writes a session as a title slot, a header and entries.
func slotLine(title string) string {
	s := fmt.Sprintf(`{"type":"title","v":1,"title":%q,"updatedAt":"2026-10-07T02:00:00.000Z","pad":"`, title)
	return s + strings.Repeat(" ", session.TitleSlotSize-len(s)-3) + "\"}\n"
}

func headerLine(id, cwd string) string {
	return fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-10-07T00:45:40.854Z","cwd":%q}`+"\n", id, cwd)
}

// messageLine is one message entry of role with one text block.
func messageLine(id, parent, role, at, text string) string {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	return fmt.Sprintf(`{"type":"message","id":%q,"parentId":%s,"timestamp":%q,"message":{"role":%q,"content":[{"type":"text","text":%q}]}}`+"\n", id, p, at, role, text)
}

// synthSession is a session of id, titled, with n user/assistant entries.
func synthSession(id, cwd, title string, n int) []byte {
	s := slotLine(title) + headerLine(id, cwd)
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

// Three sessions begun within the same minute share their first 8 hex
// digits, as UUIDv7 ids do: the prefix lists them newest first, with
// title, cwd and machine; --latest takes the newest; a file's name or
// path names its session.
func TestAmbiguousPrefix(t *testing.T) {
	r := fileRemote(t)
	ids := []string{
		"019a0001-0000-7000-8000-000000000001",
		"019a0001-0000-7000-8000-000000000002",
		"019a0001-0000-7000-8000-000000000003",
	}
	a := newMachine(t, r, "desk")
	b := newMachine(t, r, "laptop")
	// The second is the newest: last changed an hour after the others.
	mtimes := []time.Time{base, base.Add(time.Hour), base.Add(time.Minute)}
	rels := make([]string, len(ids))
	for i, id := range ids {
		rels[i] = sessionPath("-w"+itoa(i), id, i)
		m := a
		if i == 2 {
			m = b
		}
		m.write(rels[i], synthSession(id, "/home/u/w"+itoa(i), "title "+itoa(i), 4), mtimes[i])
	}
	a.backup()
	b.backup()

	c := newMachine(t, r, "new")
	_, err := c.restore([]string{"019A0001"}, Options{})
	var amb *AmbiguousError
	if !errors.As(err, &amb) {
		t.Fatalf("ambiguous prefix: %v, want an *AmbiguousError", err)
	}
	if amb.Prefix != "019A0001" || len(amb.Candidates) != 3 {
		t.Fatalf("candidates of %q: %+v", amb.Prefix, amb.Candidates)
	}
	for i, want := range []int{1, 2, 0} {
		cand := amb.Candidates[i]
		m := "desk"
		if want == 2 {
			m = "laptop"
		}
		if cand.ID != ids[want] || cand.Title != "title "+itoa(want) || cand.Cwd != "/home/u/w"+itoa(want) ||
			len(cand.Machines) != 1 || cand.Machines[0] != m || !cand.Mtime.Equal(mtimes[want]) {
			t.Errorf("candidate %d: %+v, want session %s of %s", i, cand, ids[want], m)
		}
	}
	if len(snapshot(t, c.agentDir)) != 0 {
		t.Fatal("an ambiguous prefix wrote files")
	}

	// --latest: the newest, as omp's --resume takes it.
	rep := c.restoreOK([]string{"019a0001"}, Options{Latest: true})
	if len(rep.Results) != 1 || rep.Results[0].ID != ids[1] {
		t.Fatalf("--latest restored %+v, want %s", rep.Results, ids[1])
	}

	// A chooser picks another; its choice must be a candidate.
	asked := 0
	rep = c.restoreOK([]string{"019a0001"}, Options{Choose: func(amb *AmbiguousError) (string, error) {
		asked++
		return amb.Candidates[2].ID, nil
	}})
	if asked != 1 || rep.Results[0].ID != ids[0] {
		t.Fatalf("chosen: asked %d times, restored %+v", asked, rep.Results)
	}
	_, err = c.restore([]string{"019a0001"}, Options{Choose: func(*AmbiguousError) (string, error) { return ids[0][:8], nil }})
	if err == nil || !strings.Contains(err.Error(), "is not among") {
		t.Errorf("a choice that is no candidate: %v", err)
	}
	_, err = c.restore([]string{"019a0001"}, Options{Choose: func(*AmbiguousError) (string, error) { return "", errors.New("no session was chosen") }})
	if err == nil || !strings.Contains(err.Error(), "no session was chosen") {
		t.Errorf("no choice: %v", err)
	}

	// A file's name or path: the whole id in it, so never ambiguous.
	d := newMachine(t, r, "other")
	for _, arg := range []string{
		rels[2][strings.LastIndexByte(rels[2], '/')+1:],
		"/home/u/.omp/agent/" + rels[2],
		"archive/" + strings.TrimSuffix(rels[2], ".jsonl") + ".jsonl.gz",
	} {
		rep := d.restoreOK([]string{arg}, Options{DryRun: true})
		if len(rep.Results) != 1 || rep.Results[0].ID != ids[2] {
			t.Errorf("%q restored %+v, want %s", arg, rep.Results, ids[2])
		}
	}
	for _, arg := range []string{"sessions/-w/notes.jsonl", "x/2026-10-07T00-45-40-000Z_ffff.jsonl"} {
		if _, err := d.restore([]string{arg}, Options{DryRun: true}); err == nil {
			t.Errorf("%q: no error", arg)
		}
	}

	// Two prefixes, both ambiguous: both errors, joined.
	_, err = c.restore([]string{"019a0001", "019a"}, Options{})
	n := 0
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		if errors.As(e, &amb) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("two ambiguous prefixes: %d ambiguities in %v", n, err)
	}
}
