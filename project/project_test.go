package project

import (
	"bytes"
	"context"
	"github.com/ompsync/ompsync/internal/testkit/writetest"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNormalizeOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/acme/app.git":                      "github.com/acme/app",
		"https://user:s3cr3t-token@GitHub.com/acme/app.git":    "github.com/acme/app",
		"https://x-access-token:ghp_ab/cd@github.com/acme/app": "github.com/acme/app",
		"git@github.com:acme/app.git":                          "github.com/acme/app",
		"deploy:tok3n@github.com:acme/app.git":                 "github.com/acme/app",
		"ssh://git@github.com:22/acme/app/":                    "github.com/acme/app",
		"file:///srv/git/app.git":                              "/srv/git/app",
		"/srv/git/app.git":                                     "/srv/git/app",
		"":                                                     "",
	} {
		got := NormalizeOrigin(in)
		if got != want {
			t.Errorf("NormalizeOrigin(%q) = %q, want %q", in, got, want)
		}
		for _, secret := range []string{"s3cr3t", "tok3n", "ghp_"} {
			if strings.Contains(got, secret) {
				t.Errorf("NormalizeOrigin(%q) kept the credential: %q", in, got)
			}
		}
	}
}

// gitRepo makes a real git repository at dir with origin url (none when "").
func gitRepo(t *testing.T, dir, url string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	if url != "" {
		git("remote", "add", "origin", url)
	}
}

