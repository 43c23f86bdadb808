package remotetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ompsync/ompsync/remote"
)

// OpenS3 opens an S3 driver on cfg; each S3 driver's tests pass theirs to
// RunS3Driver.
type OpenS3 func(ctx context.Context, cfg remote.S3Config) (remote.Client, error)

// S3Config is the configuration of a driver on srv's bucket under prefix.
func S3Config(srv *Server, bucket, prefix string) remote.S3Config {
	return remote.S3Config{
		Bucket: bucket, Prefix: prefix, Endpoint: srv.Endpoint, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey,
	}
}

// RunS3Driver runs what every S3 driver must pass beyond the conformance
// suite, against versitygw: the suite itself under a prefix, the protocol
// checks, checksums the server verifies, error mapping, secrets kept out of
// errors, AWS_CA_BUNDLE with a custom client, and an outage. The suite,
// prefixes, checksums and errors run against MinIO too, when a MinIO
// server is named (MinioServer).
func RunS3Driver(t *testing.T, openS3 OpenS3) {
	open := func(t testing.TB, cfg remote.S3Config) remote.Client {
		t.Helper()
		c, err := openS3(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	config := S3Config
	t.Run("Protocol", func(t *testing.T) {
		RunS3Protocol(t, func(t *testing.T, cfg remote.S3Config) remote.Client { return open(t, cfg) })
	})

	onServer(t, open, SharedServer)

	t.Run("MinIO", func(t *testing.T) {
		srv := MinioServer(t)
		if srv == nil {
			t.Skip(howToRunMinio)
		}
		onServer(t, open, func(testing.TB) *Server { return srv })
	})

	// AWS_CA_BUNDLE makes the SDK refuse custom transports unless handled.
	t.Run("CustomClientWithCABundle", func(t *testing.T) {
		srv := SharedServer(t)
		if os.Getenv("AWS_CA_BUNDLE") == "" {
			t.Setenv("AWS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
		}
		for _, hc := range []*http.Client{nil, {Transport: http.DefaultTransport}} {
			cfg := config(srv, srv.NewBucket(t), "")
			cfg.HTTPClient = hc
			c := open(t, cfg)
			Put(t, c, "obj", []byte("x"))
		}
	})

	// A stopped server gives transient errors, and the data is there after it
	// comes back.
	t.Run("Outage", func(t *testing.T) {
		srv := StartServer(t)
		c := open(t, config(srv, srv.NewBucket(t), ""))
		Put(t, c, "obj", []byte("before"))
		srv.Stop()
		if err := c.Put(t.Context(), "obj2", []byte("x"), remote.PutOptions{}); !remote.IsTransient(err) {
			t.Errorf("put while the server is down: %v is not transient", err)
		}
		if _, err := c.Stat(t.Context(), "obj"); !remote.IsTransient(err) {
			t.Errorf("stat while the server is down: %v is not transient", err)
		}
		srv.Start(t)
		if got := Get(t, c, "obj", 0, -1); string(got) != "before" {
			t.Errorf("after restart: %q", got)
		}
	})
}

// onServer runs the checks of an S3 driver that any S3 server must pass.
func onServer(t *testing.T, open func(t testing.TB, cfg remote.S3Config) remote.Client, server func(t testing.TB) *Server) {
	config := S3Config

	// Where servers differ, the test says which does what: a StartAfter
	// inside a common prefix of a delimiter listing leaves that prefix out
	// on versitygw and on MinIO (AWS and the file driver yield it), so no
	// reader may rely on either.
	t.Run("StartAfterInsideCommonPrefix", func(t *testing.T) {
		srv := server(t)
		c := open(t, config(srv, srv.NewBucket(t), ""))
		for _, k := range []string{"a/1", "a/2", "b"} {
			Put(t, c, k, []byte("x"))
		}
		want := map[string][]string{KindVersitygw: {"b"}, KindMinio: {"b"}}[srv.Kind]
		if got := Keys(t, c, "", remote.ListOptions{StartAfter: "a/1", Delimiter: "/"}); !slices.Equal(got, want) {
			t.Errorf("%s lists %q after a/1 with a delimiter, want %q", srv.Kind, got, want)
		}
	})
	// The suite runs under a key prefix, so prefix handling is exercised on
	// every operation.
	t.Run("Conformance", func(t *testing.T) {
		srv := server(t)
		Run(t, func(t *testing.T) remote.Client {
			return open(t, config(srv, srv.NewBucket(t), "some/prefix"))
		})
	})

	// Objects land under the prefix in the bucket, where other tools see them.
	t.Run("PrefixOnServer", func(t *testing.T) {
		srv := server(t)
		bucket := srv.NewBucket(t)
		c := open(t, config(srv, bucket, "/team/alice/"))
		Put(t, c, "v1/x", []byte("x"))
		Put(t, open(t, config(srv, bucket, "team/bob")), "v1/y", []byte("y"))

		whole := open(t, config(srv, bucket, ""))
		if got, want := Keys(t, whole, "", remote.ListOptions{}), []string{"team/alice/v1/x", "team/bob/v1/y"}; !slices.Equal(got, want) {
			t.Errorf("bucket holds %q, want %q", got, want)
		}
		if got := Keys(t, c, "", remote.ListOptions{Delimiter: "/"}); !slices.Equal(got, []string{"v1/ (prefix)"}) {
			t.Errorf("prefixed listing = %q", got)
		}
	})

	// A listing with a small first page asks the server for that many
	// keys first, then for full pages: the first keys come sooner.
	t.Run("FirstPageAsked", func(t *testing.T) {
		srv := server(t)
		cfg := config(srv, srv.NewBucket(t), "")
		var pages listPages
		cfg.HTTPClient = &http.Client{Transport: &pages}
		c := open(t, cfg)
		var keys []string
		for i := range 10 {
			keys = append(keys, fmt.Sprintf("k%02d", i))
			Put(t, c, keys[i], []byte("x"))
		}
		equalKeys(t, "list with a first page of 3", Keys(t, c, "", remote.ListOptions{FirstPage: 3}), keys)
		if got := pages.asked(); len(got) != 2 || got[0] != "3" || got[1] != "" && got[1] != "1000" {
			t.Errorf("max-keys asked per page: %q, want 3, then a full page", got)
		}
	})

	// A body changed on the way is refused by the server and nothing is stored.
	t.Run("CorruptedUploadRefused", func(t *testing.T) {
		srv := server(t)
		cfg := config(srv, srv.NewBucket(t), "")
		cfg.HTTPClient = &http.Client{Transport: corrupter{http.DefaultTransport}}
		c := open(t, cfg)
		err := c.Put(t.Context(), "obj", bytes.Repeat([]byte("session line\n"), 100), remote.PutOptions{})
		if err == nil {
			t.Fatal("corrupted put succeeded")
		}
		if remote.IsTransient(err) {
			t.Errorf("corrupted put is transient: %v", err)
		}
		if _, err := open(t, config(srv, cfg.Bucket, "")).Stat(t.Context(), "obj"); !errors.Is(err, remote.ErrNotFound) {
			t.Errorf("after a refused put, stat: %v; want ErrNotFound", err)
		}
	})

	// A wrong secret is a permanent error that does not show the secret.
	t.Run("WrongSecret", func(t *testing.T) {
		srv := server(t)
		cfg := config(srv, srv.NewBucket(t), "")
		cfg.SecretAccessKey = "wrong-secret-do-not-print"
		err := open(t, cfg).Put(t.Context(), "obj", []byte("x"), remote.PutOptions{})
		if err == nil || remote.IsTransient(err) {
			t.Fatalf("put with a wrong secret: err = %v, want a permanent error", err)
		}
		if strings.Contains(err.Error(), cfg.SecretAccessKey) || strings.Contains(err.Error(), srv.SecretKey) {
			t.Errorf("error shows a secret: %v", err)
		}
	})

	t.Run("MissingBucket", func(t *testing.T) {
		srv := server(t)
		c := open(t, config(srv, "no-such-bucket-here", ""))
		_, err := c.Get(t.Context(), "obj", 0, -1)
		if err == nil || errors.Is(err, remote.ErrNotFound) || remote.IsTransient(err) {
			t.Fatalf("get from a missing bucket: err = %v; want a permanent error that is not ErrNotFound", err)
		}
		if !strings.Contains(err.Error(), "no-such-bucket-here") {
			t.Errorf("error does not name the bucket: %v", err)
		}
	})

}

// corrupter flips one byte of every PUT body after the client signed it.
// listPages records the max-keys of each listing request.
type listPages struct {
	mu     sync.Mutex
	maxKey []string
}

func (l *listPages) RoundTrip(r *http.Request) (*http.Response, error) {
	if q := r.URL.Query(); r.Method == http.MethodGet && q.Has("list-type") {
		l.mu.Lock()
		l.maxKey = append(l.maxKey, q.Get("max-keys"))
		l.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (l *listPages) asked() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.maxKey)
}

type corrupter struct{ next http.RoundTripper }

func (c corrupter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body.Close()
		if len(b) > 0 {
			b[len(b)/2] ^= 0x20
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	return c.next.RoundTrip(r)
}
