package main

import (
	"encoding/json"
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
	if !strings.Contains(r.stderr, "3 matches in 3 sessions (3 copies; 3 read from the remote") {
		t.Errorf("totals: %q", r.stderr)
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
