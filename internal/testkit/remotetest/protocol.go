package remotetest

import (
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ompsync/ompsync/remote"
)

// fakeSecret is the secret key given to drivers under RunS3Protocol; it must
// never show up in an error.
const fakeSecret = "fake-secret-must-not-leak-0123456789"

// RunS3Protocol checks what an S3 driver sends and how it maps answers onto
// remote's errors, against a scripted HTTP server on 127.0.0.1: puts carry a
// Content-MD5 the server can verify and no signed trailers, IfAbsent sends
// If-None-Match: *, 5xx, throttling and broken connections are transient,
// other 4xx are permanent, and errors never contain the secret key.
// open builds the driver for cfg (path style, us-east-1, static keys).
func RunS3Protocol(t *testing.T, open func(t *testing.T, cfg remote.S3Config) remote.Client) {
	fs := &fakeS3{}
	srv := httptest.NewServer(fs)
	t.Cleanup(srv.Close)
	cfg := remote.S3Config{
		Bucket: "bucket", Endpoint: srv.URL, Region: "us-east-1", PathStyle: true,
		AccessKeyID: "fake-access", SecretAccessKey: fakeSecret,
	}
	c := open(t, cfg)
	ctx := t.Context()

	t.Run("PutHeaders", func(t *testing.T) {
		fs.answer(200, "")
		data := []byte("some session lines\n")
		for i, ifAbsent := range []bool{false, true, false, true} {
			put := c.Put(ctx, "k/obj", data, remote.PutOptions{IfAbsent: ifAbsent})
			if i >= 2 { // the same through the streamed put
				put = c.PutReader(ctx, "k/obj", strings.NewReader(string(data)+"past size"), int64(len(data)), remote.PutOptions{IfAbsent: ifAbsent})
			}
			if put != nil {
				t.Fatal(put)
			}
			r := fs.last()
			sum := md5.Sum(data)
			if got, want := r.header.Get("Content-Md5"), base64.StdEncoding.EncodeToString(sum[:]); got != want {
				t.Errorf("Content-MD5 = %q, want %q", got, want)
			}
			if r.body != string(data) {
				t.Errorf("body = %q, want %q (no aws-chunked framing)", r.body, data)
			}
			if tr := r.header.Get("X-Amz-Trailer"); tr != "" {
				t.Errorf("put uses signed trailers (%s), which versitygw refuses", tr)
			}
			if got := r.header.Get("If-None-Match"); ifAbsent != (got == "*") {
				t.Errorf("IfAbsent=%t: If-None-Match = %q", ifAbsent, got)
			}
			if r.path != "/bucket/k/obj" {
				t.Errorf("path = %q, want /bucket/k/obj", r.path)
			}
		}
	})

	type outcome int
	const (
		transient outcome = iota
		permanent
		notFound
		precondition
		denied // permanent, and ErrAccessDenied: a key without the permission
	)
	for _, tc := range []struct {
		status int
		code   string
		want   outcome
	}{
		{503, "SlowDown", transient},
		{500, "InternalError", transient},
		{502, "", transient},
		{429, "TooManyRequests", transient},
		{400, "RequestTimeout", transient},
		{403, "AccessDenied", denied},
		{403, "SignatureDoesNotMatch", permanent},
		{400, "InvalidArgument", permanent},
		{404, "NoSuchKey", notFound},
		{412, "PreconditionFailed", precondition},
	} {
		t.Run(fmt.Sprintf("%d%s", tc.status, tc.code), func(t *testing.T) {
			fs.answer(tc.status, tc.code)
			errs := map[string]error{
				"put": c.Put(ctx, "k/obj", []byte("x"), remote.PutOptions{}),
			}
			_, errs["get"] = c.Get(ctx, "k/obj", 0, -1)
			// A HEAD answer has no body, so only its status can tell.
			if statusTells := tc.status >= 500 || tc.status == 429 || tc.want != transient; statusTells && tc.want != precondition {
				_, errs["stat"] = c.Stat(ctx, "k/obj")
			}
			if tc.want == transient || tc.want == permanent || tc.want == denied {
				for _, err := range c.List(ctx, "k/", remote.ListOptions{}) {
					errs["list"] = err
				}
			}
			if tc.want != notFound {
				errs["delete"] = c.Delete(ctx, "k/obj")
			}
			for op, err := range errs {
				checkNoSecret(t, op, err)
				var re *remote.Error
				switch {
				case err == nil:
					t.Errorf("%s: no error for %d %s", op, tc.status, tc.code)
				case !errors.As(err, &re):
					t.Errorf("%s: %v is not a *remote.Error", op, err)
				case tc.want == transient && !remote.IsTransient(err):
					t.Errorf("%s: %v is not transient", op, err)
				case tc.want != transient && remote.IsTransient(err):
					t.Errorf("%s: %v is transient", op, err)
				case tc.want == notFound && !errors.Is(err, remote.ErrNotFound):
					t.Errorf("%s: %v is not ErrNotFound", op, err)
				case tc.want == precondition && op == "put" && !errors.Is(err, remote.ErrPreconditionFailed):
					t.Errorf("%s: %v is not ErrPreconditionFailed", op, err)
				case tc.want == denied && !errors.Is(err, remote.ErrAccessDenied):
					t.Errorf("%s: %v is not ErrAccessDenied", op, err)
				case tc.want == denied && op == "delete" && !remote.DeleteDenied(err):
					t.Errorf("%s: %v is not DeleteDenied", op, err)
				case tc.want == denied && op != "delete" && remote.DeleteDenied(err):
					t.Errorf("%s: %v is DeleteDenied", op, err)
				case tc.want == permanent && (errors.Is(err, remote.ErrNotFound) || errors.Is(err, remote.ErrPreconditionFailed)),
					// A HEAD's 403 has no code: it is taken as a denial.
					tc.want == permanent && errors.Is(err, remote.ErrAccessDenied) && (op != "stat" || tc.status != 403):
					t.Errorf("%s: %v maps %d %s to a sentinel", op, err, tc.status, tc.code)
				}
			}
		})
	}

	t.Run("ConnectionReset", func(t *testing.T) {
		fs.answer(-1, "") // hang up without answering
		err := c.Put(ctx, "k/obj", []byte("x"), remote.PutOptions{})
		if !remote.IsTransient(err) {
			t.Errorf("put on a dropped connection: %v is not transient", err)
		}
		_, err = c.Stat(ctx, "k/obj")
		if !remote.IsTransient(err) {
			t.Errorf("stat on a dropped connection: %v is not transient", err)
		}
		checkNoSecret(t, "put", err)
	})

	t.Run("ConnectionRefused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // nothing listens there now
		down := cfg
		down.Endpoint = "http://" + addr
		c := open(t, down)
		err = c.Put(ctx, "k/obj", []byte("x"), remote.PutOptions{})
		if !remote.IsTransient(err) {
			t.Errorf("put to a closed port: %v is not transient", err)
		}
		checkNoSecret(t, "put", err)
	})
}

