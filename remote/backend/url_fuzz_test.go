package backend_test

import (
	"path"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ompsync/ompsync/remote/backend"
)

// FuzzParseURL: a remote URL that parses names an absolute, clean folder
// or a valid bucket with a prefix of safe segments, and reads back the same
// from its String form, which is what config show and logs print.
func FuzzParseURL(f *testing.F) {
	for _, u := range []string{
		"file:///home/u/.local/share/ompsync/remote", "file://localhost/srv/x", "file:///a/../b", "file://host/x",
		"file://relative", "s3://my-bucket", "s3://my-bucket/omp/laptop/", "s3://b/../x", "s3://key:secret@bucket/p",
		"s3://Bad_Bucket", "s3://bucket?versionId=1", "s3://bucket/a%2F..%2Fb", "s3://bucket/a%20b", "ftp://x/y", "",
	} {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		loc, err := backend.ParseURL(raw)
		if err != nil {
			if !strings.Contains(err.Error(), backend.AcceptedForms()) {
				t.Fatalf("error %q does not show the accepted forms", err)
			}
			return
		}
		switch loc.Scheme {
		case "file":
			if !path.IsAbs(loc.Dir) || path.Clean(loc.Dir) != loc.Dir {
				t.Fatalf("%q: folder %q is not absolute and clean", raw, loc.Dir)
			}
		case "s3":
			if !regexp.MustCompile(`^[a-z0-9.-]{3,63}$`).MatchString(loc.Bucket) {
				t.Fatalf("%q: bucket %q", raw, loc.Bucket)
			}
			if loc.Prefix != "" {
				if strings.HasPrefix(loc.Prefix, "/") || strings.HasSuffix(loc.Prefix, "/") {
					t.Fatalf("%q: prefix %q has a leading or trailing slash", raw, loc.Prefix)
				}
				for _, seg := range strings.Split(loc.Prefix, "/") {
					if seg == "" || seg == "." || seg == ".." {
						t.Fatalf("%q: prefix %q has an unsafe segment", raw, loc.Prefix)
					}
				}
			}
		default:
			t.Fatalf("%q: scheme %q", raw, loc.Scheme)
		}
		again, err := backend.ParseURL(loc.String())
		if err != nil || again != loc {
			if strings.ContainsAny(loc.Dir+loc.Prefix, "?#%") || !utf8.ValidString(loc.Dir+loc.Prefix) {
				// Characters URL syntax gives a meaning are printed
				// unescaped by String; it is for reading, not reparsing.
				return
			}
			t.Fatalf("%q parses to %+v, printed %q, which parses to %+v, %v", raw, loc, loc.String(), again, err)
		}
	})
}
