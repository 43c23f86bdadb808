package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// LineConfig describes a shaped line: a round trip and one rate per
// direction, shared by every connection, as a home or office line is.
type LineConfig struct {
	RTT time.Duration
	// Up and Down are the rates in bits per second, client to server and
	// server to client.
	Up, Down float64
}

// DefaultLine is a good home line: 30 ms, 50 Mbit/s up, 200 Mbit/s down.
var DefaultLine = LineConfig{RTT: 30 * time.Millisecond, Up: 50e6, Down: 200e6}

// Limit is the line's limit for moving up and down bytes: the time the
// bytes take at the line's rates (each direction on its own, as the
// directions do not share a rate) plus round trips.
func (c LineConfig) Limit(up, down int64, rtts int) time.Duration {
	secs := max(float64(up)*8/c.Up, float64(down)*8/c.Down)
	return time.Duration(secs*float64(time.Second)) + time.Duration(rtts)*c.RTT
}

func (c LineConfig) String() string {
	return fmt.Sprintf("%s RTT, %.0f Mbit/s up, %.0f Mbit/s down", c.RTT, c.Up/1e6, c.Down/1e6)
}

// lineBurst is the most bytes the line lets through at once: small, so
// that the rate holds over a few milliseconds, not only on average.
const lineBurst = 16 << 10

// lineQueue bounds what one direction of a connection holds in flight, as
// a TCP window does (4 MiB: more than the 750 KB the default line holds).
const lineQueue = 256

// Line is a TCP relay in front of a server that shapes what crosses it:
// every byte arrives half a round trip after it left, each direction's
// bytes queue for one rate shared by every connection (toxiproxy's
// bandwidth toxic is per connection, which does not model a shared line),
// and a new connection carries data only after one round trip (the TCP
// handshake).
type Line struct {
	URL string // http://127.0.0.1:PORT
	Cfg LineConfig

	target   string // host:port
	ln       net.Listener
	up, down *rate.Limiter
	// wireUp and wireDown count every byte relayed (headers too).
	wireUp, wireDown, conns atomic.Int64

	mu     sync.Mutex
	open   map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// StartLine listens on a free loopback port and relays to target, an
// http://host:port URL.
func StartLine(target string, cfg LineConfig) (*Line, error) {
	if cfg.RTT < 0 || cfg.Up <= 0 || cfg.Down <= 0 {
		return nil, fmt.Errorf("line: want RTT >= 0 and positive rates, got %s", cfg)
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Line{
		URL: "http://" + ln.Addr().String(), Cfg: cfg, target: u.Host, ln: ln,
		up:   rate.NewLimiter(rate.Limit(cfg.Up/8), lineBurst),
		down: rate.NewLimiter(rate.Limit(cfg.Down/8), lineBurst),
		open: map[net.Conn]bool{},
	}
	l.wg.Add(1)
	go l.serve()
	return l, nil
}

// Wire is every byte the line carried up and down, and the connections
// opened through it.
func (l *Line) Wire() (up, down, conns int64) {
	return l.wireUp.Load(), l.wireDown.Load(), l.conns.Load()
}

// Close stops the line and every connection through it.
func (l *Line) Close() error {
	l.mu.Lock()
	l.closed = true
	for c := range l.open {
		c.Close()
	}
	l.mu.Unlock()
	err := l.ln.Close()
	l.wg.Wait()
	return err
}

func (l *Line) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return false
	}
	l.open[c] = true
	return true
}

func (l *Line) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.open, c)
	l.mu.Unlock()
	c.Close()
}

func (l *Line) serve() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.relay(c)
		}()
	}
}

// relay carries one connection: the client's bytes up, the server's down.
func (l *Line) relay(client net.Conn) {
	opened := time.Now()
	if !l.track(client) {
		return
	}
	defer l.untrack(client)
	server, err := net.Dial("tcp", l.target)
	if err != nil {
		return
	}
	if !l.track(server) {
		return
	}
	defer l.untrack(server)
	l.conns.Add(1)
	// The client's first bytes leave once the handshake's round trip is
	// over; the server cannot answer before they arrive.
	ready := opened.Add(l.Cfg.RTT)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		l.pump(server, client, l.up, &l.wireUp, ready)
	}()
	go func() {
		defer wg.Done()
		l.pump(client, server, l.down, &l.wireDown, time.Time{})
	}()
	wg.Wait()
}

// segment is bytes in flight and when they arrive.
type segment struct {
	b  []byte
	at time.Time
}

// pump moves src's bytes to dst through one direction of the line: each
// piece waits for the direction's rate (the bottleneck it shares), leaves
// no earlier than notBefore, and arrives half a round trip later.
func (l *Line) pump(dst, src net.Conn, lim *rate.Limiter, wire *atomic.Int64, notBefore time.Time) {
	q := make(chan segment, lineQueue)
	done := make(chan struct{})
	go func() {
		defer close(done)
		failed := false
		for s := range q {
			if failed {
				continue // drain, so the reader never blocks
			}
			if d := time.Until(s.at); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(s.b); err != nil {
				failed = true
				src.Close() // the other end is gone: stop reading too
			}
		}
		if tc, ok := dst.(*net.TCPConn); ok && !failed {
			_ = tc.CloseWrite() // half-close: the request or answer is complete
		} else {
			dst.Close()
		}
	}()
	buf := make([]byte, lineBurst)
	ctx := context.Background()
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if werr := lim.WaitN(ctx, n); werr != nil {
				break
			}
			left := time.Now()
			if left.Before(notBefore) {
				left = notBefore
			}
			wire.Add(int64(n))
			q <- segment{b: append([]byte(nil), buf[:n]...), at: left.Add(l.Cfg.RTT / 2)}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				dst.Close()
			}
			break
		}
	}
	close(q)
	<-done
}
