// Package faultproxy is a fault-injecting HTTP proxy for tests: it sits on
// 127.0.0.1 between an S3 client and an S3 server (versitygw) and, at
// configurable rates, answers with server errors and throttling, resets
// connections before or after the server saw a request, cuts response
// bodies short, holds answers past client timeouts, and acknowledges puts it
// never forwards, so tests can show that ompsync loses nothing when the
// network and the server misbehave.
//
// Point the client at the proxy's URL, path-style. The proxy forwards every
// request with the Host header the client used, so SigV4 signatures (which
// cover Host) still verify at the server.
package faultproxy

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Fault is one kind of misbehaviour.
type Fault int

// The faults, in the order Config lists their rates.
const (
	None          Fault = iota
	InternalError       // 500 InternalError; the request is not forwarded
	SlowDown            // 503 SlowDown; not forwarded
	TooMany             // 429 TooManyRequests; not forwarded
	ResetRequest        // the connection is reset partway through the request; not forwarded
	ResetResponse       // forwarded and done by the server, then reset before any answer
	Truncate            // forwarded; the answer's body is cut off halfway and the connection closed
	Delay               // forwarded; the answer is held for Config.DelayFor (past client timeouts)
	DropPut             // an object PUT is answered 200 and not forwarded: the object is lost
	numFaults
)

// Faults lists every fault kind.
var Faults = []Fault{InternalError, SlowDown, TooMany, ResetRequest, ResetResponse, Truncate, Delay, DropPut}

func (f Fault) String() string {
	switch f {
	case None:
		return "none"
	case InternalError:
		return "500"
	case SlowDown:
		return "503-slowdown"
	case TooMany:
		return "429"
	case ResetRequest:
		return "reset-request"
	case ResetResponse:
		return "reset-response"
	case Truncate:
		return "truncate"
	case Delay:
		return "delay"
	case DropPut:
		return "drop-put"
	}
	return fmt.Sprintf("fault(%d)", int(f))
}

// Config sets the fault rates. Each rate is the probability, in [0, 1], that
// a request the fault applies to gets it; the rates together must not exceed
// 1. DropPut applies to object PUTs only and Truncate to answers with a body
// of at least two bytes; the others apply to every request.
type Config struct {
	InternalError float64
	SlowDown      float64
	TooMany       float64
	ResetRequest  float64
	ResetResponse float64
	Truncate      float64
	Delay         float64
	DropPut       float64

	// DelayFor is how long a delayed answer is held (default 2 minutes,
	// past the drivers' one-minute response timeout). The proxy stops
	// waiting when the client gives up.
	DelayFor time.Duration
	// Seed makes the sequence of decisions repeatable (for one request
	// order; concurrent requests draw in arrival order).
	Seed uint64
	// Match, when set, limits faults to the requests it accepts; others
	// pass through untouched. It runs under the proxy's lock: it must not
	// call the proxy.
	Match func(r *http.Request) bool
	// Rewrite, when set, replaces the body of every successful answer that
	// passes through without a fault (a garbage listing, a corrupted
	// object). It sees the request and the body the server sent.
	Rewrite func(r *http.Request, body []byte) []byte
}

// Rate returns the configured rate of f.
func (c Config) Rate(f Fault) float64 {
	switch f {
	case InternalError:
		return c.InternalError
	case SlowDown:
		return c.SlowDown
	case TooMany:
		return c.TooMany
	case ResetRequest:
		return c.ResetRequest
	case ResetResponse:
		return c.ResetResponse
	case Truncate:
		return c.Truncate
	case Delay:
		return c.Delay
	case DropPut:
		return c.DropPut
	}
	return 0
}

// Uniform returns a Config that gives each fault the same rate (DropPut
// rate/10: losing acknowledged objects is rare) and the seed.
func Uniform(rate float64, seed uint64) Config {
	return Config{
		InternalError: rate, SlowDown: rate, TooMany: rate, ResetRequest: rate,
		ResetResponse: rate, Truncate: rate, Delay: rate, DropPut: rate / 10, Seed: seed,
	}
}

