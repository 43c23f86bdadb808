// Package minio is the remote driver for S3 and compatible servers, built on
// minio-go. It behaves like remote/s3; having both lets a user pick the
// client that works best with their server.
//
// Puts send Content-MD5 and a signed SHA-256 of the body in plain headers,
// never signed trailers (which some servers, versitygw among them, refuse).
// minio-go's retries are off: remote.WithRetry retries. (minio-go still
// sleeps up to 200 ms after a failed try before giving it back.)
//
// Listings take no delimiter or "/" only, as minio-go's listing API does.
package minio

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"

	mc "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/ompsync/ompsync/remote"
)

// Config is shared with the s3 driver.
type Config = remote.S3Config

// Client stores objects in one bucket, under an optional prefix.
type Client struct {
	core   *mc.Core
	bucket string
	prefix string // "" or "p/"
}

var _ remote.Client = (*Client)(nil)

// New builds a client. It makes no request (except, on AWS without a
// region, the bucket location lookup minio-go does on first use).
func New(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("minio: no bucket")
	}
	prefix, err := cfg.KeyPrefix()
	if err != nil {
		return nil, err
	}
	endpoint, err := cfg.EndpointURL()
	if err != nil {
		return nil, err
	}
	opts := &mc.Options{
		Region:       cfg.Region,
		BucketLookup: mc.BucketLookupDNS,
		MaxRetries:   1, // one try: remote.WithRetry retries
	}
	if cfg.PathStyle {
		opts.BucketLookup = mc.BucketLookupPath
	}
	host := "s3.amazonaws.com"
	opts.Secure = true
	if endpoint != nil {
		host = endpoint.Host
		opts.Secure = endpoint.Scheme == "https"
		if opts.Region == "" {
			opts.Region = "us-east-1"
		}
	}
	switch {
	case cfg.AccessKeyID != "" && cfg.SecretAccessKey != "":
		opts.Creds = credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, "")
	case cfg.AccessKeyID != "" || cfg.SecretAccessKey != "":
		return nil, errors.New("minio: give both access key id and secret access key, or neither")
	default:
		opts.Creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{},
		})
	}
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		opts.Transport = cfg.HTTPClient.Transport
	}
	core, err := mc.NewCore(host, opts)
	if err != nil {
		return nil, fmt.Errorf("minio: %w", err)
	}
	return &Client{core: core, bucket: cfg.Bucket, prefix: prefix}, nil
}

func (c *Client) check(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return &remote.Error{Op: op, Key: key, Err: err}
	}
	if err := remote.ValidateKey(key); err != nil {
		return &remote.Error{Op: op, Key: key, Err: err}
	}
	return nil
}

// Put uploads data in one request with its Content-MD5 and SHA-256.
func (c *Client) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	if err := c.check(ctx, "put", key); err != nil {
		return err
	}
	md := md5.Sum(data)
	sh := sha256.Sum256(data)
	// DisableContentSha256 turns off minio-go's streaming (aws-chunked)
	// signature; the SHA-256 passed below is signed in the header instead.
	po := mc.PutObjectOptions{DisableMultipart: true, DisableContentSha256: true}
	if opts.IfAbsent {
		po.SetMatchETagExcept("*") // If-None-Match: *
	}
	_, err := c.core.PutObject(ctx, c.bucket, c.prefix+key, bytes.NewReader(data), int64(len(data)),
		base64.StdEncoding.EncodeToString(md[:]), hex.EncodeToString(sh[:]), po)
	if err != nil {
		return c.fail(ctx, "put", key, err)
	}
	return nil
}

// Get opens a byte range of key. Reading past the end yields no bytes.
func (c *Client) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := c.check(ctx, "get", key); err != nil {
		return nil, err
	}
	if rc, err := remote.CheckGetRange(ctx, c, key, offset, length); rc != nil || err != nil {
		return rc, err
	}
	var gopts mc.GetObjectOptions
	if r := remote.HTTPRange(offset, length); r != "" {
		gopts.Set("Range", r)
	}
	body, _, _, err := c.core.GetObject(ctx, c.bucket, c.prefix+key, gopts)
	if err != nil {
		if er := errResponse(err); er.StatusCode == http.StatusRequestedRangeNotSatisfiable || er.Code == "InvalidRange" {
			// The object exists but ends before offset.
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, c.fail(ctx, "get", key, err)
	}
	return remote.ContextBody(ctx, body), nil
}

// Stat returns key's size and modification time.
func (c *Client) Stat(ctx context.Context, key string) (remote.ObjectInfo, error) {
	if err := c.check(ctx, "stat", key); err != nil {
		return remote.ObjectInfo{}, err
	}
	oi, err := c.core.StatObject(ctx, c.bucket, c.prefix+key, mc.StatObjectOptions{})
	if err != nil {
		return remote.ObjectInfo{}, c.fail(ctx, "stat", key, err)
	}
	return remote.ObjectInfo{Key: key, Size: oi.Size, ModTime: oi.LastModified}, nil
}

