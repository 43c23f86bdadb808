package remote

import (
	"context"
	"errors"
	"net/url"
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
		return l.Scheme + "://" + l.Dir
	case l.Prefix == "":
		return l.Scheme + "://" + l.Bucket
	}
	return l.Scheme + "://" + l.Bucket + "/" + l.Prefix
}
