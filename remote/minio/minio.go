// Package minio is the remote driver for S3 and compatible servers, built on
// minio-go. It behaves like remote/s3; having both lets a user pick the
// client that works best with their server.
//
// Puts send Content-MD5 and a signed SHA-256 of the body in plain headers,
// never signed trailers (which some servers, versitygw among them, refuse).
// minio-go's retries are off: remote.WithRetry retries. (minio-go still
// sleeps up to 200 ms after a failed try before giving it back.)
//
// Listings take no delimiter or "/" only, the rule of minio-go's
// ListObjects, which the driver used before it listed page by page.
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
	"strings"

	mc "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/ompsync/ompsync/remote"
)

// Client stores objects in one bucket, under an optional prefix.
type Client struct {
	core   *mc.Core
	bucket string
	prefix string // "" or "p/"
	cfg    remote.S3Config
}

var _ remote.Client = (*Client)(nil)

// New builds a client. It makes no request (except, on AWS without a
// region, the bucket location lookup minio-go does on first use).
func New(ctx context.Context, cfg remote.S3Config) (*Client, error) {
	prefix, endpoint, err := cfg.Check("minio")
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
	if cfg.AccessKeyID != "" {
		opts.Creds = credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)
	} else {
		chain := []credentials.Provider{&credentials.EnvAWS{}, &credentials.FileAWSCredentials{}}
		if endpoint == nil {
			// Instance roles exist on AWS only; elsewhere the metadata
			// service would only be waited for.
			chain = append(chain, &credentials.IAM{})
		}
		opts.Creds = credentials.NewChainCredentials(chain)
		if err := findCredentials(ctx, opts.Creds); err != nil {
			return nil, err
		}
	}
	var base http.RoundTripper
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		base = cfg.HTTPClient.Transport
	} else {
		tr, err := mc.DefaultTransport(opts.Secure)
		if err != nil {
			return nil, fmt.Errorf("minio: %w", err)
		}
		tr.MaxIdleConnsPerHost = remote.IdleConnsPerHost
		_, pool, err := cfg.ReadCAFile()
		if err != nil {
			return nil, err
		}
		if pool != nil && tr.TLSClientConfig != nil { // nil: plain http
			tr.TLSClientConfig.RootCAs = pool
		}
		base = tr
	}
	opts.Transport = remote.CheckS3Answers(base)
	core, err := mc.NewCore(host, opts)
	if err != nil {
		return nil, fmt.Errorf("minio: %w", err)
	}
	return &Client{core: core, bucket: cfg.Bucket, prefix: prefix, cfg: cfg}, nil
}

// findCredentials looks for credentials once, now: minio-go would
// otherwise send unsigned requests, which the server refuses as if the
// key were wrong.
func findCredentials(ctx context.Context, c *credentials.Credentials) error {
	ctx, cancel := context.WithTimeout(ctx, remote.CredentialsTimeout)
	defer cancel()
	v, err := c.GetWithContext(&credentials.CredContext{Client: http.DefaultClient, Context: ctx})
	if err != nil || v.AccessKeyID == "" || v.SignerType == credentials.SignatureAnonymous {
		return remote.ErrNoCredentials
	}
	return nil
}

// Put uploads data in one request with its Content-MD5 and SHA-256.
func (c *Client) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	if err := remote.CheckOp(ctx, "put", key); err != nil {
		return err
	}
	return c.put(ctx, key, bytes.NewReader(data), int64(len(data)), md5.Sum(data), sha256.Sum256(data), opts)
}

// PutReader uploads size bytes of r in one request with their Content-MD5
// and SHA-256, from a first pass over r.
func (c *Client) PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts remote.PutOptions) error {
	if err := remote.CheckOp(ctx, "put", key); err != nil {
		return err
	}
	sums, err := remote.SumsFor(ctx, r, size, true, opts.Sums)
	if err != nil {
		return &remote.Error{Op: "put", Key: key, Err: err}
	}
	return c.put(ctx, key, remote.CheckedReader(r, size, sums), size, sums.MD5, sums.SHA256, opts)
}

func (c *Client) put(ctx context.Context, key string, body io.Reader, size int64, md [md5.Size]byte, sh [sha256.Size]byte, opts remote.PutOptions) error {
	// DisableContentSha256 turns off minio-go's streaming (aws-chunked)
	// signature; the SHA-256 passed below is signed in the header instead.
	po := mc.PutObjectOptions{DisableMultipart: true, DisableContentSha256: true}
	if opts.IfAbsent {
		po.SetMatchETagExcept("*") // If-None-Match: *
	}
	if opts.IfMatch != "" {
		po.SetMatchETag(opts.IfMatch)
	}
	_, err := c.core.PutObject(ctx, c.bucket, c.prefix+key, body, size,
		base64.StdEncoding.EncodeToString(md[:]), hex.EncodeToString(sh[:]), po)
	if err != nil {
		return c.fail(ctx, "put", key, err)
	}
	return nil
}

