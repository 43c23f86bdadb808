package bench

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Counts is what a peer sent to and received from the S3 server.
type Counts struct {
	Puts, Gets, Lists, Heads, Posts, Deletes, Other int64
	// Up is request body bytes (what a user pays to upload), Down response
	// body bytes.
	Up, Down int64
}

// Requests is the total number of requests.
func (c Counts) Requests() int64 {
	return c.Puts + c.Gets + c.Lists + c.Heads + c.Posts + c.Deletes + c.Other
}

// Sub returns c - o, for the requests made between two snapshots.
func (c Counts) Sub(o Counts) Counts {
	return Counts{
		Puts: c.Puts - o.Puts, Gets: c.Gets - o.Gets, Lists: c.Lists - o.Lists, Heads: c.Heads - o.Heads,
		Posts: c.Posts - o.Posts, Deletes: c.Deletes - o.Deletes, Other: c.Other - o.Other,
		Up: c.Up - o.Up, Down: c.Down - o.Down,
	}
}

// Add returns c + o.
func (c Counts) Add(o Counts) Counts {
	return Counts{
		Puts: c.Puts + o.Puts, Gets: c.Gets + o.Gets, Lists: c.Lists + o.Lists, Heads: c.Heads + o.Heads,
		Posts: c.Posts + o.Posts, Deletes: c.Deletes + o.Deletes, Other: c.Other + o.Other,
		Up: c.Up + o.Up, Down: c.Down + o.Down,
	}
}

// PutEvent is one object put the server accepted, seen when its answer
// passed the proxy.
type PutEvent struct {
	Bucket, Key string
	Size        int64 // request body length
	At          time.Time
}

// Proxy is a counting reverse proxy in front of the S3 server: every peer
// talks to the server through its own Proxy, so requests and bytes are
// counted the same way whatever the client.
type Proxy struct {
	URL string // http://127.0.0.1:PORT

	srv *http.Server
	ln  net.Listener

	mu     sync.Mutex
	counts Counts
	onPut  func(PutEvent)
	trace  io.Writer
	start  time.Time
}

// Trace writes one line per request to w from now on (nil: stop): when it
// started and ended, in ms since this call, its method, key and status, for
// reading where a step's time goes.
func (p *Proxy) Trace(w io.Writer) {
	p.mu.Lock()
	p.trace, p.start = w, time.Now()
	p.mu.Unlock()
}

// StartProxy listens on a free loopback port and forwards to target.
func StartProxy(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), ln: ln}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			// Keep the Host header: the request is signed for it, and the
			// server checks the signature.
			r.Out.Host = r.In.Host
		},
		Transport: &http.Transport{
			Proxy:               nil, // loopback only, whatever the environment says
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
		},
	}
	rp.ModifyResponse = p.response
	// A client that gives up (an agent stopped mid-request) is no error
	// of the proxy's; the client sees its own error.
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	p.srv = &http.Server{Handler: p.handler(rp), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// OnPut sets a function called for every successful object put.
func (p *Proxy) OnPut(f func(PutEvent)) {
	p.mu.Lock()
	p.onPut = f
	p.mu.Unlock()
}

// Counts returns the counts so far.
func (p *Proxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts
}

// Close stops the proxy.
func (p *Proxy) Close() error { return p.srv.Close() }

func (p *Proxy) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, key := splitPath(r.URL)
		p.mu.Lock()
		switch {
		case r.Method == http.MethodPut:
			p.counts.Puts++
		case r.Method == http.MethodGet && key == "":
			p.counts.Lists++
		case r.Method == http.MethodGet:
			p.counts.Gets++
		case r.Method == http.MethodHead:
			p.counts.Heads++
		case r.Method == http.MethodPost:
			p.counts.Posts++
		case r.Method == http.MethodDelete:
			p.counts.Deletes++
		default:
			p.counts.Other++
		}
		p.mu.Unlock()
		if r.Body != nil {
			r.Body = &countingBody{rc: r.Body, add: func(n int) { p.add(&p.counts.Up, n) }}
		}
		t0 := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		p.mu.Lock()
		if p.trace != nil {
			q := ""
			if r.URL.RawQuery != "" {
				q = "?" + r.URL.RawQuery
			}
			fmt.Fprintf(p.trace, "%8.1f %8.1f %-6s %d %s%s\n", ms(t0.Sub(p.start)), ms(time.Since(p.start)), r.Method, sw.status, key, q)
		}
		p.mu.Unlock()
	})
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Flush passes flushes on, as the reverse proxy streams answers.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (p *Proxy) add(field *int64, n int) {
	p.mu.Lock()
	*field += int64(n)
	p.mu.Unlock()
}

func (p *Proxy) response(resp *http.Response) error {
	resp.Body = &countingBody{rc: resp.Body, add: func(n int) { p.add(&p.counts.Down, n) }}
	r := resp.Request
	if r.Method != http.MethodPut || resp.StatusCode/100 != 2 {
		return nil
	}
	bucket, key := splitPath(r.URL)
	if key == "" || r.URL.Query().Has("partNumber") {
		return nil
	}
	p.mu.Lock()
	f := p.onPut
	p.mu.Unlock()
	if f != nil {
		f(PutEvent{Bucket: bucket, Key: key, Size: r.ContentLength, At: time.Now()})
	}
	return nil
}

// splitPath splits a path-style request path into bucket and key.
func splitPath(u *url.URL) (bucket, key string) {
	bucket, key, _ = strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	return bucket, key
}

type countingBody struct {
	rc  io.ReadCloser
	add func(int)
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.add(n)
	}
	return n, err
}

func (b *countingBody) Close() error { return b.rc.Close() }
