package remote

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
)

// S3Config configures an S3 driver (remote/s3 or remote/minio).
type S3Config struct {
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
	// AccessKeyID and SecretAccessKey are static credentials. Empty means the
	// default chain: environment, shared profiles, instance roles.
	AccessKeyID     string
	SecretAccessKey string
	// HTTPClient replaces the driver's HTTP client (tests, proxies). Nil
	// means the driver's default, which honours AWS_CA_BUNDLE for the aws
	// driver.
	HTTPClient *http.Client
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

// KeyPrefix returns Prefix normalised to "" or "some/prefix/" after checking it.
func (c S3Config) KeyPrefix() (string, error) {
	p := strings.Trim(c.Prefix, "/")
	if p == "" {
		return "", nil
	}
	if err := ValidateKey(p); err != nil {
		return "", fmt.Errorf("s3 prefix %q: %w", c.Prefix, err)
	}
	return p + "/", nil
}

// String describes the config without the secret key, so a config can be
// logged or printed safely.
func (c S3Config) String() string {
	secret := ""
	if c.SecretAccessKey != "" {
		secret = "[redacted]"
	}
	return fmt.Sprintf("{Bucket:%s Prefix:%s Endpoint:%s Region:%s PathStyle:%t AccessKeyID:%s SecretAccessKey:%s}",
		c.Bucket, c.Prefix, c.Endpoint, c.Region, c.PathStyle, c.AccessKeyID, secret)
}

// GoString keeps %#v from printing the secret too.
func (c S3Config) GoString() string { return "remote.S3Config" + c.String() }

// LogValue keeps the secret out of slog output.
func (c S3Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("bucket", c.Bucket),
		slog.String("prefix", c.Prefix),
		slog.String("endpoint", c.Endpoint),
		slog.String("region", c.Region),
		slog.Bool("path_style", c.PathStyle),
	)
}
