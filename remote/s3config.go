package remote

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// IdleConnsPerHost is how many idle connections the S3 drivers keep to
// their server, enough for every transfer a client runs at once (the
// config key transfers is at most this), so none waits for a new
// connection's handshake, which costs a round trip on a real line.
const IdleConnsPerHost = 64

// S3Config configures an S3 driver (remote/s3 or remote/minio).
type S3Config struct {
	// Client is the s3.client value that picked the driver, "" for the
	// default (see remote/backend).
	Client string
	// Bucket holds the objects.
	Bucket string
	// Prefix, when set, is prepended to every key ("a/b" stores key k as
	// "a/b/k"), and listings return keys relative to it.
	Prefix string
	// Endpoint is the server's URL, such as http://127.0.0.1:7070 or
	// https://s3.example.com; a bare host[:port] means https. Empty means AWS.
	Endpoint string
	// Region defaults to us-east-1 when Endpoint is set. On AWS an empty
	// Region comes from the environment or profile (aws driver, falling
	// back to us-east-1) or from the bucket's location (minio driver).
	Region string
	// PathStyle addresses buckets as endpoint/bucket rather than
	// bucket.endpoint (needed for most self-hosted servers).
	PathStyle bool
	// CAFile names a PEM file of the certificate authorities to trust, in
	// place of the system's, for a server with a private CA.
	CAFile string
	// AccessKeyID and SecretAccessKey are static credentials. Empty means the
	// default chain: environment, shared profiles, instance roles.
	AccessKeyID     string
	SecretAccessKey string
	// SessionToken goes with them for temporary (STS) credentials.
	SessionToken string
	// HTTPClient replaces the driver's HTTP client (tests, proxies). Nil
	// means the driver's default, which honours AWS_CA_BUNDLE for the aws
	// driver.
	HTTPClient *http.Client `json:"-"`
}

// EndpointURL parses Endpoint, adding https:// when it has no scheme.
// It returns nil for an empty Endpoint.
func (c S3Config) EndpointURL() (*url.URL, error) {
	if c.Endpoint == "" {
		return nil, nil
	}
	raw := c.Endpoint
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("s3 endpoint %q: not a URL", c.Endpoint)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("s3 endpoint %q: scheme must be http or https", c.Endpoint)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("s3 endpoint %q: want scheme://host[:port] and nothing else", c.Endpoint)
	}
	u.Path = ""
	return u, nil
}

// Redacted stands in for a secret in anything ompsync prints.
const Redacted = "<redacted>"

// RedactKeyID keeps a long access key id's first four characters, which
// tell keys apart without revealing them; a short one is hidden whole.
func RedactKeyID(s string) string {
	if len(s) < 16 {
		return Redacted
	}
	return s[:4] + Redacted
}

// redacted is c with its credentials hidden, for printing and logging.
func (c S3Config) redacted() S3Config {
	hide := func(s *string, f func(string) string) {
		if *s != "" {
			*s = f(*s)
		}
	}
	full := func(string) string { return Redacted }
	hide(&c.AccessKeyID, RedactKeyID)
	hide(&c.SecretAccessKey, full)
	hide(&c.SessionToken, full)
	c.HTTPClient = nil
	return c
}

// String keeps the credentials out of %v, %+v and log lines.
func (c S3Config) String() string {
	r := c.redacted()
	return fmt.Sprintf("{Client:%s Bucket:%s Prefix:%s Endpoint:%s Region:%s PathStyle:%t CAFile:%s AccessKeyID:%s SecretAccessKey:%s SessionToken:%s}",
		r.Client, r.Bucket, r.Prefix, r.Endpoint, r.Region, r.PathStyle, r.CAFile, r.AccessKeyID, r.SecretAccessKey, r.SessionToken)
}

// GoString keeps the credentials out of %#v.
func (c S3Config) GoString() string { return "remote.S3Config" + c.String() }

// LogValue keeps the credentials out of structured logs.
func (c S3Config) LogValue() slog.Value {
	r := c.redacted()
	return slog.GroupValue(
		slog.String("client", r.Client),
		slog.String("bucket", r.Bucket),
		slog.String("prefix", r.Prefix),
		slog.String("endpoint", r.Endpoint),
		slog.String("region", r.Region),
		slog.Bool("path_style", r.PathStyle),
		slog.String("ca_file", r.CAFile),
		slog.String("access_key_id", r.AccessKeyID),
		slog.String("secret_access_key", r.SecretAccessKey),
		slog.String("session_token", r.SessionToken),
	)
}

// MarshalJSON keeps the credentials out of JSON (slog's JSON handler
// marshals a config it is given); ompsync never needs to write them out.
func (c S3Config) MarshalJSON() ([]byte, error) {
	type plain S3Config // no methods: no recursion
	return json.Marshal(plain(c.redacted()))
}

// CredentialsTimeout bounds an S3 driver's search for credentials: on AWS
// the last place asked is the EC2 metadata service, which off EC2 never
// answers.
const CredentialsTimeout = 5 * time.Second

// FindCredentials runs a driver's search for credentials once, now (find
// reports whether it found any), so that none is one clear error before
// any request, not the library's chain of every place it asked or a
// refusal of unsigned requests.
func FindCredentials(ctx context.Context, find func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(ctx, CredentialsTimeout)
	defer cancel()
	if !find(ctx) {
		return ErrNoCredentials
	}
	return nil
}

// S3Setup is what both S3 drivers build their client from.
type S3Setup struct {
	Prefix   string   // Prefix, "" or "some/prefix/"
	Endpoint *url.URL // EndpointURL's; nil for AWS
	// Region is Region, or us-east-1 for a self-hosted server (the SDK
	// default it expects, whatever AWS_REGION says).
	Region string
	// CAPEM and CAs are CAFile's PEM bytes and their certificates, nil
	// without a CAFile.
	CAPEM []byte
	CAs   *x509.CertPool
}

