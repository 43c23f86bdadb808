package safename

import (
	"path/filepath"
	"strings"
	"testing"
)

// inside reports whether rel, joined to a folder, stays inside it.
func inside(rel string) bool {
	root := filepath.FromSlash("/agent")
	p := filepath.Join(root, filepath.FromSlash(rel))
	r, err := filepath.Rel(root, p)
	return err == nil && r != "." && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) && !filepath.IsAbs(r)
}

// FuzzRelPath: a path RelPath accepts stays inside the folder it is joined
// to and is clean.
func FuzzRelPath(f *testing.F) {
	for _, p := range []string{"sessions/-w/a.jsonl", "../x", "a/../../b", "/etc/passwd", "a//b", "a/./b", "a\\..\\b", "a\x00b", "..", ".", "a/.."} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if !RelPath(p) {
			return
		}
		if !inside(p) {
			t.Fatalf("RelPath(%q) but it leaves the folder", p)
		}
		if filepath.ToSlash(filepath.Clean(filepath.FromSlash(p))) != p {
			t.Fatalf("RelPath(%q) but it is not clean", p)
		}
	})
}
