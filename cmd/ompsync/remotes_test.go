package main

import (
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote/backend"
)

// forEachRemote runs f against every kind of remote, side by side: each
// on a remote of its own, mostly waiting on processes and servers, which
// made these tests most of the package's time one after the other.
func forEachRemote(t *testing.T, f func(t *testing.T, url string, s3 backend.S3Options)) {
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		t.Parallel()
		f(t, b.URL, b.S3)
	})
}