// Check is what an S3 driver checks before it builds its client (driver
// names it in errors): a bucket, a valid prefix and endpoint, both static
// credentials or neither, and a readable CAFile.
func (c S3Config) Check(driver string) (s S3Setup, err error) {
	if c.Bucket == "" {
		return s, fmt.Errorf("%s: no bucket", driver)
	}
	if p := strings.Trim(c.Prefix, "/"); p != "" { // "" or "some/prefix/"
		if err := ValidateKey(p); err != nil {
			return s, fmt.Errorf("s3 prefix %q: %w", c.Prefix, err)
		}
		s.Prefix = p + "/"
	}
	if s.Endpoint, err = c.EndpointURL(); err != nil {
		return s, err
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		return s, fmt.Errorf("%s: give both access key id and secret access key, or neither", driver)
	}
	s.Region = c.Region
	if s.Region == "" && s.Endpoint != nil {
		s.Region = "us-east-1"
	}
	if c.CAFile == "" {
		return s, nil
	}
	if s.CAPEM, err = os.ReadFile(c.CAFile); err != nil {
		return s, fmt.Errorf("s3.ca_file: %w", err)
	}
	s.CAs = x509.NewCertPool()
	if !s.CAs.AppendCertsFromPEM(s.CAPEM) {
		return s, fmt.Errorf("s3.ca_file %s holds no PEM certificate (-----BEGIN CERTIFICATE-----)", c.CAFile)
	}
	return s, nil
}

// S3Failure is what an S3 driver's library tells of a failed request.
type S3Failure struct {
	Status        int    // the HTTP status, 0 when none came
	Code, Message string // the S3 error answer's, "" when none came
	NotFound      bool   // the library's own not-found errors
	Transient     bool   // the library's own judgement that a retry may do
}

// Fail maps a driver's error onto remote's errors (what the library tells
// of it in f), without request URLs.
func (c S3Config) Fail(ctx context.Context, op, key string, err error, f S3Failure) error {
	wrap := func(e error) error { return &Error{Op: op, Key: key, Err: e} }
	if errors.Is(err, ErrSourceChanged) { // a put's body changed as it was sent
		return wrap(ErrSourceChanged)
	}
	if cerr := ctx.Err(); cerr != nil {
		return wrap(cerr)
	}
	if se, ok := Setup(err); ok {
		return wrap(se)
	}
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	switch {
	// A TLS certificate the client refused.
	case errors.As(err, &unknown) && c.CAFile != "":
		return wrap(&SetupError{fmt.Sprintf("the server's certificate is not signed by an authority in s3.ca_file (%s): set it to the file of the authority that signed it (PEM)", c.CAFile)})
	case errors.As(err, &unknown):
		return wrap(&SetupError{"the server's certificate is signed by an authority this machine does not trust: set s3.ca_file (or AWS_CA_BUNDLE) to the file of that authority's certificate (PEM)"})
	case errors.As(err, &host):
		return wrap(&SetupError{fmt.Sprintf("the server's certificate is not for %s (%v): check s3.endpoint", host.Host, host)})
	case errors.Is(err, http.ErrSchemeMismatch):
		return wrap(&SetupError{"the server at s3.endpoint answers in plain HTTP, not HTTPS: write s3.endpoint as http://..., or turn on TLS at the server"})
	// Wrong credentials (versitygw says XAdminUserNotFound, with HTTP 404).
	case f.Code == "InvalidAccessKeyId", f.Code == "XAdminUserNotFound":
		return wrap(ErrUnknownAccessKey)
	case f.Code == "SignatureDoesNotMatch":
		return wrap(ErrWrongSecret)
	case f.Code == "NoSuchBucket":
		return wrap(fmt.Errorf("bucket %q does not exist (NoSuchBucket): create it, or correct the bucket in remote", c.Bucket))
	case f.NotFound, f.Code == "NoSuchKey", f.Code == "NotFound", f.Status == http.StatusNotFound:
		return wrap(ErrNotFound)
	case f.Code == "PreconditionFailed", f.Status == http.StatusPreconditionFailed:
		return wrap(ErrPreconditionFailed)
	// Refused to these credentials (a policy without the operation):
	// AccessDenied, or a 403 with no code of its own (a HEAD answer has no
	// body: the aws SDK names it Forbidden, minio-go AccessDenied, so there
	// a wrong secret looks the same). A skewed clock (RequestTimeTooSkewed,
	// also 403) is not.
	case f.Code == "AccessDenied", f.Status == http.StatusForbidden && (f.Code == "" || f.Code == "Forbidden"):
		return wrap(fmt.Errorf("%w (s3 answered HTTP %d %s)", ErrAccessDenied, f.Status, f.Code))
	case f.Status != 0 || f.Code != "":
		msg := fmt.Sprintf("s3 answered HTTP %d", f.Status)
		if f.Code != "" || f.Message != "" {
			msg += fmt.Sprintf(" %s: %s", f.Code, f.Message)
		}
		return &Error{Op: op, Key: key, Transient: HTTPTransient(f.Status, f.Code) || f.Transient, Err: errors.New(msg)}
	}
	// No answer: the request did not get through. Keep the cause (for
	// errors.Is) but not the request URL.
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) {
		cause = ue.Err
	}
	return &Error{Op: op, Key: key, Transient: NetworkTransient(err) || f.Transient, Err: fmt.Errorf("s3 request: %w", cause)}
}