func TestIdentify(t *testing.T) {
	home := t.TempDir()
	app := filepath.Join(home, "src", "app")
	gitRepo(t, app, "https://bob:hunter2@github.com/acme/app.git")
	sub := filepath.Join(app, "cmd", "tool")
	os.MkdirAll(sub, 0o755)
	if got, want := Identify(sub, home), (ID{Origin: "github.com/acme/app", Path: "cmd/tool", Home: "src/app/cmd/tool"}); got != want {
		t.Errorf("Identify(sub) = %+v, want %+v", got, want)
	}
	if got, want := Identify(app, home), (ID{Origin: "github.com/acme/app", Home: "src/app"}); got != want {
		t.Errorf("Identify(top) = %+v, want %+v", got, want)
	}
	// No origin: the repository says nothing about the project.
	bare := filepath.Join(home, "scratch")
	gitRepo(t, bare, "")
	if got, want := Identify(bare, home), (ID{Home: "scratch"}); got != want {
		t.Errorf("Identify(no origin) = %+v, want %+v", got, want)
	}
	// A folder that is not here: only the home-relative part.
	if got, want := Identify(filepath.Join(home, "gone"), home), (ID{Home: "gone"}); got != want {
		t.Errorf("Identify(gone) = %+v", got)
	}
	// Outside the home, not a repository: nothing.
	if got := Identify(t.TempDir(), home); !got.Zero() {
		t.Errorf("Identify(elsewhere) = %+v", got)
	}
	// A worktree's .git file leads to the main repository's config.
	wt := filepath.Join(home, "wt")
	cmd := exec.Command("git", "-C", app, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, err := exec.Command("git", "-C", app, "worktree", "add", "-q", wt).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if got := Identify(wt, home); got.Origin != "github.com/acme/app" {
		t.Errorf("Identify(worktree) = %+v", got)
	}
	// A symlink to the checkout is the checkout.
	link := filepath.Join(home, "link")
	os.Symlink(app, link)
	if got := Identify(link, home); got.Origin != "github.com/acme/app" {
		t.Errorf("Identify(symlink) = %+v", got)
	}
}

func TestMappingRoundTrip(t *testing.T) {
	a := []byte(`{"type":"session","id":"x","cwd":"/home/alice/src/app"}` + "\n" +
		`{"cwd":"/home/alice/src/app/sub","type":"user","message":"cd /home/alice/src/app"}` + "\n" +
		`{"cwd":"/home/alice/src/application","x":1}` + "\n" +
		`{"type":"tool","arguments":"{\"cwd\":\"/home/alice/src/app\"}"}` + "\n")
	m := Mapping{From: "/home/alice/src/app", To: "/home/bob/code/app"}
	b := writetest.Through(a, m.Writer)
	want := []byte(`{"type":"session","id":"x","cwd":"/home/bob/code/app"}` + "\n" +
		`{"cwd":"/home/bob/code/app/sub","type":"user","message":"cd /home/alice/src/app"}` + "\n" +
		`{"cwd":"/home/alice/src/application","x":1}` + "\n" +
		`{"type":"tool","arguments":"{\"cwd\":\"/home/alice/src/app\"}"}` + "\n")
	if !bytes.Equal(b, want) {
		t.Fatalf("mapped:\n%s\nwant:\n%s", b, want)
	}
	if back := writetest.Through(b, Mapping{From: m.To, To: m.From}.Writer); !bytes.Equal(back, a) {
		t.Fatalf("mapped back:\n%s\nwant the original:\n%s", back, a)
	}
	// Written a byte at a time, the same.
	var out bytes.Buffer
	w := m.Writer(&out)
	for i := range a {
		w.Write(a[i : i+1])
	}
	w.Close()
	if !bytes.Equal(out.Bytes(), want) || w.Written != int64(len(want)) || w.Changed != 2 {
		t.Fatalf("byte by byte: %d changed, %d written:\n%s", w.Changed, w.Written, out.Bytes())
	}
	// A Windows folder moves as a whole; its subfolders stay as recorded.
	win := []byte(`{"cwd":"C:\\Users\\ana\\app"}` + "\n" + `{"cwd":"C:\\Users\\ana\\app\\sub"}` + "\n")
	wm := Mapping{From: `C:\Users\ana\app`, To: "/home/ana/app"}
	got := writetest.Through(win, wm.Writer)
	if want := `{"cwd":"/home/ana/app"}` + "\n" + `{"cwd":"C:\\Users\\ana\\app\\sub"}` + "\n"; string(got) != want {
		t.Fatalf("windows: %s", got)
	}
	if back := writetest.Through(got, Mapping{From: wm.To, To: wm.From}.Writer); !bytes.Equal(back, win) {
		t.Fatalf("windows back: %s", back)
	}
}

func TestPlace(t *testing.T) {
	home := t.TempDir()
	recorded := "/home/alice/src/app"
	id := ID{Origin: "github.com/acme/app", Path: "sub", Home: "src/app/sub"}
	pl := &Placer{Home: home, Index: &Index{}}

	// Nothing matches: as recorded, with the fix.
	p := pl.Place(recorded+"/sub", id)
	if p.How != Recorded || p.Cwd != recorded+"/sub" || !strings.Contains(p.Note, "projects.roots") || !strings.Contains(p.Note, "path_map") {
		t.Errorf("no match: %+v", p)
	}
	// path_map.
	pl.Maps = []Mapping{{From: "/home/alice", To: filepath.Join(home, "mapped")}}
	if p := pl.Place(recorded+"/sub", id); p.How != PathMap || p.Cwd != filepath.Join(home, "mapped", "src", "app", "sub") {
		t.Errorf("path_map: %+v", p)
	}
	// The same folder under this home wins over path_map.
	os.MkdirAll(filepath.Join(home, "src", "app", "sub"), 0o755)
	if p := pl.Place(recorded+"/sub", id); p.How != HomePath || p.Cwd != filepath.Join(home, "src", "app", "sub") {
		t.Errorf("home: %+v", p)
	}
	// A checkout of the origin wins over both; with two, the one used last.
	older, newer := filepath.Join(home, "code", "app"), filepath.Join(home, "work", "app2")
	gitRepo(t, older, "git@github.com:acme/app.git")
	gitRepo(t, newer, "https://github.com/acme/app")
	os.MkdirAll(filepath.Join(newer, "sub"), 0o755)
	pl.Index = Scan(context.Background(), []string{home}, DefaultLimits())
	if len(pl.Index.Checkouts) != 2 {
		t.Fatalf("scan found %+v", pl.Index.Checkouts)
	}
	pl.Index.Add(newer, "github.com/acme/app", time.Now())
	p = pl.Place(recorded+"/sub", id)
	if p.How != InCheckout || p.Cwd != filepath.Join(newer, "sub") || !strings.Contains(p.Note, older) {
		t.Errorf("checkout: %+v", p)
	}
	// The recorded folder itself, when here, is taken as it is.
	if p := pl.Place(older, ID{Origin: "github.com/acme/app"}); p.How != SamePath || p.Cwd != older {
		t.Errorf("same: %+v", p)
	}
	// ... unless it is a checkout of another repository.
	if p := pl.Place(older, ID{Origin: "github.com/other/thing"}); p.How == SamePath || !strings.Contains(p.Note, older+" here is another repository's") {
		t.Errorf("another repository's folder taken, or its note does not say whose it is: %+v", p)
	}
	// Nor is the same folder under this home, when another repository's.
	gitRepo(t, filepath.Join(home, "src", "other"), "git@github.com:other/thing.git")
	if p := (&Placer{Home: home}).Place("/elsewhere/src/other", ID{Origin: "github.com/acme/app", Home: "src/other"}); p.How != Recorded || !strings.Contains(p.Note, "no checkout of github.com/acme/app") {
		t.Errorf("another repository's folder under this home taken: %+v", p)
	}
	// A home-relative part that climbs out is ignored.
	if p := (&Placer{Home: home}).Place("/x/y", ID{Home: "../../etc"}); p.How != Recorded {
		t.Errorf("climbing home part: %+v", p)
	}
}

func TestScanBounded(t *testing.T) {
	root := t.TempDir()
	for i := range 50 {
		os.MkdirAll(filepath.Join(root, "d", strings.Repeat("x", i%7+1), string(rune('a'+i%26))), 0o755)
	}
	gitRepo(t, filepath.Join(root, "deep", "a", "b", "c", "d", "e", "app"), "https://h/x")
	x := Scan(context.Background(), []string{root}, Limits{Depth: 4, Folders: 10, Time: time.Minute})
	if len(x.Problems) != 1 || !strings.Contains(x.Problems[0], "stopped after 10 folders") || !strings.Contains(x.Problems[0], root) {
		t.Errorf("problems = %q", x.Problems)
	}
	x = Scan(context.Background(), []string{root}, Limits{Depth: 4, Folders: 10000, Time: time.Minute})
	if len(x.Checkouts) != 0 || len(x.Problems) != 0 {
		t.Errorf("a checkout past the depth was found, or problems: %+v", x)
	}
	// A root that cannot be listed (here a file, which root cannot list
	// either) is named, not a failure.
	notDir := filepath.Join(root, "plain-file")
	os.WriteFile(notDir, []byte("x"), 0o600)
	x = Scan(context.Background(), []string{notDir}, Limits{Depth: 4, Folders: 10000, Time: time.Minute})
	if len(x.Problems) != 1 || !strings.Contains(x.Problems[0], "1 folders under "+notDir+" could not be read") {
		t.Errorf("a root that cannot be listed: %q", x.Problems)
	}
	// Out of time: said, with the root.
	x = Scan(context.Background(), []string{root}, Limits{Depth: 4, Folders: 10000, Time: 0})
	if len(x.Problems) != 1 || !strings.Contains(x.Problems[0], "stopped after 0s") {
		t.Errorf("out of time: %q", x.Problems)
	}
	if os.Geteuid() != 0 {
		locked := filepath.Join(root, "locked")
		os.MkdirAll(locked, 0o000)
		x = Scan(context.Background(), []string{root}, Limits{Depth: 4, Folders: 10000, Time: time.Minute})
		if len(x.Problems) != 1 || !strings.Contains(x.Problems[0], "could not be read") {
			t.Errorf("unreadable: %q", x.Problems)
		}
	}
}

func TestParseMap(t *testing.T) {
	for _, bad := range []string{"nope", "rel=/x", "/=/x", "/x=rel", `C:\=/x`} {
		if _, err := ParseMap(bad); err == nil {
			t.Errorf("ParseMap(%q) accepted", bad)
		}
	}
	m, err := ParseMap(`C:\Users\ana=/home/ana`)
	if err != nil {
		t.Fatal(err)
	}
	if to, ok := m.apply(`C:\Users\ana\src\app`); !ok || to != "/home/ana/src/app" {
		t.Errorf("apply = %q %v", to, ok)
	}
	if _, ok := m.apply(`C:\Users\anabel`); ok {
		t.Error("a sibling folder was mapped")
	}
}

// BenchmarkMappingWriter: what rewriting a copy's cwd costs a restore or
// pull that places it elsewhere (Claude Code's lines each hold one; omp's
// only the header): the corpus-like line shape, 64 KiB writes.
func BenchmarkMappingWriter(b *testing.B) {
	line := []byte(`{"parentUuid":"a","cwd":"/home/alice/src/app","sessionId":"s","type":"assistant","message":{"content":"` + strings.Repeat("x", 900) + `"}}` + "\n")
	var data []byte
	for len(data) < 4<<20 {
		data = append(data, line...)
	}
	m := Mapping{From: "/home/alice/src/app", To: "/home/bob/code/app"}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		w := m.Writer(io.Discard)
		for off := 0; off < len(data); off += 64 << 10 {
			w.Write(data[off:min(off+64<<10, len(data))])
		}
		w.Close()
	}
}