func (c Config) validate() error {
	sum := 0.0
	for _, f := range Faults {
		r := c.Rate(f)
		if r < 0 || r > 1 {
			return fmt.Errorf("faultproxy: rate of %s is %v, want 0 to 1", f, r)
		}
		sum += r
	}
	if sum > 1 {
		return fmt.Errorf("faultproxy: rates add up to %v, more than 1", sum)
	}
	if c.DelayFor < 0 {
		return errors.New("faultproxy: negative DelayFor")
	}
	return nil
}

// Counts is what the proxy saw and did.
type Counts struct {
	// Requests is every request received; Forwarded those sent on to the
	// server (with or without a fault on the answer).
	Requests, Forwarded int64
	// ByKind counts the requests received by kind: "put", "get", "head",
	// "list", "delete", "post", "other" (what a user pays for).
	ByKind map[string]int64
	// Faults counts each fault injected.
	Faults map[Fault]int64
}

// Total is the number of faults injected.
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c.Faults {
		n += v
	}
	return n
}

func (c Counts) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests, %d forwarded, %d faults", c.Requests, c.Forwarded, c.Total())
	for _, f := range Faults {
		if n := c.Faults[f]; n > 0 {
			fmt.Fprintf(&b, " %s=%d", f, n)
		}
	}
	return b.String()
}

// Proxy is a running fault proxy.
type Proxy struct {
	// URL is http://127.0.0.1:PORT: give it to clients as the S3 endpoint.
	URL string

	target *url.URL
	tr     *http.Transport
	srv    *http.Server

	mu      sync.Mutex
	cfg     Config
	rng     *rand.Rand
	counts  Counts
	dropped []string
}

// Start listens on a free loopback port and forwards to the server at
// target (http://host:port).
func Start(target string, cfg Config) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q: want http://host:port", target)
	}
	p := &Proxy{
		target: u,
		tr: &http.Transport{
			Proxy:                 nil, // loopback only, whatever the environment says
			DisableCompression:    true,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       30 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		counts: Counts{Faults: map[Fault]int64{}, ByKind: map[string]int64{}},
	}
	if err := p.SetConfig(cfg); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p.URL = "http://" + ln.Addr().String()
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// SetConfig changes the rates from the next request on (turn faults off to
// check the end state, up to provoke an outage). The random sequence
// restarts from cfg.Seed.
func (p *Proxy) SetConfig(cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.DelayFor == 0 {
		cfg.DelayFor = 2 * time.Minute
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg = cfg
	p.rng = rand.New(rand.NewPCG(cfg.Seed, 0x6f6d7073796e63)) // "ompsync"
	return nil
}

// Counts returns a snapshot of the counters.
func (p *Proxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.counts
	c.Faults = maps.Clone(p.counts.Faults)
	c.ByKind = maps.Clone(p.counts.ByKind)
	return c
}

// Count returns how often f was injected.
func (p *Proxy) Count(f Fault) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts.Faults[f]
}

// Dropped returns the paths ("/bucket/key") of the puts acknowledged and
// not forwarded, in order.
func (p *Proxy) Dropped() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.dropped...)
}

// Close stops the proxy and cuts every open connection.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	p.tr.CloseIdleConnections()
	return err
}

// isObjectPut reports a path-style PutObject: a PUT of /bucket/key that is
// not a multipart part or a copy.
func isObjectPut(r *http.Request) bool {
	if r.Method != http.MethodPut {
		return false
	}
	_, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	return key != "" && !q.Has("partNumber") && !q.Has("uploadId") && r.Header.Get("X-Amz-Copy-Source") == ""
}

// kind names what a path-style request does.
func kind(r *http.Request) string {
	_, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && key == "":
		return "list"
	case r.Method == http.MethodGet:
		return "get"
	case r.Method == http.MethodPut:
		return "put"
	case r.Method == http.MethodHead:
		return "head"
	case r.Method == http.MethodDelete:
		return "delete"
	case r.Method == http.MethodPost:
		return "post"
	}
	return "other"
}

// pick draws the fault for r among those that apply before the answer is
// known; Truncate is only a candidate here and is checked against the body.
func (p *Proxy) pick(r *http.Request) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts.Requests++
	p.counts.ByKind[kind(r)]++
	if p.cfg.Match != nil && !p.cfg.Match(r) {
		return None
	}
	u := p.rng.Float64()
	for _, f := range Faults {
		if f == DropPut && !isObjectPut(r) {
			continue
		}
		if u < p.cfg.Rate(f) {
			return f
		}
		u -= p.cfg.Rate(f)
	}
	return None
}

