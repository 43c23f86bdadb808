package s3_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/s3"
)

func TestMain(m *testing.M) { remotetest.Main(m) }

func open(ctx context.Context, cfg remote.S3Config) (remote.Client, error) {
	return s3.New(ctx, remote.Location{Bucket: cfg.Bucket, Prefix: cfg.Prefix}, cfg)
}

func TestDriver(t *testing.T) { remotetest.RunS3Driver(t, open) }

func BenchmarkPutSmall(b *testing.B) {
	srv := remotetest.SharedServer(b)
	c, err := open(b.Context(), remotetest.S3Config(srv, srv.NewBucket(b), ""))
	if err != nil {
		b.Fatal(err)
	}
	remotetest.BenchPutSmall(b, c)
}

func BenchmarkGetSmall(b *testing.B) {
	srv := remotetest.SharedServer(b)
	c, err := open(b.Context(), remotetest.S3Config(srv, srv.NewBucket(b), ""))
	if err != nil {
		b.Fatal(err)
	}
	remotetest.BenchGetSmall(b, c)
}

// With no keys and no endpoint (AWS itself) the credential chain asks the
// EC2 metadata service, as an instance role needs; off EC2 that fails,
// and the SDK's own warning of it ("falling back to IMDSv1") went to
// stderr before ompsync's one line. The metadata service here is a local
// one that has no token and no role.
func TestNoCredentialsSaysNothingOfItsOwn(t *testing.T) {
	var asked atomic.Int32
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.NotFound(w, r)
	}))
	defer imds.Close()
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL, "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none,
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_EC2_METADATA_DISABLED": "", "AWS_REGION": "us-east-1",
	} {
		t.Setenv(k, v)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	_, err = s3.New(t.Context(), remote.Location{Bucket: "b"}, remote.S3Config{})
	os.Stderr = stderr
	w.Close()
	said, _ := io.ReadAll(r)
	if !errors.Is(err, remote.ErrNoCredentials) {
		t.Errorf("New without keys: %v, want ErrNoCredentials", err)
	}
	if asked.Load() == 0 {
		t.Fatal("the metadata service was not asked: the test proves nothing")
	}
	if len(said) > 0 {
		t.Errorf("the S3 client wrote to stderr: %q", said)
	}
}
