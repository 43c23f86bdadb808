package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/restore"
)

// shrinkEnv is one machine backing up one corpus session beside a
// bystander (which keeps the folder from looking unmounted).
func shrinkEnv(t *testing.T, url string, s3 backend.S3Options) (*restoreEnv, corpusSession) {
	e := newRestoreEnv(t, url, s3, "laptop")
	c := corpusSessions(t)[0]
	e.write("sessions/-w/2026-10-07T00-45-40-001Z_019a0006-0000-7000-8000-000000000001.jsonl",
		synthSession("019a0006-0000-7000-8000-000000000001", "/home/u/w", "bystander", 2), mtime0)
	e.write(c.rel, c.data, time.Now().Add(-time.Hour))
	e.mustRun("agent", "--once")
	return e, c
}

// generations are the session's copies on laptop, oldest first, as verify
// --json shows them.
func (e *restoreEnv) generations(id string) (gens []restore.CopyCheck, notes []string) {
	e.t.Helper()
	r := e.mustRun("verify", "--json", id[:13])
	var checks []restore.Check
	for l := range strings.Lines(r.stdout) {
		var c restore.Check
		if json.Unmarshal([]byte(l), &c) == nil && c.ID == id {
			checks = append(checks, c)
		}
	}
	if len(checks) != 1 {
		e.t.Fatalf("verify --json: %d checks of %s\n%s", len(checks), id, r.stdout)
	}
	for _, cc := range checks[0].Copies {
		if cc.Stream == "session" {
			gens = append(gens, cc)
		}
	}
	return gens, checks[0].Notes
}

// A session cut to its first 3 lines on disk (damage, or a user's edit)
// is followed, and said at WARN with the command that brings the longer
// copy back; verify notes it; retention that would delete the complete
// generation keeps it, and prune --dry-run says why; restore --generation
// gives the complete bytes back.
func TestShrunkSessionKeepsItsCompleteCopy(t *testing.T) {
	t.Parallel()
	forEachRemote(t, func(t *testing.T, url string, s3 backend.S3Options) {
		e, c := shrinkEnv(t, url, s3)
		var stub []byte
		for i, l := 0, c.data; i < 3; i++ {
			n := bytes.IndexByte(l, '\n') + 1
			stub, l = append(stub, l[:n]...), l[n:]
		}
		e.write(c.rel, stub, time.Now().Add(-30*time.Minute))
		r := e.mustRun("agent", "--once")
		gens, notes := e.generations(c.id)
		if len(gens) != 2 || gens[0].Bytes != int64(len(c.data)) || gens[1].Bytes != int64(len(stub)) || !gens[1].Newest {
			t.Fatalf("copies %+v, want the complete one (%d bytes), then the stub (%d)", gens, len(c.data), len(stub))
		}
		whole := gens[0].Generation
		back := "ompsync restore --generation " + whole + " " + c.id
		var warned []string
		for l := range strings.Lines(r.stderr) {
			if strings.Contains(l, "level=WARN") {
				warned = append(warned, l)
			}
		}
		if len(warned) != 1 || !strings.Contains(warned[0], "backed_up_bytes="+strconv.Itoa(len(c.data))) || !strings.Contains(warned[0], "bytes="+strconv.Itoa(len(stub))) ||
			!strings.Contains(warned[0], back) {
			t.Fatalf("agent --once said at WARN %q, want one line with both sizes and %q; stderr:\n%s", warned, back, r.stderr)
		}
		if len(notes) != 1 || !strings.Contains(notes[0], "began when the file shrank") || !strings.Contains(notes[0], "'"+back+"'") {
			t.Fatalf("verify notes %q, want the shrink and %q", notes, back)
		}
		if v := e.run("verify", c.id[:13]); v.code != 0 || !strings.Contains(v.stdout, back) {
			t.Fatalf("verify: exit %d, want 0 with the note\n%s%s", v.code, v.stdout, v.stderr)
		}

		// Retention of 1ms would delete the complete copy: it stays, and
		// prune says why.
		time.Sleep(5 * time.Millisecond)
		for _, args := range [][]string{{"prune", "--dry-run", "--retention-generations", "1ms"}, {"prune", "--retention-generations", "1ms"}} {
			p := e.mustRun(args...)
			if strings.Contains(p.stdout, whole+": superseded") || !strings.Contains(p.stdout, c.id+" session generation "+whole+": kept, holds lines the current generation") ||
				!strings.Contains(p.stdout, "'"+back+"'") {
				t.Fatalf("%v printed\n%s", args, p.stdout)
			}
		}
		if gens, _ := e.generations(c.id); len(gens) != 2 || gens[0].Generation != whole {
			t.Fatalf("after prune: copies %+v", gens)
		}

		// A plain restore brings back the newest copy, which the file
		// already holds, and says where the lines it lacks are.
		if r := e.run("restore", c.id[:13]); r.code != 0 || !strings.Contains(r.stdout, "unchanged") || !strings.Contains(r.stdout, "began when the file shrank") || !strings.Contains(r.stdout, "'"+back+"'") {
			t.Fatalf("restore of the shrunk session: exit %d, want 0, unchanged, with %q\n%s%s", r.code, back, r.stdout, r.stderr)
		}

		e.mustRun("restore", "--generation", whole, c.id)
		if got, err := os.ReadFile(e.path(c.rel)); err != nil || !bytes.Equal(got, c.data) {
			t.Fatalf("restore --generation %s: %d bytes, want the complete %d (%v)", whole, len(got), len(c.data), err)
		}

		// The file holds every line again (as a machine that pulled the
		// session before it shrank does): nothing is said to be lacking.
		if r := e.run("restore", c.id[:13]); r.code != 0 || strings.Contains(r.stdout+r.stderr, "began when the file shrank") {
			t.Fatalf("restore with every line here: exit %d, want 0 and no note of lacking lines\n%s%s", r.code, r.stdout, r.stderr)
		}
		if _, notes := e.generations(c.id); len(notes) != 0 {
			t.Fatalf("verify with every line here notes %q, want none", notes)
		}
	})
}

