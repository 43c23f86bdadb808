package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/session"
)

// The names omp gives its sidecars are never backed up as sessions; its
// blob links are blobs; the archive's artifact folder holds artifacts.
func TestClassifyOmpNames(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for rel, want := range map[string]Kind{
		"sessions/-work/2026-10-07T00-45-40-854Z_01a1.jsonl":              KindSession,
		"sessions/-work/.2026-10-07T00-45-40-854Z_01a1.jsonl.lock":        KindIgnored, // omp's append lock
		"sessions/-work/2026-10-07T00-45-40-854Z_01a1.jsonl.lock":         KindIgnored, // pi-utils file-lock
		"sessions/-work/2026-10-07T00-45-40-854Z_01a1.jsonl.lock.os":      KindIgnored, // macOS OS lock
		"sessions/-work/.2026-10-07T00-45-40-854Z_01a1.jsonl.1234567.tmp": KindIgnored, // whole-file rewrite
		"sessions/-work/2026-10-07T00-45-40-854Z_01a1.jsonl.1234567.bak":  KindIgnored, // EPERM rename, no dot
		"sessions/-work/2026-10-07T00-45-40-854Z_01a1/tool-1.log":         KindArtifact,
		"blobs/" + sha:          KindBlob,
		"blobs/" + sha + ".png": KindBlob,
		"archive/sessions/-work/2026-10-07T00-45-40-854Z_01a1.jsonl.gz":         KindArchive,
		"archive/sessions/-work/2026-10-07T00-45-40-854Z_01a1.jsonl.gz.9.1.tmp": KindIgnored,
		"archive/sessions/-work/2026-10-07T00-45-40-854Z_01a1.jsonl":            KindArchive, // older omp: plain
		"archive/sessions/-work/2026-10-07T00-45-40-854Z_01a1/tool-1.log":       KindArtifact,
		"archive/sessions/-work/2026-10-07T00-45-40-854Z_01a1/sub/a.jsonl":      KindArtifact,
		"archive/sessions/-work/2026-10-07T00-45-40-854Z_01a1.txt":              KindIgnored,
		"auth.json": KindIgnored,
		"agent.db":  KindIgnored,
	} {
		if got := OMP().Classify(rel); got != want {
			t.Errorf("Classify(%q) = %v, want %v", rel, got, want)
		}
	}
	if b, e, ok := repo.BlobLink(sha + ".png"); !ok || b != sha || e != "png" {
		t.Errorf("BlobLink(<sha>.png) = %q %q %v", b, e, ok)
	}
	for _, name := range []string{sha, sha + ".", sha + ".PNG", "abc.png", sha + ".png.tmp"} {
		if _, _, ok := repo.BlobLink(name); ok {
			t.Errorf("BlobLink(%q) = ok", name)
		}
	}
}

// An artifact folder gc moved into the archive feeds the stream it fed
// while live, and goes back beside the live session file; a plain archive
// of older omp was the same live file as a gzipped one.
func TestOmpArchivedArtifacts(t *testing.T) {
	const name = "2026-10-07T00-45-40-854Z_01a113d2-be76-73c7-986b-d3ac6e3fbb83"
	const id = "01a113d2-be76-73c7-986b-d3ac6e3fbb83"
	for _, rel := range []string{"sessions/-work/" + name + "/sub/x.jsonl", "archive/sessions/-work/" + name + "/sub/x.jsonl"} {
		if gotID, inner, ok := OMP().Artifact(rel); !ok || gotID != id || inner != "sub/x.jsonl" {
			t.Errorf("Artifact(%q) = %q %q %v, want %q sub/x.jsonl", rel, gotID, inner, ok, id)
		}
	}
	if out, ok := OMP().ArtifactRel("sessions/-work/"+name+".jsonl", "sub/x.jsonl"); !ok || out != "sessions/-work/"+name+"/sub/x.jsonl" {
		t.Errorf("ArtifactRel = %q %v", out, ok)
	}
	if _, ok := OMP().ArtifactRel("archive/sessions/-work/"+name+".jsonl", "x.log"); ok {
		t.Error("ArtifactRel of an archive path: ok, want a session path only")
	}
	for _, rel := range []string{"archive/sessions/-work/" + name + ".jsonl.gz", "archive/sessions/-work/" + name + ".jsonl"} {
		if gotID, live, ok := OMP().Archived(rel); !ok || gotID != id || live != "sessions/-work/"+name+".jsonl" {
			t.Errorf("Archived(%q) = %q %q %v", rel, gotID, live, ok)
		}
	}
	if k := Pi().Classify("archive/sessions/-work/" + name + "/x.log"); k != KindIgnored {
		t.Errorf("pi archive artifact: %v, want ignored (pi keeps no archive)", k)
	}
}

