package remotetest

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	mc "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Bucket kinds a user protects a backup with (docs/SECURITY.md).
const (
	BucketVersioned = "versioned"   // versioning enabled
	BucketLocked    = "object-lock" // object lock, default GOVERNANCE retention
)

// adminClient is a minio-go client with the root key of the MinIO server
// srv, for what the remote drivers never do: bucket settings and versions.
func adminClient(t testing.TB, srv *Server) *mc.Client {
	t.Helper()
	u, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c, err := mc.New(u.Host, &mc.Options{
		Creds:        credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""),
		Secure:       u.Scheme == "https",
		Region:       "us-east-1",
		BucketLookup: mc.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NewProtectedBucket creates a bucket of kind (BucketVersioned or
// BucketLocked) on the MinIO server srv and returns its name. A locked
// bucket has versioning (object lock implies it) and a default retention
// of one day in GOVERNANCE mode, so every object put is locked.
func NewProtectedBucket(t testing.TB, srv *Server, kind string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := adminClient(t, srv)
	name := "test-" + kind[:4] + "-" + randomHex(6)
	if err := c.MakeBucket(ctx, name, mc.MakeBucketOptions{Region: "us-east-1", ObjectLocking: kind == BucketLocked}); err != nil {
		t.Fatalf("create bucket %s on %s: %v", name, srv.Endpoint, err)
	}
	switch kind {
	case BucketVersioned:
		if err := c.EnableVersioning(ctx, name); err != nil {
			t.Fatalf("enable versioning on %s: %v", name, err)
		}
	case BucketLocked:
		mode, days, unit := mc.Governance, uint(1), mc.Days
		if err := c.SetObjectLockConfig(ctx, name, &mode, &days, &unit); err != nil {
			t.Fatalf("default retention on %s: %v", name, err)
		}
	default:
		t.Fatalf("remotetest: unknown bucket kind %q", kind)
	}
	return name
}

// Version is one version of an object, or a delete marker, as the server
// keeps it.
type Version struct {
	Key          string
	VersionID    string
	IsLatest     bool
	DeleteMarker bool
	Size         int64
}

// Versions lists every version and delete marker in bucket on the MinIO
// server srv, by key, newest version of a key first.
func Versions(t testing.TB, srv *Server, bucket string) []Version {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []Version
	for o := range adminClient(t, srv).ListObjects(ctx, bucket, mc.ListObjectsOptions{Recursive: true, WithVersions: true}) {
		if o.Err != nil {
			t.Fatalf("list versions in %s: %v", bucket, o.Err)
		}
		out = append(out, Version{Key: o.Key, VersionID: o.VersionID, IsLatest: o.IsLatest, DeleteMarker: o.IsDeleteMarker, Size: o.Size})
	}
	slices.SortStableFunc(out, func(a, b Version) int {
		if a.Key < b.Key {
			return -1
		}
		if a.Key > b.Key {
			return 1
		}
		return 0
	})
	return out
}

// Retention returns the object lock mode and retain-until date of one
// version of key in bucket on the MinIO server srv ("" when unlocked).
func Retention(t testing.TB, srv *Server, bucket, key, versionID string) (string, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mode, until, err := adminClient(t, srv).GetObjectRetention(ctx, bucket, key, versionID)
	if err != nil {
		t.Fatalf("retention of %s in %s: %v", key, bucket, err)
	}
	var m string
	if mode != nil {
		m = string(*mode)
	}
	var u time.Time
	if until != nil {
		u = *until
	}
	return m, u
}

// DeleteVersion deletes one version of key in bucket on the MinIO server
// srv for good, as ransomware holding the root key would try, without
// bypassing a GOVERNANCE retention.
func DeleteVersion(t testing.TB, srv *Server, bucket, key, versionID string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return adminClient(t, srv).RemoveObject(ctx, bucket, key, mc.RemoveObjectOptions{VersionID: versionID})
}
