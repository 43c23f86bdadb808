package minio_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/minio"
)

func TestMain(m *testing.M) { remotetest.Main(m) }

func open(ctx context.Context, cfg remote.S3Config) (remote.Client, error) {
	return minio.New(ctx, remote.Location{Bucket: cfg.Bucket, Prefix: cfg.Prefix}, cfg)
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

// minio-go's page request takes no context: List still returns as soon as
// the caller's context ends, while a server sits on the request.
func TestListCancelledWhileServerHangs(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: Close waits for the handler
	c, err := open(t.Context(), remote.S3Config{Bucket: "bkt", Endpoint: srv.URL, PathStyle: true, AccessKeyID: "k", SecretAccessKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	var lerr error
	for _, err := range c.List(ctx, "x/", remote.ListOptions{}) {
		lerr = err
		break
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("List returned %v after the context ended", took)
	}
	if !errors.Is(lerr, context.DeadlineExceeded) {
		t.Errorf("List err = %v, want context.DeadlineExceeded", lerr)
	}
	if remote.IsTransient(lerr) {
		t.Errorf("a cancelled listing is transient: %v", lerr)
	}
}
