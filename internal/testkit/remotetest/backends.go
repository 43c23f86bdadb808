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
	// Name is "file", or "s3-" and a client of backend.Clients("s3")
	// (versitygw with it), or "minio-" and the client (a MinIO server).
	Name string
	// Server is the S3 server's kind ("" for file).
	Server string
	// URL is the remote as a user would configure it: file:///... or s3://bucket.
	URL string
	// S3 holds the rest of the configuration an s3 URL needs (client,
	// endpoint, path style, keys): what a config file or a subprocess gets.
	S3 backend.S3Options
	// Client is opened through backend.Open, so it retries like production.
	Client remote.Client
}

// Backends returns the ways to store of backend's table, each empty:
// "file" (a temp folder), and "s3-<client>" for each S3 client, each on a
// fresh bucket of the shared server (SharedServer), and, when a MinIO
// server is named (MinioServer), "minio-<client>" on it. Without a shared server the two S3
// backends are left out and reported as skipped subtests of t — except
// under CI=true, where the test fails.
func Backends(t *testing.T) []Backend {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "remote")
	bs := []Backend{{Name: "file", URL: "file://" + dir}}
	if os.Getenv(EnvEndpoint) == "" {
		for _, client := range backend.Clients("s3") {
			t.Run("s3-"+client, func(t *testing.T) { skipOrFail(t, howToRun) })
		}
	} else {
		bs = append(bs, s3Backends(t, SharedServer(t), "s3-")...)
	}
	if srv := minioFromEnv(); srv != nil {
		bs = append(bs, s3Backends(t, srv, "minio-")...)
	} else if os.Getenv("CI") == "true" {
		for _, client := range backend.Clients("s3") {
			t.Run("minio-"+client, func(t *testing.T) { t.Fatalf("CI=true: %s", howToRunMinio) })
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

// s3Backends are srv with each S3 client, on a fresh bucket each.
func s3Backends(t *testing.T, srv *Server, name string) []Backend {
	var bs []Backend
	for _, client := range backend.Clients("s3") {
		bs = append(bs, Backend{
			Name:   name + client,
			Server: srv.Kind,
			URL:    "s3://" + srv.NewBucket(t),
			S3:     AdminKey(srv, client),
		})
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

// MainCode is Main for a TestMain with work of its own around the tests:
// it returns the exit code instead of exiting.
func MainCode(m *testing.M) int { return runMain(m) }

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