func (p *Proxy) count(f Fault) {
	p.mu.Lock()
	p.counts.Faults[f]++
	p.mu.Unlock()
}

func (p *Proxy) config() Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	f := p.pick(r)
	switch f {
	case InternalError:
		p.count(f)
		s3Error(w, r, http.StatusInternalServerError, "InternalError", "injected internal error")
		return
	case SlowDown:
		p.count(f)
		s3Error(w, r, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
		return
	case TooMany:
		p.count(f)
		s3Error(w, r, http.StatusTooManyRequests, "TooManyRequests", "injected throttling")
		return
	case ResetRequest:
		// Read part of the body, so the client is mid-send, then reset.
		if r.ContentLength > 1 {
			_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength/2)
		}
		p.count(f)
		reset(w)
		return
	case DropPut:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		p.mu.Lock()
		p.counts.Faults[f]++
		p.dropped = append(p.dropped, r.URL.Path)
		p.mu.Unlock()
		sum := md5.Sum(body)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.WriteHeader(http.StatusOK)
		return
	}

	resp, err := p.forward(r)
	if err != nil {
		// The server is down or the client went away: say so as a gateway.
		if r.Context().Err() == nil {
			s3Error(w, r, http.StatusBadGateway, "BadGateway", "faultproxy: server unreachable: "+err.Error())
		}
		return
	}
	defer resp.Body.Close()
	p.mu.Lock()
	p.counts.Forwarded++
	p.mu.Unlock()

	cfg := p.config()
	if f == None && (cfg.Rewrite == nil || resp.StatusCode/100 != 2 || r.Method == http.MethodHead) {
		copyHeader(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		return
	}

	// A fault on the answer, or a rewrite: the whole answer is needed first.
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		reset(w)
		return
	}
	switch f {
	case ResetResponse:
		p.count(f)
		reset(w)
		return
	case Truncate:
		if len(body) >= 2 && r.Method != http.MethodHead {
			p.count(f)
			p.truncate(w, resp, body)
			return
		}
	case Delay:
		p.count(f)
		t := time.NewTimer(cfg.DelayFor)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	case None:
		if cfg.Rewrite != nil {
			body = cfg.Rewrite(r, body)
			resp.Header.Set("Content-Length", fmt.Sprint(len(body)))
			resp.Header.Del("Content-Md5")
		}
	}
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// forward sends r to the server with the Host the client signed.
func (p *Proxy) forward(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.Host = r.Host
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	if r.ContentLength == 0 {
		out.Body = nil
	}
	return p.tr.RoundTrip(out)
}

// truncate writes the status line and headers (promising the whole body),
// half the body, and closes the connection.
func (p *Proxy) truncate(w http.ResponseWriter, resp *http.Response, body []byte) {
	conn, _, err := hijack(w)
	if err != nil {
		return
	}
	defer conn.Close()
	bw := bufio.NewWriter(conn)
	fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\n", resp.StatusCode, http.StatusText(resp.StatusCode))
	h := resp.Header.Clone()
	for _, k := range hopHeaders {
		h.Del(k)
	}
	h.Set("Content-Length", fmt.Sprint(len(body)))
	h.Set("Connection", "close")
	_ = h.Write(bw)
	bw.WriteString("\r\n")
	bw.Write(body[:len(body)/2])
	_ = bw.Flush()
}

// reset closes the client's connection with a TCP RST, without an answer.
func reset(w http.ResponseWriter) {
	conn, _, err := hijack(w)
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}

func hijack(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("faultproxy: connection cannot be hijacked")
	}
	return hj.Hijack()
}

// s3Error answers like S3 does, with an XML error document (none for HEAD).
func s3Error(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	_, _ = io.Copy(io.Discard, r.Body) // let the client finish sending
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<Error><Code>%s</Code><Message>%s</Message><Resource>`, code, msg)
	_ = xml.EscapeText(&b, []byte(r.URL.Path))
	b.WriteString(`</Resource><RequestId>faultproxy</RequestId></Error>`)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", fmt.Sprint(b.Len()))
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// hopHeaders are per-connection and not forwarded.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
}
