package remotetest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/ompsync/ompsync/remote/backend"
)

// NoDeleteKey returns temporary credentials on the MinIO server srv that
// may do everything on bucket except delete objects (s3:DeleteObject
// denied): a machine's key made unable to destroy the backup. They come
// from MinIO's STS AssumeRole with srv's root key and an inline policy,
// so no user or policy is left behind on the server.
func NoDeleteKey(t testing.TB, srv *Server, client, bucket string) backend.S3Options {
	t.Helper()
	policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[
{"Effect":"Allow","Action":["s3:*"],"Resource":["arn:aws:s3:::%[1]s","arn:aws:s3:::%[1]s/*"]},
{"Effect":"Deny","Action":["s3:DeleteObject"],"Resource":["arn:aws:s3:::%[1]s/*"]}]}`, bucket)
	creds, err := credentials.NewSTSAssumeRole(srv.Endpoint, credentials.STSAssumeRoleOptions{
		AccessKey:       srv.AccessKey,
		SecretKey:       srv.SecretKey,
		Policy:          policy,
		Location:        "us-east-1",
		DurationSeconds: 3600,
	})
	if err != nil {
		t.Fatalf("STS assume role on %s: %v", srv.Endpoint, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := creds.GetWithContext(&credentials.CredContext{Client: http.DefaultClient, Context: ctx})
	if err != nil {
		t.Fatalf("STS assume role on %s: %v", srv.Endpoint, err)
	}
	return backend.S3Options{
		Client:          client,
		Endpoint:        srv.Endpoint,
		Region:          "us-east-1",
		PathStyle:       true,
		AccessKeyID:     v.AccessKeyID,
		SecretAccessKey: v.SecretAccessKey,
		SessionToken:    v.SessionToken,
	}
}

// AdminKey is srv's root key with the named client (one of
// backend.Clients("s3")), path-style.
func AdminKey(srv *Server, client string) backend.S3Options {
	return backend.S3Options{
		Client:          client,
		Endpoint:        srv.Endpoint,
		Region:          "us-east-1",
		PathStyle:       true,
		AccessKeyID:     srv.AccessKey,
		SecretAccessKey: srv.SecretKey,
	}
}
