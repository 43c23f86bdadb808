// Package backend opens the remote a URL names: file:///folder or
// s3://bucket/prefix, with the S3 client the user picked, wrapped in
// remote.WithRetry.
package backend

import (
	"context"
	"fmt"
	"os"

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
// remote's folder is created (mode 0700) when missing.
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
		if err := os.MkdirAll(loc.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("create remote folder: %w", err)
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
