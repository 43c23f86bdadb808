package main

import (
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote/backend"
)

func TestCatCommand(t *testing.T) {
	url, rels := ambiguousRemote(t)
	e := newRestoreEnv(t, url, backend.S3Options{}, "desktop")
	want := string(synthSession(ambIDs[0], "/home/u/w0", "title 0", 4))
	if r := e.run("cat", rels[0]); r.code != 0 || r.stdout != want || r.stderr != "" {
		t.Errorf("cat: exit %d, %d bytes (want %d), %q", r.code, len(r.stdout), len(want), r.stderr)
	}
	if r := e.run("cat", "--machine", "laptop", strings.ToUpper(ambIDs[0])); r.code != 0 || r.stdout != want {
		t.Errorf("cat --machine: exit %d, %q", r.code, r.stderr)
	}
	r := e.run("cat", "--text", "--latest", "019a0001")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "session "+ambIDs[1]+"  title 1  (/home/u/w1)\n") ||
		!strings.Contains(r.stdout, "  user: line 0 of title 1\n") || !strings.Contains(r.stdout, "  assistant: line 3 of title 1\n") {
		t.Errorf("cat --text: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"cat", "--thinking", ambIDs[0]}, exitUsage, "--thinking goes with --text"},
		{[]string{"cat", "--generation", "xyz", ambIDs[0]}, exitUsage, "16 hex digits"},
		{[]string{"cat", "deadbeef"}, exitFailure, `no session id starts with "deadbeef"`},
		{[]string{"cat", "--generation", "0000000000000001", ambIDs[0]}, exitFailure, "has no generation 0000000000000001"},
		{[]string{"cat", "019a0001"}, exitFailure, "ambiguous: it matches 3 sessions"},
		{[]string{"cat"}, exitUsage, ""},
	} {
		r := e.run(tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d and %q", tc.args, r.code, r.stdout, r.stderr, tc.code, tc.want)
		}
	}
}