// A session its agent has not titled is shown by the first thing the user
// typed (as Claude Code's and Codex's are); a title, omp's slot or the
// header's, wins over it. Only whole lines count: a prompt still being
// written is not a title yet.
func TestUntitledSessionTitledByFirstPrompt(t *testing.T) {
	slot := func(title string) string {
		l := `{"type":"title","v":1,"title":"` + title + `","updatedAt":"2026-10-07T00:45:40.854Z","pad":"`
		return l + strings.Repeat(" ", session.TitleSlotSize-len(l)-3) + "\"}\n"
	}
	const header = `{"type":"session","version":3,"id":"01a113d2-be76-73c7-986b-d3ac6e3fbb83","timestamp":"2026-10-07T00:45:40.854Z","cwd":"/w"}` + "\n"
	const skill = `{"type":"custom_message","customType":"skill-prompt","content":"[IMPORTANT: User invoked a skill]","id":"a0","parentId":null}` + "\n"
	const prompt = `{"type":"message","id":"a1","parentId":"a0","message":{"role":"user","content":[{"type":"text","text":"Fix the login bug,\n  then   run the tests"}]}}` + "\n"
	const typed = `{"type":"message","id":"a1","parentId":null,"message":{"role":"user","content":"` + "Résumé the docs" + `"}}` + "\n"
	long := `{"type":"message","id":"a2","parentId":null,"message":{"role":"user","content":"` + strings.Repeat("word ", 40) + `"}}` + "\n"
	for _, tc := range []struct {
		name string
		st   *Store
		head string
		want string
	}{
		{"omp untitled", OMP(), slot("") + header + skill + prompt, "Fix the login bug, then run the tests"},
		{"omp titled", OMP(), slot("Login fix") + header + prompt, "Login fix"},
		{"omp string content", OMP(), slot("") + header + typed, "Résumé the docs"},
		{"omp long prompt", OMP(), slot("") + header + long, strings.Repeat("word ", 16)[:79] + "…"},
		{"omp prompt not whole yet", OMP(), slot("") + header + strings.TrimSuffix(prompt, "\n"), ""},
		{"omp no prompt", OMP(), slot("") + header + skill, ""},
		{"pi untitled", Pi(), header + prompt, "Fix the login bug, then run the tests"},
	} {
		info, ok := tc.st.Describe([]byte(tc.head))
		if !ok || info.Title != tc.want || info.Cwd != "/w" {
			t.Errorf("%s: Describe = %+v, %v; want title %q", tc.name, info, ok, tc.want)
		}
	}
}

// Describe of an untitled session's 64 KiB head, the most the agent reads
// when a generation begins, with no prompt in it: every restore and every
// new generation describes a head. Lines that cannot be a user's message
// are passed over unparsed.
//
//	go test -run '^$' -bench DescribeUntitled ./store/
func BenchmarkDescribeUntitled(b *testing.B) {
	head := []byte(`{"type":"session","version":3,"id":"01a113d2-be76-73c7-986b-d3ac6e3fbb83","timestamp":"2026-10-07T00:45:40.854Z","cwd":"/w"}` + "\n")
	for i := 0; len(head) < 64<<10; i++ {
		head = fmt.Appendf(head, `{"type":"message","id":"b%d","parentId":null,"message":{"role":"toolResult","content":[{"type":"text","text":"%s"}]}}`+"\n",
			i, strings.Repeat(`line of output, \"quoted\" \\ escaped\n`, 40))
	}
	b.SetBytes(int64(len(head)))
	for b.Loop() {
		if info, ok := OMP().Describe(head); !ok || info.Title != "" {
			b.Fatalf("Describe = %+v, %v", info, ok)
		}
	}
}
