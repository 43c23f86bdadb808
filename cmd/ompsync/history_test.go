package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/restore"
)

func TestHistoryCommand(t *testing.T) {
	url, rels := ambiguousRemote(t)
	e := newRestoreEnv(t, url, backend.S3Options{}, "desktop")
	r := e.run("history", rels[0])
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("history: exit %d, %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 3 || lines[0] != "session "+ambIDs[0]+": 1 copy" || !strings.HasPrefix(lines[1], "MACHINE") {
		t.Fatalf("history output:\n%s", r.stdout)
	}
	for _, want := range []string{"laptop", " new ", "current", "title 0", rels[0]} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("row %q lacks %q", lines[2], want)
		}
	}

	r = e.run("history", "--json", "--latest", "019a0001")
	var h restore.SessionHistory
	if err := json.Unmarshal([]byte(r.stdout), &h); r.code != 0 || err != nil {
		t.Fatalf("history --json: exit %d, %v, %q", r.code, err, r.stderr)
	}
	if h.ID != ambIDs[1] || len(h.Copies) != 1 || !h.Copies[0].Current || h.Copies[0].Reason != "new" || h.Copies[0].Title != "title 1" {
		t.Errorf("history --json --latest: %+v", h)
	}

	r = e.run("history", "019a0001")
	if r.code != exitFailure || !strings.Contains(r.stderr, "matches 3 sessions, newest first") {
		t.Errorf("ambiguous history: exit %d, %q", r.code, r.stderr)
	}
	if r := e.run("history"); r.code != exitUsage {
		t.Errorf("history without a prefix: exit %d", r.code)
	}
}

// A rekey rewrites every object of the remote; history still says when the
// session's bytes were uploaded, as their upload marks do, not when the
// rekey rewrote them.
func TestHistoryLastUploadSurvivesRekey(t *testing.T) {
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	e := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	f := corpusSessions(t)[0]
	e.write(f.rel, f.data, mtime0)
	before := time.Now().Truncate(time.Millisecond) // marks are in milliseconds
	if r := e.run("agent", "--once"); r.code != 0 {
		t.Fatalf("agent --once: %d %s", r.code, r.stderr)
	}
	after := time.Now()
	key, _ := keygen(t, e.env, filepath.Join(t.TempDir(), "age.key"))
	e.env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = key
	if r := e.run("rekey", "--settle=0"); r.code != 0 || !strings.Contains(r.stdout, "re-encrypted") {
		t.Fatalf("rekey: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r := e.run("history", "--json", f.id)
	var h restore.SessionHistory
	if err := json.Unmarshal([]byte(r.stdout), &h); r.code != 0 || err != nil || len(h.Copies) != 1 {
		t.Fatalf("history --json: exit %d, %v, %q", r.code, err, r.stderr)
	}
	if at := h.Copies[0].LastUpload; at.Before(before) || at.After(after) {
		t.Errorf("last upload %v after a rekey; the upload was between %v and %v", at, before, after)
	}
}