// Get opens a byte range of key. Reading past the end yields no bytes.
func (c *Client) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := remote.CheckOp(ctx, "get", key); err != nil {
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
	if err := remote.CheckOp(ctx, "stat", key); err != nil {
		return remote.ObjectInfo{}, err
	}
	oi, err := c.core.StatObject(ctx, c.bucket, c.prefix+key, mc.StatObjectOptions{})
	if err != nil {
		return remote.ObjectInfo{}, c.fail(ctx, "stat", key, err)
	}
	return remote.ObjectInfo{Key: key, Size: oi.Size, ModTime: oi.LastModified, ETag: oi.ETag}, nil
}

// Delete removes key; a missing key is not an error.
func (c *Client) Delete(ctx context.Context, key string) error {
	if err := remote.CheckOp(ctx, "delete", key); err != nil {
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

// List pages through ListObjectsV2, merging each page's keys and common
// prefixes into one lexical order. It asks for each page itself, not through
// minio-go's iterator, which follows a token the server repeats forever.
func (c *Client) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	return func(yield func(remote.ObjectInfo, error) bool) {
		fail := func(err error) { yield(remote.ObjectInfo{}, &remote.Error{Op: "list", Key: prefix, Err: err}) }
		if err := remote.CheckOp(ctx, "list", prefix); err != nil {
			yield(remote.ObjectInfo{}, err)
			return
		}
		if opts.Delimiter != "" && opts.Delimiter != "/" {
			fail(fmt.Errorf("the minio client lists with no delimiter or %q only, not %q", "/", opts.Delimiter))
			return
		}
		full := c.prefix + prefix
		startAfter := ""
		if opts.StartAfter != "" {
			startAfter = c.prefix + opts.StartAfter
		}
		token := ""
		maxKeys := pageSize
		if opts.FirstPage > 0 {
			maxKeys = min(opts.FirstPage, pageSize)
		}
		for {
			page, err := c.listPage(ctx, full, startAfter, token, opts.Delimiter, maxKeys)
			if err != nil {
				if er := errResponse(err); ctx.Err() == nil && er.StatusCode == 0 && er.Code == mc.NotImplemented && page.IsTruncated {
					// minio-go's own check of a truncated page without a
					// token: report it as a repeated token is reported.
					fail(remote.ErrEndlessListing)
					return
				}
				yield(remote.ObjectInfo{}, c.fail(ctx, "list", prefix, err))
				return
			}
			items := make([]remote.ObjectInfo, 0, len(page.Contents)+len(page.CommonPrefixes))
			for _, o := range page.Contents {
				items = append(items, remote.ObjectInfo{Key: o.Key, Size: o.Size, ModTime: o.LastModified})
			}
			for _, p := range page.CommonPrefixes {
				items = append(items, remote.ObjectInfo{Key: p.Prefix, Prefix: true})
			}
			if !remote.YieldPage(items, c.prefix, full, yield) {
				return
			}
			if !page.IsTruncated {
				return
			}
			if page.NextContinuationToken == "" || page.NextContinuationToken == token {
				fail(remote.ErrEndlessListing)
				return
			}
			token, startAfter, maxKeys = page.NextContinuationToken, "", pageSize
		}
	}
}

// listPage asks for one page of a listing. minio-go's Core.ListObjectsV2
// takes no context, so the request runs on its own and listPage returns
// ctx's error as soon as ctx ends; an abandoned request finishes unheeded.
func (c *Client) listPage(ctx context.Context, prefix, startAfter, token, delimiter string, maxKeys int) (mc.ListBucketV2Result, error) {
	type answer struct {
		page mc.ListBucketV2Result
		err  error
	}
	done := make(chan answer, 1) // buffered: an abandoned request does not block
	go func() {
		page, err := c.core.ListObjectsV2(c.bucket, prefix, startAfter, token, delimiter, maxKeys)
		done <- answer{page, err}
	}()
	select {
	case a := <-done:
		return a.page, a.err
	case <-ctx.Done():
		return mc.ListBucketV2Result{}, ctx.Err()
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
	er := errResponse(err)
	return c.cfg.Fail(ctx, op, key, err, remote.S3Failure{Status: er.StatusCode, Code: er.Code, Message: er.Message})
}

// Backend serves s3:// URLs when s3.client is minio.
var Backend = remote.Backend{Scheme: "s3", Form: "s3://bucket[/prefix]", Client: "minio", Library: "minio-go", Parse: remote.ParseS3URL,
	Open: func(ctx context.Context, loc remote.Location, cfg remote.S3Config) (remote.Client, error) {
		cfg.Bucket, cfg.Prefix = loc.Bucket, loc.Prefix
		return New(ctx, cfg)
	}}
