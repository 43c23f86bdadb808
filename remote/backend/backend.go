// Package backend is the table of backends and opens the remote a URL
// names with the one it picks, wrapped in remote.WithRetry.
//
// A backend is a package exporting a remote.Backend plus one line in
// backends: its URL scheme, its s3.client value, help text and the
// conformance tests (remotetest.Backends) all follow from that entry.
package backend

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/remote/minio"
	"github.com/ompsync/ompsync/remote/s3"
)

// backends are the ways to store; of those sharing a scheme, the first is
// the default client.
var backends = []remote.Backend{file.Backend, s3.Backend, minio.Backend}

// S3Options are the settings an s3:// URL needs besides bucket and prefix
// (Client picks the driver; empty means the default). File remotes ignore
// them.
type S3Options = remote.S3Config

// Open returns a client for the remote URL raw, with DefaultRetry. A file
// remote's folder is created (mode 0700) when missing, but only the folder
// itself, and only when its parent exists (a disk not mounted).
func Open(ctx context.Context, raw string, opts S3Options) (remote.Client, error) {
	c, err := OpenRaw(ctx, raw, opts)
	if err != nil {
		return nil, err
	}
	return remote.WithRetry(c, remote.DefaultRetry), nil
}

// OpenRaw is Open without the retry wrapper, for tests and benchmarks that
// need to see every failure, and for callers that wrap it themselves (the
// CLI counts every try).
func OpenRaw(ctx context.Context, raw string, opts S3Options) (remote.Client, error) {
	loc, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, b := range backends {
		if b.Scheme == loc.Scheme && (b.Client == "" || b.Client == opts.Client || opts.Client == "" && names == nil) {
			return b.Open(ctx, loc, opts)
		}
		if b.Scheme == loc.Scheme {
			names = append(names, fmt.Sprintf("%q", b.Client))
		}
	}
	return nil, fmt.Errorf("%s client %q: want %s", loc.Scheme, opts.Client, strings.Join(names, " or "))
}

// ParseURL parses a remote URL with the Parse of its scheme's backend.
func ParseURL(raw string) (remote.Location, error) {
	shown := raw
	bad := func(why string) (remote.Location, error) {
		return remote.Location{}, fmt.Errorf("remote %q: %s (accepted forms: %s)", shown, why, AcceptedForms())
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
	if u.Scheme == "" {
		return bad("missing scheme")
	}
	for _, b := range backends {
		if b.Scheme == u.Scheme {
			loc, err := b.Parse(u)
			if err != nil {
				return bad(err.Error())
			}
			return loc, nil
		}
	}
	return bad("unsupported scheme " + u.Scheme)
}

// AcceptedForms are the URL forms of the backends, quoted in help and in
// errors about remote URLs.
func AcceptedForms() string {
	var forms []string
	for _, b := range backends {
		if !slices.Contains(forms, b.Form) {
			forms = append(forms, b.Form)
		}
	}
	return strings.Join(forms, " or ")
}

// Backends returns the table, for help text built from it.
func Backends() []remote.Backend { return slices.Clone(backends) }

// Clients are the s3.client values that pick among the backends of
// scheme, the default first.
func Clients(scheme string) []string {
	var out []string
	for _, b := range backends {
		if b.Scheme == scheme && b.Client != "" {
			out = append(out, b.Client)
		}
	}
	return out
}