// Delete removes key; a missing key is not an error.
func (c *Client) Delete(ctx context.Context, key string) error {
	if err := c.check(ctx, "delete", key); err != nil {
		return err
	}
	if err := c.core.RemoveObject(ctx, c.bucket, c.prefix+key, mc.RemoveObjectOptions{}); err != nil {
		err = c.fail(ctx, "delete", key, err)
		if errors.Is(err, remote.ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// List supports no delimiter or "/", the only ones minio-go's listing takes.
//
// minio-go yields each page's keys, then that page's common prefixes; List
// holds a page's keys until its prefixes arrive and merges them, so the
// caller sees one lexical order as on the other drivers.
func (c *Client) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	return func(yield func(remote.ObjectInfo, error) bool) {
		fail := func(err error) { yield(remote.ObjectInfo{}, &remote.Error{Op: "list", Key: prefix, Err: err}) }
		if err := ctx.Err(); err != nil {
			fail(err)
			return
		}
		if err := remote.ValidatePrefix(prefix); err != nil {
			fail(err)
			return
		}
		if opts.Delimiter != "" && opts.Delimiter != "/" {
			fail(fmt.Errorf("the minio client lists with no delimiter or %q only, not %q", "/", opts.Delimiter))
			return
		}
		lo := mc.ListObjectsOptions{Prefix: c.prefix + prefix, Recursive: opts.Delimiter == "", MaxKeys: pageSize}
		if opts.StartAfter != "" {
			lo.StartAfter = c.prefix + opts.StartAfter
		}
		// Stop minio-go's iterator (and its requests) when the caller stops.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()

		var held []remote.ObjectInfo // keys of the current page, not yet yielded
		inPrefixes := false
		flush := func(upTo string, all bool) bool {
			i := 0
			for ; i < len(held) && (all || held[i].Key < upTo); i++ {
				if !yield(held[i], nil) {
					return false
				}
			}
			held = held[i:]
			return true
		}
		for o := range c.core.ListObjectsIter(ctx, c.bucket, lo) {
			if o.Err != nil {
				yield(remote.ObjectInfo{}, c.fail(ctx, "list", prefix, o.Err))
				return
			}
			if !strings.HasPrefix(o.Key, lo.Prefix) {
				continue // a confused or hostile server: outside what was asked
			}
			key := o.Key[len(c.prefix):]
			if opts.Delimiter == "" { // no prefixes to merge
				if !yield(remote.ObjectInfo{Key: key, Size: o.Size, ModTime: o.LastModified}, nil) {
					return
				}
				continue
			}
			isPrefix := strings.HasSuffix(o.Key, "/") && o.LastModified.IsZero() && o.ETag == ""
			if !isPrefix {
				if inPrefixes { // a new page: the last page's keys all sort before it
					if !flush("", true) {
						return
					}
					inPrefixes = false
				}
				held = append(held, remote.ObjectInfo{Key: key, Size: o.Size, ModTime: o.LastModified})
				// A page holds at most pageSize entries, so keys older than
				// that came from pages without prefixes: they are in order.
				if excess := len(held) - pageSize; excess > 0 {
					if !flush(held[excess].Key, false) {
						return
					}
				}
				continue
			}
			inPrefixes = true
			if !flush(key, false) || !yield(remote.ObjectInfo{Key: key, Prefix: true}, nil) {
				return
			}
		}
		if err := ctx.Err(); err != nil {
			// minio-go ends a cancelled listing silently.
			fail(err)
			return
		}
		flush("", true)
	}
}

// pageSize is the number of entries asked for per listing request (S3's maximum).
const pageSize = 1000

// errResponse returns the S3 error answer in err, or a zero one.
func errResponse(err error) mc.ErrorResponse {
	var er mc.ErrorResponse
	if errors.As(err, &er) {
		return er
	}
	return mc.ErrorResponse{}
}

// fail maps a minio-go error onto remote's errors, without request URLs.
func (c *Client) fail(ctx context.Context, op, key string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return &remote.Error{Op: op, Key: key, Err: cerr}
	}
	er := errResponse(err)
	switch {
	case er.Code == "NoSuchBucket":
		return &remote.Error{Op: op, Key: key, Err: fmt.Errorf("bucket %q does not exist (NoSuchBucket)", c.bucket)}
	case er.Code == "NoSuchKey", er.Code == "NotFound", er.StatusCode == http.StatusNotFound:
		return &remote.Error{Op: op, Key: key, Err: remote.ErrNotFound}
	case er.Code == "PreconditionFailed", er.StatusCode == http.StatusPreconditionFailed:
		return &remote.Error{Op: op, Key: key, Err: remote.ErrPreconditionFailed}
	case er.StatusCode != 0 || er.Code != "":
		msg := fmt.Sprintf("s3 answered HTTP %d %s: %s", er.StatusCode, er.Code, er.Message)
		return &remote.Error{Op: op, Key: key, Transient: remote.HTTPTransient(er.StatusCode, er.Code), Err: errors.New(msg)}
	}
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) {
		cause = ue.Err
	}
	return &remote.Error{Op: op, Key: key, Transient: remote.NetworkTransient(err), Err: fmt.Errorf("s3 request: %w", cause)}
}
