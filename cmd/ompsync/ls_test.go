package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ompsync/ompsync/remote/backend"
)

// ls cuts a long title and folder so that a line stays within 200
// columns; --wide prints them whole, with the file path.
func TestLsWide(t *testing.T) {
	url := "file://" + t.TempDir() + "/remote"
	e := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	id := "019a0009-0000-7000-8000-000000000009"
	cwd := "/home/u/" + strings.Repeat("very-long-folder-name/", 6) + "app"
	title := "a title that goes on " + strings.Repeat("and on ", 12)
	rel := "sessions/-w9/2026-10-07T00-45-40-009Z_" + id + ".jsonl"
	e.write(rel, synthSession(id, cwd, title, 2), mtime0)
	e.mustRun("agent", "--once")
	r := e.mustRun("ls")
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if n := utf8.RuneCountInString(l); n > 200 {
			t.Errorf("ls line of %d columns:\n%s", n, l)
		}
	}
	if strings.Count(r.stdout, "…") != 2 || !strings.Contains(r.stdout, "-name/app") || strings.Contains(r.stdout, rel) {
		t.Errorf("ls does not cut the long title and folder, or shows the path:\n%s", r.stdout)
	}
	r = e.mustRun("ls", "--wide")
	if !strings.Contains(r.stdout, cwd) || !strings.Contains(r.stdout, strings.TrimSpace(title)) || !strings.Contains(r.stdout, rel) || !strings.Contains(r.stdout, "PATH") {
		t.Errorf("ls --wide does not print every column whole:\n%s", r.stdout)
	}
}

// A projects.roots folder that cannot be searched is named in a note; the
// restore itself is done, exit 0. A path_map pair that is not one is a
// configuration error naming the key.
func TestProjectsRootsUnreadable(t *testing.T) {
	url, _ := ambiguousRemote(t)
	e := newRestoreEnv(t, url, backend.S3Options{}, "desktop")
	notDir := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(notDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.env["OMPSYNC_PROJECTS_ROOTS"] = notDir
	r := e.run("restore", "--all")
	if r.code != 0 || !strings.Contains(r.stderr, "ompsync: note: projects.roots: 1 folders under "+notDir+" could not be read") {
		t.Errorf("restore with an unreadable projects.roots: exit %d\n%s", r.code, r.stderr)
	}
	e.env["OMPSYNC_PATH_MAP"] = "relative=/x"
	if r := e.run("restore", "--all"); r.code != exitUsage && r.code != exitFailure || !strings.Contains(r.stderr, "path_map") || !strings.Contains(r.stderr, "not an absolute folder") {
		t.Errorf("a bad path_map: exit %d\n%s", r.code, r.stderr)
	}
}
