package faultproxy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/faultproxy"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
)

func TestMain(m *testing.M) { remotetest.Main(m) }

var clients = backend.Clients("s3")

// start runs a proxy in front of the shared server for the test.
func start(t *testing.T, cfg faultproxy.Config) (*faultproxy.Proxy, *remotetest.Server) {
	t.Helper()
	srv := remotetest.SharedServer(t)
	p, err := faultproxy.Start(srv.Endpoint, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, srv
}

func options(client, endpoint string, srv *remotetest.Server) backend.S3Options {
	return backend.S3Options{
		Client: client, Endpoint: endpoint, Region: "us-east-1", PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey,
	}
}

// openRaw opens bucket through the proxy without retries, to see every fault.
func openRaw(t *testing.T, client, bucket string, p *faultproxy.Proxy, srv *remotetest.Server) remote.Client {
	t.Helper()
	c, err := backend.OpenRaw(t.Context(), "s3://"+bucket, options(client, p.URL, srv))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// openDirect opens bucket on the server itself, to check what it holds.
func openDirect(t *testing.T, bucket string, srv *remotetest.Server) remote.Client {
	t.Helper()
	c, err := backend.OpenRaw(t.Context(), "s3://"+bucket, options("", srv.Endpoint, srv))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// openShortTimeout opens bucket through the proxy with a one-second
// response timeout, so a delayed answer times out within the test.
func openShortTimeout(t *testing.T, client, bucket string, p *faultproxy.Proxy, srv *remotetest.Server) remote.Client {
	t.Helper()
	c, err := backend.OpenRaw(t.Context(), "s3://"+bucket, backend.S3Options{
		Client: client, Endpoint: p.URL, Region: "us-east-1", PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey,
		HTTPClient: &http.Client{Transport: &http.Transport{Proxy: nil, ResponseHeaderTimeout: time.Second}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// only returns a config with fault f at rate 1 for the first n requests
// accepted by match (nil: all) and none after.
func only(f faultproxy.Fault, n int64, match func(*http.Request) bool) faultproxy.Config {
	var seen atomic.Int64
	cfg := faultproxy.Config{DelayFor: 3 * time.Second, Match: func(r *http.Request) bool {
		return (match == nil || match(r)) && seen.Add(1) <= n
	}}
	switch f {
	case faultproxy.InternalError:
		cfg.InternalError = 1
	case faultproxy.SlowDown:
		cfg.SlowDown = 1
	case faultproxy.TooMany:
		cfg.TooMany = 1
	case faultproxy.ResetRequest:
		cfg.ResetRequest = 1
	case faultproxy.ResetResponse:
		cfg.ResetResponse = 1
	case faultproxy.Truncate:
		cfg.Truncate = 1
	case faultproxy.Delay:
		cfg.Delay = 1
	case faultproxy.DropPut:
		cfg.DropPut = 1
	}
	return cfg
}

func isPut(r *http.Request) bool { return r.Method == http.MethodPut }
func isGet(r *http.Request) bool {
	return r.Method == http.MethodGet && !r.URL.Query().Has("list-type")
}
func isList(r *http.Request) bool {
	return r.Method == http.MethodGet && r.URL.Query().Has("list-type")
}

func exists(t *testing.T, c remote.Client, key string) bool {
	t.Helper()
	_, err := c.Stat(t.Context(), key)
	if err != nil && !errors.Is(err, remote.ErrNotFound) {
		t.Fatalf("stat %s: %v", key, err)
	}
	return err == nil
}

func wantTransient(t *testing.T, what string, err error, text string) {
	t.Helper()
	var re *remote.Error
	switch {
	case err == nil:
		t.Errorf("%s: no error", what)
	case !errors.As(err, &re):
		t.Errorf("%s: %v is not a *remote.Error", what, err)
	case !remote.IsTransient(err):
		t.Errorf("%s: %v is not transient", what, err)
	case !strings.Contains(err.Error(), text):
		t.Errorf("%s: %v does not mention %q", what, err, text)
	}
}

// Every fault kind reaches both S3 clients as the failure it imitates: a
// transient error where a retry helps, the object landed or not as the
// server really did it, and a lost object for an acknowledged drop.
func TestEveryFault(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 64)
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			p, srv := start(t, faultproxy.Config{})
			bucket := srv.NewBucket(t)
			c := openRaw(t, client, bucket, p, srv)
			direct := openDirect(t, bucket, srv)
			remotetest.Put(t, direct, "base", data)

			putCase := func(f faultproxy.Fault, c remote.Client, text string, landed bool) {
				t.Helper()
				if err := p.SetConfig(only(f, 1, isPut)); err != nil {
					t.Fatal(err)
				}
				key := "put-" + f.String()
				wantTransient(t, f.String()+" put", c.Put(t.Context(), key, data, remote.PutOptions{}), text)
				if got := exists(t, direct, key); got != landed {
					t.Errorf("%s: object on the server = %t, want %t", f, got, landed)
				}
			}
			putCase(faultproxy.InternalError, c, "500", false)
			putCase(faultproxy.SlowDown, c, "SlowDown", false)
			putCase(faultproxy.TooMany, c, "429", false)
			putCase(faultproxy.ResetRequest, c, "reset", false)
			// The server did the put; only its answer was lost.
			putCase(faultproxy.ResetResponse, c, "reset", true)
			putCase(faultproxy.Delay, openShortTimeout(t, client, bucket, p, srv), "timeout", true)

			// Reads: statuses and resets fail the open; a cut body fails
			// the read, never yielding short data as if complete.
			for _, f := range []faultproxy.Fault{faultproxy.InternalError, faultproxy.SlowDown, faultproxy.TooMany, faultproxy.ResetRequest, faultproxy.ResetResponse} {
				p.SetConfig(only(f, 3, isGet)) // Go's transport retries an idempotent request once on a reused connection
				_, err := c.Get(t.Context(), "base", 0, -1)
				wantTransient(t, f.String()+" get", err, "")
				p.SetConfig(only(f, 3, isList))
				var lerr error
				for _, err := range c.List(t.Context(), "", remote.ListOptions{}) {
					lerr = err
				}
				wantTransient(t, f.String()+" list", lerr, "")
			}
			p.SetConfig(only(faultproxy.Truncate, 1, isGet))
			rc, err := c.Get(t.Context(), "base", 0, -1)
			if err != nil {
				t.Fatalf("truncated get: open: %v", err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err == nil || len(got) >= len(data) {
				t.Errorf("truncated get: read %d of %d bytes, err %v; want a read error", len(got), len(data), err)
			}
			p.SetConfig(only(faultproxy.Truncate, 1, isList))
			var lerr error
			n := 0
			for _, err := range c.List(t.Context(), "", remote.ListOptions{}) {
				if err != nil {
					lerr = err
				} else {
					n++
				}
			}
			if lerr == nil {
				t.Errorf("truncated list: %d keys and no error", n)
			}

			// An acknowledged put that never reached the server.
			p.SetConfig(only(faultproxy.DropPut, 1, nil))
			if err := c.Put(t.Context(), "dropped", data, remote.PutOptions{}); err != nil {
				t.Errorf("dropped put: %v, want a success", err)
			}
			if exists(t, direct, "dropped") {
				t.Errorf("dropped put: the object is on the server")
			}
			if d := p.Dropped(); len(d) != 1 || d[0] != "/"+bucket+"/dropped" {
				t.Errorf("Dropped() = %q", d)
			}

			counts := p.Counts()
			for _, f := range faultproxy.Faults {
				if counts.Faults[f] == 0 {
					t.Errorf("%s never injected: %v", f, counts)
				}
			}
			t.Log(counts)
		})
	}
}

// A put whose answer is lost is retried; an IfAbsent put then finds its own
// object and reports success, so a retry is idempotent.
func TestLostAnswerRetriedIdempotently(t *testing.T) {
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			p, srv := start(t, faultproxy.Config{})
			bucket := srv.NewBucket(t)
			c := remote.WithRetry(openRaw(t, client, bucket, p, srv), remote.RetryPolicy{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond})
			p.SetConfig(only(faultproxy.ResetResponse, 1, isPut))
			if err := c.Put(t.Context(), "blob", []byte("once"), remote.PutOptions{IfAbsent: true}); err != nil {
				t.Fatalf("IfAbsent put whose answer was lost: %v", err)
			}
			if p.Count(faultproxy.ResetResponse) != 1 {
				t.Fatalf("fault not injected: %v", p.Counts())
			}
			// A different body under the same key is still refused.
			p.SetConfig(only(faultproxy.ResetResponse, 1, isPut))
			err := c.Put(t.Context(), "blob", []byte("twice"), remote.PutOptions{IfAbsent: true})
			if !errors.Is(err, remote.ErrPreconditionFailed) {
				t.Fatalf("IfAbsent put of other bytes: %v, want ErrPreconditionFailed", err)
			}
			if got := remotetest.Get(t, openDirect(t, bucket, srv), "blob", 0, -1); string(got) != "once" {
				t.Errorf("stored %q", got)
			}
		})
	}
}

// A server may refuse a large conditional body before reading it and close
// the connection: the client sees a reset, never the refusal (versitygw
// does it to a 6 MiB IfAbsent put about one time in two). Here every PUT
// breaks so: a conditional put still ends by what the key stores, its own
// bytes (an earlier try landed: done, IfAbsent or IfMatch) or others
// (IfAbsent: refused, permanently), where it used to spend its retries and
// fail transiently.
func TestConditionalPutDecidedByStoredObject(t *testing.T) {
	data := bytes.Repeat([]byte("a blob that is large enough to stream. "), 4<<20/39)
	other := bytes.Repeat([]byte("other bytes of the very same length!!! "), 4<<20/39)
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			p, srv := start(t, faultproxy.Config{})
			bucket := srv.NewBucket(t)
			direct := openDirect(t, bucket, srv)
			for _, key := range []string{"ours", "stream/ours"} {
				if err := direct.Put(t.Context(), key, data, remote.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := direct.Put(t.Context(), "theirs", other, remote.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			ours, err := direct.Stat(t.Context(), "ours")
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := direct.Stat(t.Context(), "theirs")
			if err != nil {
				t.Fatal(err)
			}
			c := remote.WithRetry(openRaw(t, client, bucket, p, srv), fastRetry)
			p.SetConfig(faultproxy.Config{ResetRequest: 1, Match: isPut})

			if err := c.Put(t.Context(), "ours", data, remote.PutOptions{IfAbsent: true}); err != nil {
				t.Errorf("IfAbsent put of the bytes the key holds: %v, want success", err)
			}
			if err := c.PutReader(t.Context(), "stream/ours", bytes.NewReader(data), int64(len(data)), remote.PutOptions{IfAbsent: true}); err != nil {
				t.Errorf("IfAbsent streamed put of the bytes the key holds: %v, want success", err)
			}
			err = c.PutReader(t.Context(), "theirs", bytes.NewReader(data), int64(len(data)), remote.PutOptions{IfAbsent: true})
			if !errors.Is(err, remote.ErrPreconditionFailed) || remote.IsTransient(err) {
				t.Errorf("IfAbsent streamed put over other bytes: %v, want a permanent ErrPreconditionFailed", err)
			}
			// IfMatch: our bytes there are done; other bytes decide
			// nothing (they are what it replaces), so it fails as the
			// line does.
			if err := c.Put(t.Context(), "ours", data, remote.PutOptions{IfMatch: ours.ETag}); err != nil {
				t.Errorf("IfMatch put of the bytes the key holds: %v, want success", err)
			}
			err = c.Put(t.Context(), "theirs", data, remote.PutOptions{IfMatch: theirs.ETag})
			wantTransient(t, "IfMatch put over other bytes that never got through", err, "")
			// Absent key: nothing decides but the server, so the put
			// fails as the line does, transiently, and stores nothing.
			err = c.PutReader(t.Context(), "absent", bytes.NewReader(data), int64(len(data)), remote.PutOptions{IfAbsent: true})
			wantTransient(t, "IfAbsent put that never got through", err, "")
			if exists(t, direct, "absent") {
				t.Error("a put that never got through stored the object")
			}
			if puts := p.Count(faultproxy.ResetRequest); puts < int64(4+2*fastRetry.MaxAttempts) {
				t.Errorf("%d PUTs reset, want every try", puts)
			}
			p.SetConfig(faultproxy.Config{})
			if got := remotetest.Get(t, direct, "theirs", 0, -1); !bytes.Equal(got, other) {
				t.Error("the refused put changed the stored object")
			}
		})
	}
}

// fastRetry waits 20 ms to 320 ms between its tries: short, to keep the
// tests fast, yet long enough that the real server behind the proxy,
// shared with the rest of a loaded CI run, may miss a beat (a 5 ms start
// gave up within 155 ms once, every try answered 502 by the proxy).
var fastRetry = remote.RetryPolicy{MaxAttempts: remote.DefaultRetry.MaxAttempts, Base: 20 * time.Millisecond, Max: time.Second}

// moderate is the fault mix retries must absorb: about one request in
// thirteen fails, in every way that leaves the answer known or lost. (At
// six attempts an operation then fails for good about once in five
// million; at one in five it would about once in fifteen thousand, which
// a suite of thousands of requests would hit.)
func moderate(seed uint64) faultproxy.Config {
	return faultproxy.Config{
		InternalError: 0.015, SlowDown: 0.015, TooMany: 0.015, ResetRequest: 0.015, ResetResponse: 0.015,
		Seed: seed,
	}
}

// The conformance suite passes through the proxy at moderate fault rates
// with retries on, for both S3 clients. The policy is DefaultRetry's with
// shorter waits, to keep the test fast; attempts are the same.
func TestConformanceUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: thousands of requests with backoff")
	}
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			p, srv := start(t, moderate(1))
			remotetest.Run(t, func(t *testing.T) remote.Client {
				c, err := backend.OpenRaw(t.Context(), "s3://"+srv.NewBucket(t), options(client, p.URL, srv))
				if err != nil {
					t.Fatal(err)
				}
				return remote.WithRetry(c, fastRetry)
			})
			t.Cleanup(func() {
				c := p.Counts()
				t.Logf("%s: %v", client, c)
				if c.Total() == 0 {
					t.Errorf("no fault injected: %v", c)
				}
			})
		})
	}
}