// omp's own rewrite (a tool output pruned, every entry's id kept, the
// title slot rewritten) leaves nothing retention keeps: the superseded
// generation goes.
func TestRewrittenSessionStillPruned(t *testing.T) {
	t.Parallel()
	forEachRemote(t, func(t *testing.T, url string, s3 backend.S3Options) {
		e, c := shrinkEnv(t, url, s3)
		rewritten := bytes.Replace(c.data, []byte(`"title":"`), []byte(`"title":"Re: `), 1)
		// A tool result's text is pruned, as omp's loop guard does: the
		// line's bytes change, its id and time do not.
		var tool []byte
		for l := range bytes.Lines(rewritten) {
			if bytes.Contains(l, []byte(`"role":"toolResult"`)) {
				tool = l
				break
			}
		}
		var entry map[string]any
		if len(rewritten) != len(c.data)+4 || json.Unmarshal(tool, &entry) != nil {
			t.Fatalf("corpus file without a title or a tool result: %q", tool)
		}
		entry["message"].(map[string]any)["content"] = []any{map[string]any{"type": "text", "text": "[output pruned]"}}
		pruned, err := json.Marshal(entry)
		if err != nil {
			t.Fatal(err)
		}
		rewritten = bytes.Replace(rewritten, tool, append(pruned, '\n'), 1)
		e.replaceFile(c.rel, rewritten)
		if r := e.mustRun("agent", "--once"); strings.Contains(r.stderr, "level=WARN") {
			t.Fatalf("omp's rewrite was warned of:\n%s", r.stderr)
		}
		gens, notes := e.generations(c.id)
		if len(gens) != 2 || gens[1].Bytes >= gens[0].Bytes || len(notes) != 0 {
			t.Fatalf("after the rewrite: copies %+v (the newest smaller), notes %q (want none)", gens, notes)
		}
		old := gens[0].Generation
		time.Sleep(5 * time.Millisecond)
		p := e.mustRun("prune", "--retention-generations", "1ms")
		if !strings.Contains(p.stdout, c.id+" session generation "+old+": superseded ") || strings.Contains(p.stdout, "kept") {
			t.Fatalf("prune printed\n%s", p.stdout)
		}
		if gens, _ := e.generations(c.id); len(gens) != 1 || gens[0].Generation == old {
			t.Fatalf("after prune: copies %+v", gens)
		}
	})
}
