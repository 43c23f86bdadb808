package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/restore"
)

func TestGrepCommand(t *testing.T) {
	url, _ := ambiguousRemote(t)
	e := newRestoreEnv(t, url, backend.S3Options{}, "desktop")
	r := e.run("grep", "line 3 of title")
	if r.code != 0 {
		t.Fatalf("grep: exit %d, %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), r.stdout)
	}
	// Newest session first; id, title, entry, role, time, text.
	if !strings.HasPrefix(lines[0], ambIDs[1]+`  "title 1"  00000004  assistant  `) || !strings.HasSuffix(lines[0], "  line 3 of title 1") {
		t.Errorf("first line %q", lines[0])
	}
	if !strings.Contains(r.stderr, "3 matches; 3 sessions searched (3 copies; 3 read from the remote") {
		t.Errorf("totals: %q", r.stderr)
	}
	// One of each is said in the singular.
	if r := e.run("grep", "line 3 of title 1", ambIDs[1]); r.code != 0 || !strings.Contains(r.stderr, "1 match; 1 session searched (1 copy; ") {
		t.Errorf("one match: exit %d, totals %q", r.code, r.stderr)
	}
	// Again: nothing read.
	if r := e.run("grep", "LINE 3", "-i"); r.code != 0 || strings.Count(r.stdout, "\n") != 3 || !strings.Contains(r.stderr, "0 read from the remote") {
		t.Errorf("second run: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	r = e.run("grep", "--json", "--regexp", `^line [02] of title 2$`, "019a0001")
	if r.code != exitFailure || !strings.Contains(r.stderr, "ambiguous") {
		t.Errorf("an ambiguous prefix: exit %d, %q", r.code, r.stderr)
	}
	r = e.run("grep", "--json", "--regexp", `^line [02] of title 2$`, ambIDs[2])
	var got []restore.GrepMatch
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m restore.GrepMatch
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("--json: %v in %q", err, l)
		}
		got = append(got, m)
	}
	if r.code != 0 || len(got) != 2 || got[0].Entry != "00000001" || got[0].Role != "user" || got[1].Text != "line 2 of title 2" || got[0].Machines[0] != "laptop" {
		t.Errorf("--json --regexp: exit %d, %+v", r.code, got)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"grep", "no such words"}, exitFailure, "ompsync: no line matches"},
		{[]string{"grep", "line", "--since", "0s"}, exitFailure, "no line matches"},
		{[]string{"grep", ""}, exitUsage, "empty pattern"},
		{[]string{"grep", "(", "--regexp"}, exitUsage, "pattern"},
		{[]string{"grep", "x", "--since", "soon"}, exitUsage, "--since"},
		{[]string{"grep"}, exitUsage, ""},
	} {
		r := e.run(tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
	if r := e.run("-q", "grep", "line 3 of title"); r.code != 0 || strings.Count(r.stdout, "\n") != 3 || r.stderr != "" {
		t.Errorf("-q: exit %d, stderr %q", r.code, r.stderr)
	}
	// No cache: the same answer.
	e.env["OMPSYNC_SEARCH_CACHE_SIZE"] = "0"
	if r := e.run("grep", "line 3 of title"); r.code != 0 || strings.Count(r.stdout, "\n") != 3 || !strings.Contains(r.stderr, "3 read from the remote") {
		t.Errorf("without a cache: exit %d, %q", r.code, r.stderr)
	}
}

// grep searches every agent's sessions the remote holds, each agent's cache
// in its own state dir; a match names its agent, and --agent narrows.
func TestGrepEveryAgent(t *testing.T) {
	url := "file://" + t.TempDir() + "/remote"
	laptop := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	home := laptop.env["HOME"]
	plantClients(t, home)
	writeFile(t, filepath.Join(home, ".omp/agent/sessions/-work/2026-10-07T00-45-40-854Z_019a0007-0000-7000-8000-000000000001.jsonl"),
		string(synthSession("019a0007-0000-7000-8000-000000000001", "/home/u/work", "omp one", 2))+
			messageLine("0000abcd", "00000002", "user", "2026-10-07T02:00:00.000Z", "The tool said hello to omp too")+"", 0o600)
	if r := laptop.run("agent", "--once"); r.code != 0 {
		t.Fatalf("agent --once: exit %d\n%s", r.code, r.stderr)
	}
	desk := newRestoreEnv(t, url, backend.S3Options{}, "desk")
	r := desk.run("grep", "--json", "The tool said hello")
	agents := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m restore.GrepMatch
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: %q", err, l)
		}
		agents[m.Agent]++
	}
	if r.code != 0 || agents["omp"] != 1 || agents["pi"] != 1 {
		t.Fatalf("grep across agents: exit %d, matches by agent %v\n%s", r.code, agents, r.stderr)
	}
	for _, dir := range []string{"search", "agents/pi/search"} {
		if _, err := os.Stat(filepath.Join(desk.env["OMPSYNC_STATE_DIR"], dir)); err != nil {
			t.Errorf("no cache in %s: %v", dir, err)
		}
	}
	if r := desk.run("grep", "--agent", "pi", "The tool said hello"); r.code != 0 || strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stderr, "0 read from the remote") {
		t.Errorf("grep --agent pi: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}

// A copy whose new chunk is damaged: grep exits 1, one line names the
// session and the chunk, and the copy is searched as the cache had it
// (the line the damaged pass added not printed, nor anything of that
// pass); without a cache nothing of it is; no temp file is left.
func TestGrepDamaged(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	url := "file://" + t.TempDir()
	e := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	id := "019a0007-0000-7000-8000-00000000beef"
	rel := "sessions/-w/2026-10-07T00-45-40-000Z_" + id + ".jsonl"
	data := synthSession(id, "/home/u/w", "big", 2)
	data = append(data, messageLine("00000003", "00000002", "user", "2026-10-07T01:00:00.000Z", "the FIRST-marker")...)
	for i := 0; len(data) < 3<<20; i++ {
		data = append(data, messageLine(fmt.Sprintf("%08x", i+4), fmt.Sprintf("%08x", i+3), "assistant", "2026-10-07T01:00:00.000Z", strings.Repeat("output ", 100))...)
	}
	e.write(rel, data, mtime0)
	e.mustRun("agent", "--once")
	if r := e.mustRun("-q", "grep", "marker"); strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, "FIRST-marker") {
		t.Fatalf("before: %q", r.stdout)
	}
	first := len(data)
	data = append(data, messageLine("ffffffff", "00000002", "user", "2026-10-07T02:00:00.000Z", "the SECOND-marker")...)
	e.write(rel, data, mtime0)
	e.mustRun("agent", "--once")

	chunk := damageLastChunk(t, url, id, first)
	for _, cache := range []string{"1GiB", "0"} {
		e.env["OMPSYNC_SEARCH_CACHE_SIZE"] = cache
		r := e.run("-q", "grep", "marker")
		want := 1
		if cache == "0" {
			want = 0
		}
		if r.code != exitFailure || strings.Count(r.stdout, "\n") != want || want == 1 && !strings.Contains(r.stdout, "FIRST-marker") || strings.Contains(r.stdout, "SECOND") {
			t.Errorf("cache %s: exit %d, printed %q", cache, r.code, r.stdout)
		}
		var naming []string
		for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			if strings.Contains(l, "session "+id) && strings.Contains(l, "chunk "+chunk) {
				naming = append(naming, l)
			}
		}
		if len(naming) != 1 {
			t.Errorf("cache %s: stderr %q, want one line naming the session and the chunk", cache, r.stderr)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) > 0 {
		t.Errorf("grep left %v", left)
	}
}

// A line only an older copy holds (omp rewrote the session smaller, as
// its pruning does) is found, marked as the older copy's, in text and
// JSON; a line the current copy holds is not marked.
func TestGrepOlderCopy(t *testing.T) {
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	e := newRestoreEnv(t, url, backend.S3Options{}, "desk")
	id := "019a0007-0000-7000-8000-0000000000aa"
	rel := "sessions/-w/2026-10-07T00-45-40-000Z_" + id + ".jsonl"
	head := string(synthSession(id, "/home/u/w", "pruned later", 2))
	e.write(rel, []byte(head+messageLine("00000009", "00000002", "user", "2026-10-07T02:00:00.000Z", "the PRUNED-WORDS")), mtime0)
	e.mustRun("agent", "--once")
	e.replaceFile(rel, []byte(head+messageLine("00000009", "00000002", "user", "2026-10-07T02:00:00.000Z", "[pruned] KEPT-WORDS")))
	e.mustRun("agent", "--once")

	r := e.run("grep", "PRUNED-WORDS")
	if r.code != 0 || !strings.Contains(r.stdout, "[older copy] the PRUNED-WORDS") || !strings.Contains(r.stderr, "2 copies") {
		t.Errorf("grep of a line only the older copy holds: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = e.run("grep", "--json", "PRUNED-WORDS")
	var gm restore.GrepMatch
	if err := json.Unmarshal([]byte(r.stdout), &gm); r.code != 0 || err != nil || !gm.Older || gm.Session != id {
		t.Errorf("grep --json: exit %d, %+v %v", r.code, gm, err)
	}
	if r := e.run("grep", "KEPT-WORDS"); r.code != 0 || strings.Contains(r.stdout, "older copy") {
		t.Errorf("grep of the current copy's line: exit %d\n%s", r.code, r.stdout)
	}
}
