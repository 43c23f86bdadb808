package bench

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
)

// Server is a private versitygw on a loopback port, the tests' own
// (remotetest), with keep-alive on: without it versitygw answers every
// request with "Connection: close", and each request of every tool pays a
// TCP connect, where S3 services keep connections open.
type Server struct{ *remotetest.Versitygw }

// StartServer starts versitygw with its buckets under dir.
func StartServer(dir string) (*Server, error) {
	v, err := remotetest.StartVersitygw(dir, "--keep-alive")
	if err != nil {
		return nil, err
	}
	return &Server{v}, nil
}

// Close stops the server.
func (s *Server) Close() { s.Stop() }

// CreateBucket creates a bucket through the S3 API.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	api := s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
	if _, err := api.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}
