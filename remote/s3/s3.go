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
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
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

// api is the aws SDK's side of remote.S3Client.
type api struct {
	s3     *s3.Client
	bucket *string
}

// responseHeaderTimeout bounds how long a request waits for the server's
// answer once sent; a stuck server then fails transiently instead of hanging.
const responseHeaderTimeout = time.Minute

// Client stores objects in one bucket, under an optional prefix: its own
// type, so a caller can tell which driver it opened.
type Client struct{ *remote.S3Client }

// New builds a client for loc's bucket and prefix with cfg's other
// settings: Backend's Open. It makes no request: a wrong bucket or key
// shows up on the first operation.
func New(ctx context.Context, loc remote.Location, cfg remote.S3Config) (remote.Client, error) {
	cfg.Bucket, cfg.Prefix = loc.Bucket, loc.Prefix
	setup, err := cfg.Check("s3")
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
	} else if setup.Endpoint != nil {
		// A self-hosted server has no instance roles: asking the EC2
		// metadata service would only wait for an answer that never comes.
		loadOpts = append(loadOpts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	if setup.CAPEM != nil {
		loadOpts = append(loadOpts, config.WithCustomCABundle(bytes.NewReader(setup.CAPEM)))
	}
	if setup.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(setup.Region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("s3: load aws config: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	if !static {
		// What it finds is cached for the requests.
		err := remote.FindCredentials(ctx, func(ctx context.Context) bool {
			if awsCfg.Credentials == nil {
				return false
			}
			_, err := awsCfg.Credentials.Retrieve(ctx)
			return err == nil
		})
		if err != nil {
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
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.HTTPClient = checkedClient{httpClient}
		if setup.Endpoint != nil {
			o.BaseEndpoint = aws.String(setup.Endpoint.String())
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
	return &Client{remote.NewS3Client(api{client, aws.String(cfg.Bucket)}, cfg, setup.Prefix)}, nil
}

// checkedClient turns answers no S3 server gives into setup errors
// (remote.CheckS3Answers).
type checkedClient struct{ aws.HTTPClient }

func (c checkedClient) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.HTTPClient.Do(req)
	return remote.DoS3Checked(req, resp, err)
}

func (a api) PutObject(ctx context.Context, key string, body io.Reader, size int64, sums remote.Sums, opts remote.PutOptions) error {
	in := &s3.PutObjectInput{Bucket: a.bucket, Key: aws.String(key), Body: body, ContentLength: aws.Int64(size),
		ContentMD5: aws.String(base64.StdEncoding.EncodeToString(sums.MD5[:])), IfMatch: optional(opts.IfMatch)}
	if opts.IfAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	_, err := a.s3.PutObject(ctx, in)
	return err
}

func (api) SignsSHA256() bool { return false }

func (a api) GetObject(ctx context.Context, key, byteRange string) (io.ReadCloser, error) {
	out, err := a.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: a.bucket, Key: aws.String(key), Range: optional(byteRange)})
	if err != nil {
		return nil, err
	}
	return out.Body, nil
}

func (a api) HeadObject(ctx context.Context, key string) (remote.ObjectInfo, error) {
	out, err := a.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: a.bucket, Key: aws.String(key)})
	if err != nil {
		return remote.ObjectInfo{}, err
	}
	return remote.ObjectInfo{Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified), ETag: aws.ToString(out.ETag)}, nil
}

func (a api) DeleteObject(ctx context.Context, key string) error {
	_, err := a.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: a.bucket, Key: aws.String(key)})
	return err
}

func (a api) ListPage(ctx context.Context, q remote.S3Query) (remote.S3Page, error) {
	page, err := a.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: a.bucket, Prefix: aws.String(q.Prefix), MaxKeys: aws.Int32(int32(q.MaxKeys)),
		Delimiter: optional(q.Delimiter), StartAfter: optional(q.StartAfter), ContinuationToken: optional(q.Token)})
	if err != nil {
		return remote.S3Page{}, err
	}
	out := remote.S3Page{Truncated: aws.ToBool(page.IsTruncated), Next: aws.ToString(page.NextContinuationToken)}
	for _, o := range page.Contents {
		out.Items = append(out.Items, remote.ObjectInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
	}
	for _, p := range page.CommonPrefixes {
		out.Items = append(out.Items, remote.ObjectInfo{Key: aws.ToString(p.Prefix), Prefix: true})
	}
	return out, nil
}

// optional is s for an optional field: nil when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Failure tells what the SDK says of a failed request.
func (api) Failure(err error) remote.S3Failure {
	var f remote.S3Failure
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		f.Status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		f.Code, f.Message = ae.ErrorCode(), ae.ErrorMessage()
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	f.NotFound = errors.As(err, &nsk) || errors.As(err, &nf)
	// An answer that broke off after its status (a cut body) is a network
	// failure too.
	f.Transient = remote.NetworkTransient(err) || retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary
	return f
}

// Backend serves s3:// URLs when s3.client is aws.
var Backend = remote.Backend{Scheme: "s3", Form: "s3://bucket[/prefix]", Client: "aws", Library: "aws-sdk-go-v2", Parse: remote.ParseS3URL, Open: New}
