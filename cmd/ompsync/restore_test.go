package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
	"github.com/ompsync/ompsync/session"
)

// restoreEnv is one machine for in-process runs of the ompsync command.
type restoreEnv struct {
	t        *testing.T
	env      testEnv
	agentDir string
	url      string
	s3       backend.S3Options
}

func newRestoreEnv(t *testing.T, url string, s3 backend.S3Options, machine string) *restoreEnv {
	home := t.TempDir()
	e := &restoreEnv{t: t, agentDir: filepath.Join(home, ".omp", "agent"), url: url, s3: s3}
	e.env = testEnv{
		"HOME":              home,
		"OMPSYNC_AGENT_DIR": e.agentDir,
		"OMPSYNC_STATE_DIR": filepath.Join(home, "state"),
		"OMPSYNC_REMOTE":    url,
		"OMPSYNC_MACHINE":   machine,
	}
	if s3.Endpoint != "" {
		e.env["OMPSYNC_S3_CLIENT"] = s3.Client
		e.env["OMPSYNC_S3_ENDPOINT"] = s3.Endpoint
		e.env["OMPSYNC_S3_REGION"] = s3.Region
		e.env["OMPSYNC_S3_PATH_STYLE"] = "true"
		e.env["OMPSYNC_S3_ACCESS_KEY_ID"] = s3.AccessKeyID
		e.env["OMPSYNC_S3_SECRET_ACCESS_KEY"] = s3.SecretAccessKey
	}
	if v, ok := os.LookupEnv("AWS_CA_BUNDLE"); ok {
		e.env["AWS_CA_BUNDLE"] = v
	}
	if err := os.MkdirAll(filepath.Join(e.agentDir, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *restoreEnv) run(args ...string) result {
	e.t.Helper()
	return runWith(e.t, e.env, args...)
}

func (e *restoreEnv) path(rel string) string {
	return filepath.Join(e.agentDir, filepath.FromSlash(rel))
}

func (e *restoreEnv) write(rel string, data []byte, mtime time.Time) {
	e.t.Helper()
	writeFile(e.t, e.path(rel), string(data), 0o600)
	if err := os.Chtimes(e.path(rel), mtime, mtime); err != nil {
		e.t.Fatal(err)
	}
}

type corpusSession struct {
	id, rel string
	data    []byte
}

func corpusSessions(t *testing.T) []corpusSession {
	t.Helper()
	files, _ := filepath.Glob("../../testdata/corpus/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no corpus")
	}
	var out []corpusSession
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := session.ReadHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, corpusSession{id: h.ID, rel: "sessions/-.omp-work/2026-10-07T00-45-40-00" + string(rune('0'+i)) + "Z_" + h.ID + ".jsonl", data: b})
	}
	return out
}

var mtime0 = time.Date(2026, 10, 7, 1, 2, 3, 456789000, time.UTC)

