package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/restore"
)

// replaceFile rewrites a file whole through a temp file and a rename, as
// omp does.
func (e *restoreEnv) replaceFile(rel string, data []byte) {
	e.t.Helper()
	tmp := e.path(rel) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, e.path(rel)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *restoreEnv) mustRun(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// The story through the commands a user runs, on every remote,
// with encryption off and on: a session rewritten twice (omp's pruning),
// continued on a second machine, deleted on the first. history shows every
// copy; at a time between each step and the next, restore --at and cat
// --at give exactly the bytes the backup held then.
func TestHistoryAndPointInTime(t *testing.T) {
	t.Parallel()
	forEachRemote(t, func(t *testing.T, url string, s3 backend.S3Options) {
		for _, encrypted := range []bool{false, true} {
			t.Run(fmt.Sprintf("encrypted=%v", encrypted), func(t *testing.T) {
				t.Parallel() // each under a prefix of its own
				pointInTime(t, url+map[bool]string{false: "/plain", true: "/enc"}[encrypted], s3, encrypted)
			})
		}
	})
}

func pointInTime(t *testing.T, url string, s3 backend.S3Options, encrypted bool) {
	desk := newRestoreEnv(t, url, s3, "desk")
	laptop := newRestoreEnv(t, url, s3, "laptop")
	if encrypted {
		key, _ := keygen(t, desk.env, filepath.Join(t.TempDir(), "age.key"))
		desk.env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = key
		laptop.env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = key
	}
	id := "019a0005-0000-7000-8000-00000000beef"
	rel := "sessions/-w/2026-10-07T00-45-40-000Z_" + id + ".jsonl"
	// A second session keeps desk's folder from looking unmounted.
	desk.write("sessions/-w/2026-10-07T00-45-40-001Z_019a0006-0000-7000-8000-000000000001.jsonl",
		synthSession("019a0006-0000-7000-8000-000000000001", "/home/u/w", "bystander", 2), mtime0)

	line := func(n int, text string) string {
		return messageLine(fmt.Sprintf("%08x", n), fmt.Sprintf("%08x", n-1), []string{"assistant", "user"}[n%2], "2026-10-07T01:00:00.000Z", text)
	}
	type step struct {
		at     time.Time
		merged []byte
		desk   []byte
	}
	var steps []step
	// Each step's time lies after its upload and before the next begins.
	mark := func(deskCopy, merged []byte) {
		time.Sleep(20 * time.Millisecond)
		steps = append(steps, step{at: time.Now(), merged: bytes.Clone(merged), desk: bytes.Clone(deskCopy)})
		time.Sleep(20 * time.Millisecond)
	}
	data := []byte(slotLine("told twice") + fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-10-07T00:45:40.854Z","cwd":"/home/u/w"}`+"\n", id) +
		line(1, "run the tests") + line(2, strings.Repeat("tool output ", 40)))
	desk.write(rel, data, mtime0)
	desk.mustRun("agent", "--once")
	mark(data, data)

	data = append(data, line(3, "step two")+line(4, "done two")...)
	desk.write(rel, data, mtime0)
	desk.mustRun("agent", "--once")
	mark(data, data)

	data = []byte(strings.Replace(string(data), strings.Repeat("tool output ", 40), "[pruned]", 1))
	desk.replaceFile(rel, data)
	desk.mustRun("agent", "--once")
	mark(data, data)

	data = append(data, line(5, "step four")+line(6, "done four")...)
	desk.write(rel, data, mtime0)
	desk.mustRun("agent", "--once")
	mark(data, data)

	data = []byte(strings.Replace(string(data), "done four", "DONE FOUR, retried", 1))
	desk.replaceFile(rel, data)
	desk.mustRun("agent", "--once")
	mark(data, data)
	deskLast := bytes.Clone(data)

	laptop.mustRun("restore", id[:13])
	more := append(bytes.Clone(data), line(7, "on the laptop")+line(8, "done there")...)
	laptop.write(rel, more, mtime0)
	laptop.mustRun("agent", "--once")
	mark(deskLast, more)

	if err := os.Remove(desk.path(rel)); err != nil {
		t.Fatal(err)
	}
	desk.mustRun("agent", "--once", "--confirm-deletions")
	mark(deskLast, more)

	// history: every copy.
	var h restore.SessionHistory
	r := laptop.mustRun("history", "--json", id[:13])
	if err := json.Unmarshal([]byte(r.stdout), &h); err != nil {
		t.Fatal(err)
	}
	type row struct {
		machine, reason, state string
		current                bool
		bytes                  int
	}
	want := []row{
		{"desk", "new", "", false, len(steps[1].desk)},
		{"desk", "shrank", "", false, len(steps[3].desk)},
		{"desk", "rewritten", "deleted", true, len(deskLast)},
		{"laptop", "new", "present", true, len(more)},
	}
	var got []row
	for _, c := range h.Copies {
		got = append(got, row{c.Machine, c.Reason, c.State, c.Current, int(c.Bytes)})
		if c.Path != rel || c.Title != "told twice" || c.LastUpload.IsZero() {
			t.Errorf("copy %+v", c)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("history:\n%v\nwant\n%v", got, want)
	}
	text := laptop.mustRun("history", id[:13]).stdout
	for _, w := range []string{"desk", "laptop", "shrank", "rewritten", "current, deleted", "superseded", "told twice"} {
		if !strings.Contains(text, w) {
			t.Errorf("history lacks %q:\n%s", w, text)
		}
	}

	// At each step: what the backup held.
	for i, s := range steps {
		at := s.at.Format(time.RFC3339Nano)
		to := t.TempDir()
		laptop.mustRun("restore", "--at", at, "--to", to, id)
		if got, err := os.ReadFile(filepath.Join(to, filepath.FromSlash(rel))); err != nil || !bytes.Equal(got, s.merged) {
			t.Errorf("step %d: restore --at gave %d bytes (%v), the file had %d", i+1, len(got), err, len(s.merged))
		}
		if r := laptop.mustRun("cat", "--at", at, id); r.stdout != string(s.merged) {
			t.Errorf("step %d: cat --at gave %d bytes, want %d", i+1, len(r.stdout), len(s.merged))
		}
		if r := laptop.mustRun("cat", "--at", at, "--machine", "desk", id); r.stdout != string(s.desk) {
			t.Errorf("step %d: cat --at --machine desk gave %d bytes, want %d", i+1, len(r.stdout), len(s.desk))
		}
	}
	if r := laptop.mustRun("cat", "--at", "0s", id); r.stdout != string(more) {
		t.Errorf("cat --at 0s: %d bytes, want %d", len(r.stdout), len(more))
	}
	before := steps[0].at.Add(-time.Hour).Format(time.RFC3339)
	if r := laptop.run("cat", "--at", before, id); r.code != exitFailure || !strings.Contains(r.stderr, "held no copy of it at") || r.stdout != "" {
		t.Errorf("cat --at before the first upload: exit %d, %q", r.code, r.stderr)
	}
	// A restore of then says there was no copy, not that one failed a check.
	if r := laptop.run("restore", "--at", before, "--to", t.TempDir(), id); r.code != exitFailure || !strings.Contains(r.stdout+r.stderr, "no copy then") ||
		!strings.Contains(r.stdout+r.stderr, "1 had no copy on the remote at that time") || strings.Contains(r.stdout+r.stderr, "failed a check") {
		t.Errorf("restore --at before the first upload: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := laptop.run("cat", "--at", "yesterday", id); r.code != exitUsage || !strings.Contains(r.stderr, "RFC 3339") {
		t.Errorf("cat --at yesterday: exit %d, %q", r.code, r.stderr)
	}
}
