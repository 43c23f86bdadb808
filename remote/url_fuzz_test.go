package remote

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzValidateKey: a key every driver accepts stays inside the folder it
// is joined to (the file driver stores keys as paths) and is text S3's XML
// listings can carry.
func FuzzValidateKey(f *testing.F) {
	for _, k := range []string{"v1/sessions/x/laptop/session/0000000000000001/meta", "a/../b", "../x", "/abs", "a//b",
		"a/./b", "nul\x00", `back\slash`, "ünï/cödé", "\xff", strings.Repeat("k", 1025)} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if err := ValidateKey(key); err != nil {
			return
		}
		if !utf8.ValidString(key) || len(key) > MaxKeyLen {
			t.Fatalf("accepted %q", key)
		}
		for _, r := range key {
			if r < 0x20 || r == 0x7f || r == '\\' {
				t.Fatalf("accepted %q with %U", key, r)
			}
		}
		root := filepath.FromSlash("/remote")
		p := filepath.Join(root, filepath.FromSlash(key))
		rel, err := filepath.Rel(root, p)
		if err != nil || filepath.ToSlash(rel) != key {
			t.Fatalf("key %q joined to a folder is %q", key, p)
		}
		if err := ValidatePrefix(key); err != nil {
			t.Fatalf("a valid key is not a valid prefix: %v", err)
		}
	})
}
