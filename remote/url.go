package remote

import (
	"context"
	"errors"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"unicode"
)

// Location is a parsed remote URL.
type Location struct {
	// Scheme is the URL's scheme, naming the backend.
	Scheme string
	// Dir is the absolute folder of a file remote.
	Dir string
	// Bucket and Prefix locate an s3 remote; Prefix has no leading or
	// trailing slash and may be empty.
	Bucket string
	Prefix string
}

// Backend is what a backend package exports for remote/backend's table:
// all the rest of ompsync knows of it (URL, config, help, tests).
type Backend struct {
	// Scheme is the URL scheme it serves; Form the URL's shape, quoted in
	// errors and help ("s3://bucket[/prefix]").
	Scheme, Form string
	// Client is the s3.client value that picks it among the backends of its
	// scheme ("" when it is its scheme's only one); Library is what help
	// text calls it.
	Client, Library string
	// Parse checks a URL of Scheme; its error says only why it is refused.
	Parse func(u *url.URL) (Location, error)
	// Open returns a client for loc, with cfg's settings beyond the URL.
	Open func(ctx context.Context, loc Location, cfg S3Config) (Client, error)
}

// ParseS3URL is Backend.Parse for s3://bucket[/prefix], shared by the S3
// drivers.
func ParseS3URL(u *url.URL) (Location, error) {
	switch {
	case u.Host == "":
		return Location{}, errors.New("an s3 URL needs a bucket name")
	case u.User != nil:
		return Location{}, errors.New("put credentials in s3.access_key_id / s3.secret_access_key or the environment, not in the URL")
	case u.RawQuery != "" || u.Fragment != "":
		return Location{}, errors.New("an s3 URL takes no query or fragment")
	case !validBucket(u.Host):
		return Location{}, errors.New("bucket names are 3-63 characters of a-z, 0-9, '.' and '-'")
	}
	prefix := strings.Trim(u.Path, "/")
	if strings.ContainsFunc(prefix, unicode.IsControl) {
		return Location{}, errors.New("the prefix has a control character")
	}
	for _, seg := range strings.Split(prefix, "/") {
		if prefix != "" && (seg == "" || seg == "." || seg == "..") {
			return Location{}, errors.New("the prefix has an empty, '.' or '..' segment")
		}
	}
	return Location{Scheme: u.Scheme, Bucket: u.Host, Prefix: prefix}, nil
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
	switch {
	case l.Scheme == "":
		return ""
	case l.Dir != "":
		return l.Scheme + "://" + urlPath(l.Dir, filepath.Separator)
	case l.Prefix == "":
		return l.Scheme + "://" + l.Bucket
	}
	return l.Scheme + "://" + l.Bucket + "/" + l.Prefix
}

// urlPath is folder dir, under the rules of separator sep, as a file URL's
// path: forward slashes, and a slash before a Windows drive letter, as
// file:///C:/x needs (file://C:/x would name a host C:).
func urlPath(dir string, sep byte) string {
	p := strings.ReplaceAll(dir, string(sep), "/")
	if drive(p) {
		p = "/" + p
	}
	return p
}

// FileDir is the folder a file URL's path names on this system: on
// Windows, /C:/x is C:\x.
func FileDir(urlPath string) string { return fileDir(urlPath, filepath.Separator) }

func fileDir(p string, sep byte) string {
	unc := sep == '\\' && strings.HasPrefix(p, "//") // //server/share
	if p = path.Clean(p); unc {
		p = "/" + p
	}
	if sep == '\\' && drive(p[1:]) {
		p = p[1:] // /C:/x is C:/x, and /C: is C:/ (C: alone is the current folder on drive C)
		if len(p) == 2 {
			p += "/"
		}
	}
	return strings.ReplaceAll(p, "/", string(sep))
}

// drive reports whether slashed path p starts with a Windows drive: C: or C:/.
func drive(p string) bool {
	return len(p) >= 2 && p[1] == ':' && 'a' <= p[0]|0x20 && p[0]|0x20 <= 'z' && (len(p) == 2 || p[2] == '/')
}
