package s3_test

import (
	"context"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/remotetest"
	"github.com/ompsync/ompsync/remote/s3"
)

func TestMain(m *testing.M) { remotetest.Main(m) }

func open(ctx context.Context, cfg remote.S3Config) (remote.Client, error) {
	c, err := s3.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return c, nil
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
