// Package s3 is the remote driver for S3 and compatible servers, built on
// aws-sdk-go-v2.
//
// Every put carries Content-MD5, so the server refuses a body corrupted on
// the way. The SDK's own retries are off: remote.WithRetry retries, and
// errors are mapped onto remote.Error with Transient set.
package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/ompsync/ompsync/remote"
)

// Client stores objects in one bucket, under an optional prefix.
type Client struct {
	api    *s3.Client
	bucket string
	prefix string // "" or "p/"
	cfg    remote.S3Config
}

var _ remote.Client = (*Client)(nil)

// responseHeaderTimeout bounds how long a request waits for the server's
// answer once sent; a stuck server then fails transiently instead of hanging.
const responseHeaderTimeout = time.Minute

// New builds a client. It makes no request: a wrong bucket or key shows up
// on the first operation.
func New(ctx context.Context, cfg remote.S3Config) (*Client, error) {
	prefix, endpoint, err := cfg.Check("s3")
	if err != nil {
		return nil, err
	}
	// The SDK logs to stderr on its own (the metadata service's "falling
	// back to IMDSv1" when no credentials are found): what goes wrong is
	// returned, and ompsync says it in one line.
	loadOpts := []func(*config.LoadOptions) error{config.WithLogger(logging.Nop{})}
	static := cfg.AccessKeyID != "" || cfg.SecretAccessKey != ""
	if static {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	} else if endpoint != nil {
		// A self-hosted server has no instance roles: asking the EC2
		// metadata service would only wait for an answer that never comes.
		loadOpts = append(loadOpts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	caPEM, _, err := cfg.ReadCAFile()
	if err != nil {
		return nil, err
	}
	if caPEM != nil {
		loadOpts = append(loadOpts, config.WithCustomCABundle(bytes.NewReader(caPEM)))
	}
	region := cfg.Region
	if region == "" && endpoint != nil {
		// Self-hosted servers expect the SDK default, whatever AWS_REGION says.
		region = "us-east-1"
	}
	if region != "" {
		loadOpts = append(loadOpts, config.WithRegion(region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("s3: load aws config: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	if !static {
		if err := findCredentials(ctx, awsCfg.Credentials); err != nil {
			return nil, err
		}
	}
	// The default client carries AWS_CA_BUNDLE when set; keep it and add
	// a response timeout. A caller's client is used as given, after
	// LoadDefaultConfig, which refuses a CA bundle with a custom transport.
	if awsCfg.HTTPClient == nil { // the SDK's default, made here to set its timeout
		awsCfg.HTTPClient = awshttp.NewBuildableClient()
	}
	if bc, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient); ok {
		awsCfg.HTTPClient = bc.WithTransportOptions(func(tr *http.Transport) {
			tr.ResponseHeaderTimeout = responseHeaderTimeout
			tr.MaxIdleConnsPerHost = remote.IdleConnsPerHost
		})
	}
	httpClient := awsCfg.HTTPClient
	if cfg.HTTPClient != nil {
		httpClient = cfg.HTTPClient
	}
	api := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.HTTPClient = checkedClient{httpClient}
		if endpoint != nil {
			o.BaseEndpoint = aws.String(endpoint.String())
		}
		o.UsePathStyle = cfg.PathStyle
		// "When required" keeps the SDK from adding CRC trailers that many
		// S3-compatible servers refuse; Content-MD5 protects puts instead.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.DisableLogOutputChecksumValidationSkipped = true
		o.Retryer = aws.NopRetryer{}
		o.RetryMaxAttempts = 0
	})
	return &Client{api: api, bucket: cfg.Bucket, prefix: prefix, cfg: cfg}, nil
}

// findCredentials looks for credentials once, now, so that none is one
// clear error rather than the SDK's chain of every place it asked. What it
// finds is cached for the requests.
func findCredentials(ctx context.Context, p aws.CredentialsProvider) error {
	if p == nil {
		return remote.ErrNoCredentials
	}
	ctx, cancel := context.WithTimeout(ctx, remote.CredentialsTimeout)
	defer cancel()
	if _, err := p.Retrieve(ctx); err != nil {
		return remote.ErrNoCredentials
	}
	return nil
}

// checkedClient turns answers no S3 server gives into setup errors
// (remote.CheckS3Answers).
type checkedClient struct{ aws.HTTPClient }

func (c checkedClient) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.HTTPClient.Do(req)
	return remote.DoS3Checked(req, resp, err)
}

// Put uploads data in one request with its Content-MD5.
func (c *Client) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	if err := remote.CheckOp(ctx, "put", key); err != nil {
		return err
	}
	sum := md5.Sum(data)
	return c.put(ctx, key, bytes.NewReader(data), int64(len(data)), sum[:], opts)
}

// PutReader uploads size bytes of r in one request with their Content-MD5,
// from a first pass over r. The SDK reads the body again to sign it, and
// rewinds it to send it.
func (c *Client) PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts remote.PutOptions) error {
	if err := remote.CheckOp(ctx, "put", key); err != nil {
		return err
	}
	sums, err := remote.SumsFor(ctx, r, size, true, opts.Sums)
	if err != nil {
		return &remote.Error{Op: "put", Key: key, Err: err}
	}
	return c.put(ctx, key, remote.CheckedReader(r, size, sums), size, sums.MD5[:], opts)
}

