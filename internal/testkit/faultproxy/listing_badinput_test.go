package faultproxy_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/faultproxy"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
)

// listXML renders a ListObjectsV2 answer with the given keys.
func listXML(bucket string, truncated bool, token string, keys ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>%s</Name><Prefix></Prefix><KeyCount>%d</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>%t</IsTruncated>`, bucket, len(keys), truncated)
	if token != "" {
		fmt.Fprintf(&b, `<NextContinuationToken>%s</NextContinuationToken>`, token)
	}
	for _, k := range keys {
		fmt.Fprintf(&b, `<Contents><Key>%s</Key><LastModified>2026-11-30T00:00:00.000Z</LastModified><ETag>"x"</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass></Contents>`, k)
	}
	b.WriteString(`</ListBucketResult>`)
	return []byte(b.String())
}

// listWith opens bucket through a proxy whose listings are replaced by
// body(request number), and lists prefix "v1/sessions/x/" with a bound on
// time and entries. It returns the keys, how many LIST requests reached
// the proxy, and the error that ended the listing.
func listWith(t *testing.T, client string, body func(n int64) []byte) (keys []string, lists int64, err error) {
	t.Helper()
	var n atomic.Int64
	p, srv := start(t, faultproxy.Config{Rewrite: func(r *http.Request, b []byte) []byte {
		if !isList(r) {
			return b
		}
		return body(n.Add(1))
	}})
	bucket := srv.NewBucket(t)
	remotetest.Put(t, openDirect(t, bucket, srv), "v1/sessions/x/laptop/session/0000000000000001/meta", []byte("m"))
	c, oerr := backend.Open(t.Context(), "s3://"+bucket, options(client, p.URL, srv))
	if oerr != nil {
		t.Fatal(oerr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for info, lerr := range c.List(ctx, "v1/sessions/x/", remote.ListOptions{}) {
		if lerr != nil {
			err = lerr
			break
		}
		keys = append(keys, info.Key)
		if len(keys) > 10_000 {
			t.Errorf("listing does not end: %d keys", len(keys))
			break
		}
	}
	if ctx.Err() != nil {
		t.Errorf("listing still running after 20s (%d LIST requests)", n.Load())
	}
	return keys, n.Load(), err
}

// A server that answers a listing with something that is not a listing
// makes List fail with an error, or (for a document the XML decoder does
// not recognise at all, such as an HTML page) list nothing: it never
// yields made-up keys or hangs.
func TestGarbageListingBody(t *testing.T) {
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			for name, body := range map[string][]byte{
				"html":       []byte("<html><body>502 Bad Gateway</body></html>"),
				"binary":     {0x28, 0xb5, 0x2f, 0xfd, 0xff, 0x00, 0x01},
				"empty":      nil,
				"bad size":   []byte(strings.Replace(string(listXML("b", false, "", "v1/sessions/x/a")), "<Size>1</Size>", "<Size>many</Size>", 1)),
				"bad date":   []byte(strings.Replace(string(listXML("b", false, "", "v1/sessions/x/a")), "2026-11-30T00:00:00.000Z", "yesterday", 1)),
				"cut in tag": listXML("b", false, "", "v1/sessions/x/a")[:150],
			} {
				keys, _, err := listWith(t, client, func(int64) []byte { return body })
				if len(keys) > 0 {
					t.Errorf("%s: listed %q (err %v)", name, keys, err)
				}
				if err != nil && strings.Contains(err.Error(), "\n") {
					t.Errorf("%s: error is not one line: %q", name, err)
				}
			}
		})
	}
}

// A listing that says it is truncated but gives no way on (no token, or
// the same token again) ends with an error: the client neither loops
// forever nor takes a partial listing for the whole.
func TestEndlessListing(t *testing.T) {
	for _, client := range clients {
		for name, token := range map[string]string{"no token": "", "same token": "again"} {
			t.Run(client+"/"+name, func(t *testing.T) {
				keys, lists, err := listWith(t, client, func(n int64) []byte {
					return listXML("b", true, token, fmt.Sprintf("v1/sessions/x/k%06d", n))
				})
				if lists > 100 {
					t.Errorf("%d LIST requests for one listing", lists)
				}
				if err == nil {
					t.Errorf("a listing without end gave %d keys and no error", len(keys))
				}
			})
		}
	}
}

// A listing holding keys outside the prefix asked for (a confused or
// hostile server) never reaches the caller: code that cuts the prefix off
// a listed key would otherwise crash or mis-name what it found.
func TestListingOutsidePrefix(t *testing.T) {
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			keys, _, err := listWith(t, client, func(int64) []byte {
				return listXML("b", false, "", "v1/", "v1/sessions/x/ok", "zzz/other")
			})
			for _, k := range keys {
				if !strings.HasPrefix(k, "v1/sessions/x/") {
					t.Errorf("listing of v1/sessions/x/ yields %q (err %v)", k, err)
				}
			}
		})
	}
}
