package remote

import (
	"fmt"
	"net/url"
	"path"
	"strings"
	"unicode"
)

// Location is a parsed remote URL.
type Location struct {
	// Scheme is "file" or "s3".
	Scheme string
	// Dir is the absolute folder of a file remote.
	Dir string
	// Bucket and Prefix locate an s3 remote; Prefix has no leading or
	// trailing slash and may be empty.
	Bucket string
	Prefix string
}

// AcceptedForms is quoted in error messages about remote URLs.
const AcceptedForms = "file:///absolute/folder or s3://bucket[/prefix]"

// ParseURL parses a remote URL: file:///abs/dir or s3://bucket/optional/prefix.
func ParseURL(raw string) (Location, error) {
	shown := raw
	bad := func(why string) (Location, error) {
		return Location{}, fmt.Errorf("remote %q: %s (accepted forms: %s)", shown, why, AcceptedForms)
	}
	if raw == "" {
		return bad("empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.LastIndexByte(raw, '@'); i >= 0 {
			shown = "<redacted>" + raw[i:] // it may hold a secret
		}
		return bad("not a URL")
	}
	if u.User != nil {
		shown = u.Redacted()
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return bad("a file URL takes an absolute path after file:// (three slashes)")
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return bad("a file URL takes no query or fragment")
		}
		if u.Path == "" || !strings.HasPrefix(u.Path, "/") {
			return bad("a file URL needs an absolute path")
		}
		if strings.ContainsFunc(u.Path, unicode.IsControl) {
			return bad("the path has a control character")
		}
		return Location{Scheme: "file", Dir: path.Clean(u.Path)}, nil
	case "s3":
		if u.Host == "" {
			return bad("an s3 URL needs a bucket name")
		}
		if u.User != nil {
			return bad("put credentials in s3.access_key_id / s3.secret_access_key or the environment, not in the URL")
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return bad("an s3 URL takes no query or fragment")
		}
		if !validBucket(u.Host) {
			return bad("bucket names are 3-63 characters of a-z, 0-9, '.' and '-'")
		}
		prefix := strings.Trim(u.Path, "/")
		if strings.ContainsFunc(prefix, unicode.IsControl) {
			return bad("the prefix has a control character")
		}
		for _, seg := range strings.Split(prefix, "/") {
			if prefix != "" && (seg == "" || seg == "." || seg == "..") {
				return bad("the prefix has an empty, '.' or '..' segment")
			}
		}
		return Location{Scheme: "s3", Bucket: u.Host, Prefix: prefix}, nil
	case "":
		return bad("missing scheme")
	default:
		return bad("unsupported scheme " + u.Scheme)
	}
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for _, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// String renders the location back as a URL.
func (l Location) String() string {
	switch l.Scheme {
	case "file":
		return "file://" + l.Dir
	case "s3":
		if l.Prefix == "" {
			return "s3://" + l.Bucket
		}
		return "s3://" + l.Bucket + "/" + l.Prefix
	}
	return ""
}