func checkNoSecret(t *testing.T, op string, err error) {
	t.Helper()
	if err != nil && strings.Contains(fmt.Sprintf("%v %+v %#v", err, err, err), fakeSecret) {
		t.Errorf("%s: error shows the secret key: %v", op, err)
	}
}

// fakeS3 answers every request with one scripted status and error code,
// and records the last request.
type fakeS3 struct {
	mu     sync.Mutex
	status int // -1: drop the connection
	code   string
	req    recorded
}

type recorded struct {
	method, path, body string
	header             http.Header
}

func (f *fakeS3) answer(status int, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.code = status, code
}

func (f *fakeS3) last() recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.req
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.req = recorded{method: r.Method, path: r.URL.Path, body: string(body), header: r.Header.Clone()}
	status, code := f.status, f.code
	f.mu.Unlock()
	switch {
	case status == -1:
		if hj, ok := w.(http.Hijacker); ok {
			conn, _, err := hj.Hijack()
			if err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // RST, not FIN
				}
				conn.Close()
			}
		}
	case status == 200 && r.Method == http.MethodGet && r.URL.Query().Has("list-type"):
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>bucket</Name><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>`)
	case status == 200:
		w.Header().Set("ETag", `"d41d8cd98f00b204e9800998ecf8427e"`)
		w.WriteHeader(http.StatusOK)
	default:
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		if r.Method != http.MethodHead && code != "" {
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>scripted %s</Message><RequestId>1</RequestId></Error>`, code, code)
		}
	}
}