// The commands a user runs on their worst day, on every kind of remote:
// back up, lose a session, find it with ls, restore it by a prefix, verify.
func TestRestoreCommands(t *testing.T) {
	t.Parallel()
	forEachRemote(t, func(t *testing.T, url string, s3 backend.S3Options) {
		e := newRestoreEnv(t, url, s3, "laptop")
		files := corpusSessions(t)
		for i, f := range files {
			e.write(f.rel, f.data, mtime0.Add(time.Duration(i)*time.Minute))
		}
		if r := e.run("agent", "--once"); r.code != 0 {
			t.Fatalf("agent --once: %d %s", r.code, r.stderr)
		}
		lost := files[0]
		if err := os.Remove(e.path(lost.rel)); err != nil {
			t.Fatal(err)
		}

		// ls: every session, newest first, as JSON lines.
		r := e.run("ls", "--json")
		if r.code != 0 {
			t.Fatalf("ls: %d %s", r.code, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != len(files) {
			t.Fatalf("ls listed %d sessions, want %d:\n%s", len(lines), len(files), r.stdout)
		}
		var first restore.Listing
		if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
			t.Fatal(err)
		}
		if first.ID != files[len(files)-1].id || first.Machines[0] != "laptop" || first.State != repo.StatePresent {
			t.Errorf("ls first line %+v, want the newest session", first)
		}
		if r := e.run("ls"); r.code != 0 || !strings.Contains(r.stdout, lost.id) || !strings.HasPrefix(r.stdout, "ID ") {
			t.Errorf("ls table: %d %q", r.code, r.stdout)
		}

		// restore by 8 upper-case characters.
		r = e.run("restore", strings.ToUpper(lost.id[:8]))
		if r.code != 0 {
			t.Fatalf("restore: %d %s %s", r.code, r.stdout, r.stderr)
		}
		if !strings.HasPrefix(r.stdout, "created") || !strings.Contains(r.stdout, lost.rel) {
			t.Errorf("restore said %q", r.stdout)
		}
		got, err := os.ReadFile(e.path(lost.rel))
		if err != nil || !bytes.Equal(got, lost.data) {
			t.Fatalf("restored file: %v, %d bytes, want %d", err, len(got), len(lost.data))
		}
		if fi, _ := os.Stat(e.path(lost.rel)); !fi.ModTime().Equal(mtime0) {
			t.Errorf("mtime %v, want %v", fi.ModTime(), mtime0)
		}

		// verify: all sound and the same as the local files.
		r = e.run("verify")
		if r.code != 0 || strings.Count(r.stdout, "\nok ") != len(files)-1 || !strings.Contains(r.stdout, "laptop: local same") {
			t.Errorf("verify: %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	})
}

func TestRestoreCommandExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := "file://" + filepath.Join(dir, "remote")
	e := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	files := corpusSessions(t)
	for _, f := range files {
		e.write(f.rel, f.data, mtime0)
	}
	if r := e.run("agent", "--once"); r.code != 0 {
		t.Fatalf("agent --once: %d %s", r.code, r.stderr)
	}
	other := newRestoreEnv(t, url, backend.S3Options{}, "desktop")

	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"restore"}, exitUsage, "give a session id prefix"},
		{[]string{"restore", "--all", "01a1"}, exitUsage, "not both"},
		{[]string{"restore", "--include-deleted", "01a1"}, exitUsage, "--include-deleted goes with --all"},
		{[]string{"restore", "--path-map", "relative=/x", "--all"}, exitUsage, "not an absolute folder"},
		{[]string{"restore", "--generation", "zz", "--all"}, exitUsage, "16 hex digits"},
		{[]string{"restore", "deadbeef"}, exitFailure, `no session id starts with "deadbeef"`},
		{[]string{"restore", "--machine", "nosuch", "01a113"}, exitFailure, `machine "nosuch" has no catalog`},
		{[]string{"ls", "extra"}, exitUsage, ""},
	} {
		r := other.run(tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.stderr)
		}
		if tc.code == exitFailure {
			oneErrorLine(t, r)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(other.agentDir, "sessions")); len(entries) != 0 {
		t.Fatalf("refused restores wrote %d entries", len(entries))
	}

	// A live file is skipped (exit 1) until --force.
	f := files[0]
	prefixLen := bytes.IndexByte(f.data[300:], '\n') + 301
	other.write(f.rel, f.data[:prefixLen], mtime0)
	lock := filepath.Join(filepath.Dir(other.path(f.rel)), "."+filepath.Base(f.rel)+".lock")
	writeFile(t, lock, "", 0o600)
	r := other.run("restore", f.id[:8])
	if r.code != exitFailure || !strings.HasPrefix(r.stdout, "skipped") || !strings.Contains(r.stdout, "--force") {
		t.Errorf("live file: exit %d, stdout %q", r.code, r.stdout)
	}
	if got, _ := os.ReadFile(other.path(f.rel)); len(got) != prefixLen {
		t.Fatalf("live file changed")
	}
	r = other.run("restore", "--force", "--json", f.id[:8])
	var res restore.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 0 || err != nil || res.Action != restore.Appended || res.ID != f.id {
		t.Errorf("--force --json: exit %d, %q, %v", r.code, r.stdout, err)
	}

	// --dry-run --all --to: says what it would do, writes nothing.
	to := filepath.Join(t.TempDir(), "new")
	r = other.run("restore", "--all", "--dry-run", "--to", to)
	if r.code != 0 || strings.Count(r.stdout, "would create") != len(files) {
		t.Errorf("dry run: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(to); !os.IsNotExist(err) {
		t.Errorf("dry run created %s", to)
	}
	// And for real.
	if r = other.run("restore", "--all", "--to", to, "--machine", "laptop"); r.code != 0 {
		t.Errorf("restore --all --to: %d %s", r.code, r.stderr)
	}
	for _, f := range files {
		if got, _ := os.ReadFile(filepath.Join(to, filepath.FromSlash(f.rel))); !bytes.Equal(got, f.data) {
			t.Errorf("%s not restored into --to", f.rel)
		}
	}

	// verify fails on a damaged chunk.
	client, err := backend.Open(context.Background(), url, backend.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	rp := repo.New(client, repo.NewZstd())
	invs, err := rp.Inventory(context.Background(), f.id, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	g := invs[0].Newest()
	if err := client.Put(context.Background(), invs[0].Stream.ChunkKey(g.Name, g.Chunks[0].Start, g.Chunks[0].End), []byte("damaged"), remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	r = other.run("verify", f.id[:8])
	if r.code != exitFailure || !strings.Contains(r.stdout, "DAMAGED") {
		t.Errorf("verify of a damaged chunk: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = other.run("restore", "--to", t.TempDir(), f.id[:8])
	if r.code != exitFailure || !strings.HasPrefix(r.stdout, "refused") {
		t.Errorf("restore of a damaged chunk: %d %q %q", r.code, r.stdout, r.stderr)
	}
}
