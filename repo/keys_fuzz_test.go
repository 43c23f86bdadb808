package repo

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// inside reports whether rel, joined to a root folder, stays inside it.
func inside(rel string) bool {
	root := filepath.FromSlash("/agent")
	p := filepath.Join(root, filepath.FromSlash(rel))
	r, err := filepath.Rel(root, p)
	return err == nil && r != "." && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) && !filepath.IsAbs(r)
}

// FuzzParseSessionKey checks that whatever a remote lists, a key that parses
// names only safe segments and maps back to exactly itself, and an artifact
// path it yields stays inside the folder it is joined to.
func FuzzParseSessionKey(f *testing.F) {
	s := Stream{SessionID: "01a113d2-be76-73c7-986b-d3ac6e3fbb83", Machine: "laptop", Name: SessionStream}
	a := Stream{SessionID: "01a113d2-be76-73c7-986b-d3ac6e3fbb83", Machine: "laptop", Name: ArtifactStream("sub/agent 1.jsonl")}
	for _, k := range []string{
		s.MetaKey("0000000000000001"),
		s.HeadKey("0000000000000001"),
		s.ChunkKey("0000000000000001", 0, 4096),
		a.ChunkKey("18a2b3c4d5e6f708", 100, 200),
		"v1/sessions/x/laptop/artifacts/..%2F..%2Fetc%2Fpasswd/0000000000000001/meta",
		"v1/sessions/../laptop/session/0000000000000001/meta",
		"v1/sessions/x/lap\x00top/session/0000000000000001/0000000000000000-0000000000000001",
		"v1/sessions/x/laptop/artifacts/a%5Cb/0000000000000001/meta",
	} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		ref, err := ParseSessionKey(key)
		if err != nil {
			return
		}
		var back string
		switch ref.Object {
		case "meta":
			back = ref.Stream.MetaKey(ref.Generation)
		case "head":
			back = ref.Stream.HeadKey(ref.Generation)
		default:
			if ref.End <= ref.Start || ref.Start < 0 {
				t.Fatalf("%q: chunk range [%d, %d)", key, ref.Start, ref.End)
			}
			back = ref.Stream.ChunkKey(ref.Generation, ref.Start, ref.End)
		}
		if back != key {
			t.Fatalf("%q parses to a ref that names %q", key, back)
		}
		for _, seg := range []string{ref.Stream.SessionID, ref.Stream.Machine, ref.Generation} {
			if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "/\\\x00") {
				t.Fatalf("%q: unsafe segment %q", key, seg)
			}
		}
		if ref.Stream.Name != SessionStream {
			rel, ok := ArtifactPath(ref.Stream.Name)
			if !ok {
				t.Fatalf("%q: artifact stream %q has no path", key, ref.Stream.Name)
			}
			if !inside(rel) || !inside("sessions/d/x/"+rel) {
				t.Fatalf("%q: artifact path %q leaves its folder", key, rel)
			}
		}
	})
}

// FuzzEncodePath: any path, UTF-8 or not, is recorded as a UTF-8 string
// and read back as the same bytes; only marked paths change when recorded.
func FuzzEncodePath(f *testing.F) {
	for _, p := range []string{"sessions/-w/a.jsonl", "sessions/-caf\xe9/\xff\xfe.jsonl", "50%/x", "\x00%41", "", "ä/ö"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		enc := EncodePath(p)
		if !utf8.ValidString(enc) {
			t.Fatalf("EncodePath(%q) = %q, not UTF-8", p, enc)
		}
		if got := DecodePath(enc); got != p {
			t.Fatalf("DecodePath(EncodePath(%q)) = %q", p, got)
		}
		if utf8.ValidString(p) && !strings.HasPrefix(p, rawPathMark) && enc != p {
			t.Fatalf("a UTF-8 path %q is recorded as %q", p, enc)
		}
	})
}