// A GET body cut off mid-answer is a transient failure the retrying client
// recovers from by reading again from where it broke.
func TestTruncatedGetRetried(t *testing.T) {
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			p, srv := start(t, faultproxy.Config{})
			bucket := srv.NewBucket(t)
			data := bytes.Repeat([]byte("line of a session\n"), 4096)
			remotetest.Put(t, openDirect(t, bucket, srv), "obj", data)
			c, err := backend.Open(t.Context(), "s3://"+bucket, options(client, p.URL, srv))
			if err != nil {
				t.Fatal(err)
			}
			p.SetConfig(only(faultproxy.Truncate, 2, isGet))
			if got := remotetest.Get(t, c, "obj", 0, -1); !bytes.Equal(got, data) {
				t.Errorf("get: %d bytes, want %d", len(got), len(data))
			}
		})
	}
}

// A LIST answer cut off after its 200 status is transient: the retrying
// client resumes the listing and yields every key once.
func TestTruncatedListRetried(t *testing.T) {
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			p, srv := start(t, faultproxy.Config{})
			bucket := srv.NewBucket(t)
			direct := openDirect(t, bucket, srv)
			for i := range 20 {
				remotetest.Put(t, direct, "list/"+string(rune('a'+i)), []byte{byte(i)})
			}
			c, err := backend.Open(t.Context(), "s3://"+bucket, options(client, p.URL, srv))
			if err != nil {
				t.Fatal(err)
			}
			p.SetConfig(only(faultproxy.Truncate, 2, isList))
			if got := remotetest.Keys(t, c, "list/", remote.ListOptions{}); len(got) != 20 {
				t.Errorf("list: %d keys, want 20", len(got))
			}
			if p.Count(faultproxy.Truncate) == 0 {
				t.Errorf("no answer truncated: %v", p.Counts())
			}
		})
	}
}