func (c *Client) put(ctx context.Context, key string, body io.Reader, size int64, sum []byte, opts remote.PutOptions) error {
	in := &s3.PutObjectInput{
		Bucket:        aws.String(c.bucket),
		Key:           aws.String(c.prefix + key),
		Body:          body,
		ContentLength: aws.Int64(size),
		ContentMD5:    aws.String(base64.StdEncoding.EncodeToString(sum)),
	}
	if opts.IfAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	if opts.IfMatch != "" {
		in.IfMatch = aws.String(opts.IfMatch)
	}
	if _, err := c.api.PutObject(ctx, in); err != nil {
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
	in := &s3.GetObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(c.prefix + key)}
	if r := remote.HTTPRange(offset, length); r != "" {
		in.Range = aws.String(r)
	}
	out, err := c.api.GetObject(ctx, in)
	if err != nil {
		if status, code := answer(err); status == http.StatusRequestedRangeNotSatisfiable || code == "InvalidRange" {
			// The object exists but ends before offset.
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, c.fail(ctx, "get", key, err)
	}
	return remote.ContextBody(ctx, out.Body), nil
}

// Stat returns key's size and modification time.
func (c *Client) Stat(ctx context.Context, key string) (remote.ObjectInfo, error) {
	if err := remote.CheckOp(ctx, "stat", key); err != nil {
		return remote.ObjectInfo{}, err
	}
	out, err := c.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(c.prefix + key)})
	if err != nil {
		return remote.ObjectInfo{}, c.fail(ctx, "stat", key, err)
	}
	return remote.ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified), ETag: aws.ToString(out.ETag)}, nil
}

// Delete removes key; a missing key is not an error.
func (c *Client) Delete(ctx context.Context, key string) error {
	if err := remote.CheckOp(ctx, "delete", key); err != nil {
		return err
	}
	_, err := c.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(c.bucket), Key: aws.String(c.prefix + key)})
	if err != nil {
		err = c.fail(ctx, "delete", key, err)
		if errors.Is(err, remote.ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// List pages through ListObjectsV2, merging each page's keys and common
// prefixes into one lexical order.
func (c *Client) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	return func(yield func(remote.ObjectInfo, error) bool) {
		if err := remote.CheckOp(ctx, "list", prefix); err != nil {
			yield(remote.ObjectInfo{}, err)
			return
		}
		in := &s3.ListObjectsV2Input{Bucket: aws.String(c.bucket), Prefix: aws.String(c.prefix + prefix)}
		if opts.Delimiter != "" {
			in.Delimiter = aws.String(opts.Delimiter)
		}
		if opts.StartAfter != "" {
			in.StartAfter = aws.String(c.prefix + opts.StartAfter)
		}
		if opts.FirstPage > 0 {
			in.MaxKeys = aws.Int32(int32(min(opts.FirstPage, 1000)))
		}
		full := c.prefix + prefix
		for {
			page, err := c.api.ListObjectsV2(ctx, in)
			if err != nil {
				yield(remote.ObjectInfo{}, c.fail(ctx, "list", prefix, err))
				return
			}
			items := make([]remote.ObjectInfo, 0, len(page.Contents)+len(page.CommonPrefixes))
			for _, o := range page.Contents {
				items = append(items, remote.ObjectInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
			}
			for _, p := range page.CommonPrefixes {
				items = append(items, remote.ObjectInfo{Key: aws.ToString(p.Prefix), Prefix: true})
			}
			if !remote.YieldPage(items, c.prefix, full, yield) {
				return
			}
			if !aws.ToBool(page.IsTruncated) {
				return
			}
			next := aws.ToString(page.NextContinuationToken)
			if next == "" || next == aws.ToString(in.ContinuationToken) {
				yield(remote.ObjectInfo{}, &remote.Error{Op: "list", Key: prefix, Err: remote.ErrEndlessListing})
				return
			}
			in.ContinuationToken, in.StartAfter, in.MaxKeys = aws.String(next), nil, nil
		}
	}
}

// answer extracts the HTTP status and S3 error code from an SDK error.
func answer(err error) (status int, code string) {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	return status, code
}

// fail maps an SDK error onto remote's errors. Messages keep the S3 code and
// message and drop request URLs.
func (c *Client) fail(ctx context.Context, op, key string, err error) error {
	f := remote.S3Failure{
		// An answer that broke off after its status (a cut body) is a
		// network failure too.
		Transient: remote.NetworkTransient(err) ||
			retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary,
	}
	f.Status, f.Code = answer(err)
	var ae smithy.APIError
	if errors.As(err, &ae) {
		f.Message = ae.ErrorMessage()
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	f.NotFound = errors.As(err, &nsk) || errors.As(err, &nf)
	return c.cfg.Fail(ctx, op, key, err, f)
}

// Backend serves s3:// URLs when s3.client is aws.
var Backend = remote.Backend{Scheme: "s3", Form: "s3://bucket[/prefix]", Client: "aws", Library: "aws-sdk-go-v2", Parse: remote.ParseS3URL,
	Open: func(ctx context.Context, loc remote.Location, cfg remote.S3Config) (remote.Client, error) {
		cfg.Bucket, cfg.Prefix = loc.Bucket, loc.Prefix
		return New(ctx, cfg)
	}}
