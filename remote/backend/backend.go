// Package backend opens the remote a URL names: file:///folder or
// s3://bucket/prefix, with the S3 client the user picked, wrapped in
// remote.WithRetry.
package backend

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/remote/minio"
	"github.com/ompsync/ompsync/remote/s3"
)

// S3 client names for S3Options.Client.
const (
	ClientAWS   = "aws"
	ClientMinio = "minio"
)

// S3Options are the settings an s3:// URL needs besides bucket and prefix.
// File remotes ignore them.
type S3Options struct {
	// Client is "aws" (aws-sdk-go-v2, the default when empty) or "minio".
	Client string
	// Endpoint is the server URL; empty means AWS.
	Endpoint string
	// Region defaults to us-east-1 when Endpoint is set.
	Region string
	// PathStyle addresses buckets as endpoint/bucket.
	PathStyle bool
	// CAFile is a PEM file of the certificate authorities to trust.
	CAFile string
	// AccessKeyID and SecretAccessKey; empty means the default AWS chain.
	AccessKeyID     string
	SecretAccessKey string
	// SessionToken goes with them for temporary (STS) credentials.
	SessionToken string
}

// String leaves the secret out, so options can be printed or logged.
func (o S3Options) String() string {
	secret := ""
	if o.SecretAccessKey != "" {
		secret = "[redacted]"
	}
	return fmt.Sprintf("{Client:%s Endpoint:%s Region:%s PathStyle:%t CAFile:%s AccessKeyID:%s SecretAccessKey:%s}",
		o.Client, o.Endpoint, o.Region, o.PathStyle, o.CAFile, o.AccessKeyID, secret)
}

// GoString keeps %#v from printing the secret too.
func (o S3Options) GoString() string { return "backend.S3Options" + o.String() }

// Open returns a client for the remote URL raw, with DefaultRetry. A file
// remote's folder is created (mode 0700) when missing, but only the folder
// itself: see makeFolder.
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
	loc, err := remote.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	switch loc.Scheme {
	case "file":
		if err := makeFolder(loc.Dir); err != nil {
			return nil, err
		}
		return file.New(loc.Dir)
	case "s3":
		cfg := remote.S3Config{
			Bucket:          loc.Bucket,
			Prefix:          loc.Prefix,
			Endpoint:        opts.Endpoint,
			Region:          opts.Region,
			PathStyle:       opts.PathStyle,
			CAFile:          opts.CAFile,
			AccessKeyID:     opts.AccessKeyID,
			SecretAccessKey: opts.SecretAccessKey,
			SessionToken:    opts.SessionToken,
		}
		switch opts.Client {
		case "", ClientAWS:
			return s3.New(ctx, cfg)
		case ClientMinio:
			return minio.New(ctx, cfg)
		default:
			return nil, fmt.Errorf("s3 client %q: want %q or %q", opts.Client, ClientAWS, ClientMinio)
		}
	}
	return nil, fmt.Errorf("remote %s: unsupported scheme %q", raw, loc.Scheme)
}

// makeFolder creates a file remote's folder when it is missing, and only
// when its parent exists. A folder on a disk that is not mounted must not
// be made again on the disk below, with every session uploaded into it
// while the user believes they are on the other disk.
func makeFolder(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("remote folder %s is a file, not a folder", dir)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("remote folder: %w", err)
	}
	parent := filepath.Dir(dir)
	if _, err := os.Stat(parent); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remote folder %s cannot be created: its parent %s does not exist: is the disk mounted? (to keep the remote there, create %s first)", dir, parent, parent)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create remote folder: %w", err)
	}
	return nil
}
