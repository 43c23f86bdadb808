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
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"

	mc "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/ompsync/ompsync/remote"
)

// api is minio-go's side of remote.S3Client.
type api struct {
	core   *mc.Core
	bucket string
}

// Client stores objects in one bucket, under an optional prefix: its own
// type, so a caller can tell which driver it opened.
type Client struct{ *remote.S3Client }

// New builds a client for loc's bucket and prefix with cfg's other
// settings: Backend's Open. It makes no request (except, on AWS without a
// region, the bucket location lookup minio-go does on first use).
func New(ctx context.Context, loc remote.Location, cfg remote.S3Config) (remote.Client, error) {
	cfg.Bucket, cfg.Prefix = loc.Bucket, loc.Prefix
	setup, err := cfg.Check("minio")
	if err != nil {
		return nil, err
	}
	opts := &mc.Options{
		Region:       setup.Region,
		BucketLookup: mc.BucketLookupDNS,
		MaxRetries:   1, // one try: remote.WithRetry retries
	}
	if cfg.PathStyle {
		opts.BucketLookup = mc.BucketLookupPath
	}
	host := "s3.amazonaws.com"
	opts.Secure = true
	if setup.Endpoint != nil {
		host = setup.Endpoint.Host
		opts.Secure = setup.Endpoint.Scheme == "https"
	}
	if cfg.AccessKeyID != "" {
		opts.Creds = credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)
	} else {
		chain := []credentials.Provider{&credentials.EnvAWS{}, &credentials.FileAWSCredentials{}}
		if setup.Endpoint == nil {
			// Instance roles exist on AWS only; elsewhere the metadata
			// service would only be waited for.
			chain = append(chain, &credentials.IAM{})
		}
		opts.Creds = credentials.NewChainCredentials(chain)
		// minio-go would otherwise send unsigned requests, which the
		// server refuses as if the key were wrong.
		err := remote.FindCredentials(ctx, func(ctx context.Context) bool {
			v, err := opts.Creds.GetWithContext(&credentials.CredContext{Client: http.DefaultClient, Context: ctx})
			return err == nil && v.AccessKeyID != "" && v.SignerType != credentials.SignatureAnonymous
		})
		if err != nil {
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
		if setup.CAs != nil && tr.TLSClientConfig != nil { // nil: plain http
			tr.TLSClientConfig.RootCAs = setup.CAs
		}
		base = tr
	}
	opts.Transport = remote.CheckS3Answers(base)
	core, err := mc.NewCore(host, opts)
	if err != nil {
		return nil, fmt.Errorf("minio: %w", err)
	}
	return &Client{remote.NewS3Client(api{core, cfg.Bucket}, cfg, setup.Prefix)}, nil
}

func (a api) PutObject(ctx context.Context, key string, body io.Reader, size int64, sums remote.Sums, opts remote.PutOptions) error {
	// DisableContentSha256 turns off minio-go's streaming (aws-chunked)
	// signature; the SHA-256 passed below is signed in the header instead.
	po := mc.PutObjectOptions{DisableMultipart: true, DisableContentSha256: true}
	if opts.IfAbsent {
		po.SetMatchETagExcept("*") // If-None-Match: *
	}
	if opts.IfMatch != "" {
		po.SetMatchETag(opts.IfMatch)
	}
	_, err := a.core.PutObject(ctx, a.bucket, key, body, size,
		base64.StdEncoding.EncodeToString(sums.MD5[:]), hex.EncodeToString(sums.SHA256[:]), po)
	return err
}

func (api) SignsSHA256() bool { return true }

func (a api) GetObject(ctx context.Context, key, byteRange string) (io.ReadCloser, error) {
	var gopts mc.GetObjectOptions
	if byteRange != "" {
		gopts.Set("Range", byteRange)
	}
	body, _, _, err := a.core.GetObject(ctx, a.bucket, key, gopts)
	return body, err
}

func (a api) HeadObject(ctx context.Context, key string) (remote.ObjectInfo, error) {
	oi, err := a.core.StatObject(ctx, a.bucket, key, mc.StatObjectOptions{})
	return remote.ObjectInfo{Size: oi.Size, ModTime: oi.LastModified, ETag: oi.ETag}, err
}

func (a api) DeleteObject(ctx context.Context, key string) error {
	return a.core.RemoveObject(ctx, a.bucket, key, mc.RemoveObjectOptions{})
}

// ListPage asks for one page itself, not through minio-go's iterator,
// which follows a token the server repeats forever. Core.ListObjectsV2
// takes no context, so the request runs on its own and ListPage returns
// ctx's error as soon as ctx ends; an abandoned request finishes unheeded.
func (a api) ListPage(ctx context.Context, q remote.S3Query) (remote.S3Page, error) {
	if q.Delimiter != "" && q.Delimiter != "/" {
		return remote.S3Page{}, &remote.Error{Err: fmt.Errorf("the minio client lists with no delimiter or %q only, not %q", "/", q.Delimiter)}
	}
	type answer struct {
		page mc.ListBucketV2Result
		err  error
	}
	done := make(chan answer, 1) // buffered: an abandoned request does not block
	go func() {
		page, err := a.core.ListObjectsV2(a.bucket, q.Prefix, q.StartAfter, q.Token, q.Delimiter, q.MaxKeys)
		done <- answer{page, err}
	}()
	var ans answer
	select {
	case ans = <-done:
	case <-ctx.Done():
		return remote.S3Page{}, ctx.Err()
	}
	if er := errResponse(ans.err); ctx.Err() == nil && er.StatusCode == 0 && er.Code == mc.NotImplemented && ans.page.IsTruncated {
		// minio-go's own check of a truncated page without a token:
		// S3Client reports it as a repeated token is reported.
		return remote.S3Page{Truncated: true}, nil
	} else if ans.err != nil {
		return remote.S3Page{}, ans.err
	}
	page := remote.S3Page{Truncated: ans.page.IsTruncated, Next: ans.page.NextContinuationToken}
	for _, o := range ans.page.Contents {
		page.Items = append(page.Items, remote.ObjectInfo{Key: o.Key, Size: o.Size, ModTime: o.LastModified})
	}
	for _, p := range ans.page.CommonPrefixes {
		page.Items = append(page.Items, remote.ObjectInfo{Key: p.Prefix, Prefix: true})
	}
	return page, nil
}

// errResponse returns the S3 error answer in err, or a zero one.
func errResponse(err error) mc.ErrorResponse {
	var er mc.ErrorResponse
	errors.As(err, &er)
	return er
}

// Failure tells what minio-go says of a failed request.
func (api) Failure(err error) remote.S3Failure {
	er := errResponse(err)
	return remote.S3Failure{Status: er.StatusCode, Code: er.Code, Message: er.Message}
}

// Backend serves s3:// URLs when s3.client is minio.
var Backend = remote.Backend{Scheme: "s3", Form: "s3://bucket[/prefix]", Client: "minio", Library: "minio-go", Parse: remote.ParseS3URL, Open: New}