// Rewrite replaces successful answers' bodies, for tests of garbage input.
func TestRewrite(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	p, srv := start(t, faultproxy.Config{Rewrite: func(r *http.Request, body []byte) []byte {
		mu.Lock()
		seen = append(seen, r.Method)
		mu.Unlock()
		return bytes.ToUpper(body)
	}})
	bucket := srv.NewBucket(t)
	remotetest.Put(t, openDirect(t, bucket, srv), "k", []byte("lower"))
	c := openRaw(t, "", bucket, p, srv)
	if got := remotetest.Get(t, c, "k", 0, -1); string(got) != "LOWER" {
		t.Errorf("rewritten get = %q", got)
	}
	if _, err := c.Stat(t.Context(), "k"); err != nil {
		t.Errorf("stat (HEAD is never rewritten): %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != http.MethodGet {
		t.Errorf("rewrite saw %q, want one GET", seen)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []faultproxy.Config{
		{InternalError: -0.1},
		{SlowDown: 1.5},
		{InternalError: 0.6, DropPut: 0.6},
		{DelayFor: -time.Second},
	} {
		if _, err := faultproxy.Start("http://127.0.0.1:1", cfg); err == nil {
			t.Errorf("Start(%+v) accepted", cfg)
		}
	}
	if _, err := faultproxy.Start("127.0.0.1:1", faultproxy.Config{}); err == nil {
		t.Error("a target without scheme was accepted")
	}
	u := faultproxy.Uniform(0.1, 1)
	for _, f := range faultproxy.Faults {
		if u.Rate(f) == 0 {
			t.Errorf("Uniform leaves %s at 0", f)
		}
	}
}

// A streamed put whose first try fails before the server reads it, and
// whose source then changes: the retry checks the bytes against the first
// try's checksums and refuses them, permanently, leaving the object as it
// was; it does not send the source as it now is (for a blob, bytes under a
// name they do not hash to). The file driver, behind the same retry, too.
func TestRetriedPutOfChangedSourceRefused(t *testing.T) {
	data := bytes.Repeat([]byte("bytes a retry must not send changed. "), 3<<20/37)
	check := func(t *testing.T, c remote.Client, direct remote.Client) {
		t.Helper()
		err := c.PutReader(t.Context(), "changed/obj", &remotetest.ChangingSource{Data: data, Clean: 2}, int64(len(data)), remote.PutOptions{})
		if !errors.Is(err, remote.ErrSourceChanged) || remote.IsTransient(err) {
			t.Errorf("a source that changed between tries: %v, want a permanent ErrSourceChanged", err)
		}
		rc, err := direct.Get(t.Context(), "changed/obj", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if got, _ := io.ReadAll(rc); string(got) != "before" {
			t.Errorf("the object a changed source was to replace: %d bytes, want the old %q", len(got), "before")
		}
	}
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			p, srv := start(t, faultproxy.Config{})
			bucket := srv.NewBucket(t)
			direct := openDirect(t, bucket, srv)
			if err := direct.Put(t.Context(), "changed/obj", []byte("before"), remote.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			var puts atomic.Int64
			p.SetConfig(faultproxy.Config{InternalError: 1, Match: func(r *http.Request) bool {
				return isPut(r) && puts.Add(1) == 1 // the first try only
			}})
			check(t, remote.WithRetry(openRaw(t, client, bucket, p, srv), fastRetry), direct)
			if puts.Load() == 0 {
				t.Error("no put reached the proxy: the first try was not cut off")
			}
		})
	}
	t.Run("file", func(t *testing.T) {
		fc, err := backend.OpenRaw(t.Context(), "file://"+t.TempDir(), backend.S3Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := fc.Put(t.Context(), "changed/obj", []byte("before"), remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		failed := false
		c := remote.WithRetry(failFirstPut{Client: fc, failed: &failed}, fastRetry)
		check(t, c, fc)
	})
}

// failFirstPut fails the first PutReader transiently after both of a
// driver's passes over the source (its checksum, its body), as a put cut
// off in flight.
type failFirstPut struct {
	remote.Client
	failed *bool
}

func (f failFirstPut) PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts remote.PutOptions) error {
	if !*f.failed {
		*f.failed = true
		sums, err := remote.SumsFor(ctx, r, size, false, opts.Sums)
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, remote.CheckedReader(r, size, sums)); err != nil {
			return err
		}
		return &remote.Error{Op: "put", Key: key, Transient: true, Err: errors.New("connection reset by peer")}
	}
	return f.Client.PutReader(ctx, key, r, size, opts)
}
