package remotetest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
)

// Backend is one way to store, ready for an integration test.
type Backend struct {
	// Name is "file", "s3-aws" or "s3-minio".
	Name string
	// URL is the remote as a user would configure it: file:///... or s3://bucket.
	URL string
	// S3 holds the rest of the configuration an s3 URL needs (client,
	// endpoint, path style, keys): what a config file or a subprocess gets.
	S3 backend.S3Options
	// Client is opened through backend.Open, so it retries like production.
	Client remote.Client
}

// Backends returns the three ways to store, each empty: "file" (a temp
// folder), and "s3-aws" and "s3-minio", each on a fresh bucket of the shared
// server (SharedServer). Without a shared server the two S3 backends are
// left out and reported as skipped subtests of t — except under CI=true,
// where the test fails.
func Backends(t *testing.T) []Backend {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "remote")
	bs := []Backend{{Name: "file", URL: "file://" + dir}}
	names := []string{"s3-" + backend.ClientAWS, "s3-" + backend.ClientMinio}
	if os.Getenv(EnvEndpoint) == "" {
		for _, name := range names {
			t.Run(name, func(t *testing.T) { skipOrFail(t, howToRun) })
		}
	} else {
		srv := SharedServer(t)
		for i, client := range []string{backend.ClientAWS, backend.ClientMinio} {
			bs = append(bs, Backend{
				Name: names[i],
				URL:  "s3://" + srv.NewBucket(t),
				S3: backend.S3Options{
					Client:          client,
					Endpoint:        srv.Endpoint,
					Region:          "us-east-1",
					PathStyle:       true,
					AccessKeyID:     srv.AccessKey,
					SecretAccessKey: srv.SecretKey,
				},
			})
		}
	}
	for i := range bs {
		c, err := backend.Open(t.Context(), bs[i].URL, bs[i].S3)
		if err != nil {
			t.Fatalf("open backend %s: %v", bs[i].Name, err)
		}
		bs[i].Client = c
	}
	return bs
}

// Each runs f as a subtest of t for every backend of Backends.
func Each(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range Backends(t) {
		t.Run(b.Name, func(t *testing.T) { f(t, b) })
	}
}

// Main runs a package's tests with an S3 server. When OMPSYNC_TEST_S3_* are
// unset and a versitygw binary is found, it starts one server for the whole
// test binary and sets them (subprocesses inherit them too); otherwise it
// changes nothing, and S3 tests skip (fail under CI=true). Call it from
// TestMain:
//
//	func TestMain(m *testing.M) { remotetest.Main(m) }
func Main(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if os.Getenv(EnvEndpoint) != "" {
		return m.Run()
	}
	bin, err := FindVersitygw()
	if err != nil {
		return m.Run() // the S3 tests say how to run them
	}
	dir, err := os.MkdirTemp("", "ompsync-versitygw-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "remotetest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	p, err := startProcess(bin, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "remotetest:", err)
		return 1
	}
	defer p.stop()
	for k, v := range map[string]string{EnvEndpoint: p.endpoint(), EnvAccessKey: p.access, EnvSecretKey: p.secret} {
		if err := os.Setenv(k, v); err != nil {
			fmt.Fprintln(os.Stderr, "remotetest:", err)
			return 1
		}
	}
	return m.Run()
}
