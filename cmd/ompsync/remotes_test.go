package main

import (
	"testing"

	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/remote/remotetest"
)

// forEachRemote runs f against every kind of remote.
func forEachRemote(t *testing.T, f func(t *testing.T, url string, s3 backend.S3Options)) {
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) { f(t, b.URL, b.S3) })
}
