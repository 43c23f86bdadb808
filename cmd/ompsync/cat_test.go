package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
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

// cat prints nothing before every byte it prints is verified: a copy of a
// few MiB (streamed through a temp file) with its last chunk damaged
// prints nothing, exits 1 with one line naming the chunk, and leaves no
// temp file; cat --at a time before that chunk was uploaded prints the
// bytes uploaded by then, the damaged chunk never read.
func TestCatDamaged(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	url := "file://" + t.TempDir()
	e := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	id := "019a0007-0000-7000-8000-00000000cafe"
	rel := "sessions/-w/2026-10-07T00-45-40-000Z_" + id + ".jsonl"
	data := synthSession(id, "/home/u/w", "big", 2)
	for i := 0; len(data) < 3<<20; i++ {
		data = append(data, messageLine(fmt.Sprintf("%08x", i+3), fmt.Sprintf("%08x", i+2), "assistant", "2026-10-07T01:00:00.000Z", strings.Repeat("output ", 100))...)
	}
	e.write(rel, data, mtime0)
	e.mustRun("agent", "--once")
	time.Sleep(20 * time.Millisecond)
	between := time.Now()
	time.Sleep(20 * time.Millisecond)
	first := len(data)
	data = append(data, messageLine("ffffffff", "00000002", "user", "2026-10-07T02:00:00.000Z", "one more")...)
	e.write(rel, data, mtime0)
	e.mustRun("agent", "--once")
	if r := e.mustRun("cat", id); r.stdout != string(data) {
		t.Fatalf("cat: %d bytes, want %d", len(r.stdout), len(data))
	}

	chunk := damageLastChunk(t, url, id, first)
	for _, args := range [][]string{{"cat", id}, {"cat", "--text", id}, {"restore", "--at", "0s", "--to", t.TempDir(), id}} {
		r := e.run(args...)
		if r.code != exitFailure || args[0] == "cat" && (r.stdout != "" || !strings.Contains(oneErrorLine(t, r), "chunk "+chunk)) {
			t.Errorf("%v of a damaged copy: exit %d, %d bytes printed, %q", args, r.code, len(r.stdout), r.stderr)
		}
	}
	if r := e.mustRun("cat", "--at", between.Format(time.RFC3339Nano), id); r.stdout != string(data[:first]) {
		t.Errorf("cat --at before the damaged chunk: %d bytes, want the %d uploaded by then", len(r.stdout), first)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) > 0 {
		t.Errorf("cat left %v", left)
	}
}

// damageLastChunk flips one byte of the body of the last chunk of the
// newest generation of session id that machine laptop put on the remote
// at url, under its intact header: what a disk or a transfer does, not a
// missing object. That chunk must hold the bytes from first on (a second
// pass's) alone. It returns the chunk's name, as errors name it.
func damageLastChunk(t *testing.T, url, id string, first int) string {
	t.Helper()
	ctx := context.Background()
	client, err := backend.Open(ctx, url, backend.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	rp := repo.New(client, repo.NewZstd())
	invs, err := rp.Inventory(ctx, id, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	g := invs[0].Newest()
	last := g.Chunks[len(g.Chunks)-1]
	if len(g.Chunks) < 2 || last.Start != int64(first) {
		t.Fatalf("chunks %+v: want the second pass's alone in the last", g.Chunks)
	}
	hdr, body, err := rp.GetChunk(ctx, invs[0].Stream, g.Name, last.Start, last.End)
	if err != nil {
		t.Fatal(err)
	}
	body[len(body)/2] ^= 1
	if _, err := rp.PutChunk(ctx, invs[0].Stream, g.Name, hdr, body, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	return repo.ChunkName(last.Start, last.End)
}
