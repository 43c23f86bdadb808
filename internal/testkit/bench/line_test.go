package bench

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// echoServer answers every connection with what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// The line's delays are lower bounds, whatever else the machine does: a
// byte never comes back sooner than the handshake and one round trip, and
// bytes never cross faster than the rate.
func TestLineDelaysAndShares(t *testing.T) {
	cfg := LineConfig{RTT: 40 * time.Millisecond, Up: 8e6, Down: 80e6} // 1 MB/s up
	l, err := StartLine(echoServer(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.URL[len("http://"):]

	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 2*cfg.RTT {
		t.Errorf("first byte back after %s, want at least the handshake and a round trip (%s)", d, 2*cfg.RTT)
	}
	t0 := time.Now()
	if _, err := c.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 'y' {
		t.Fatalf("echo: %q, %v", b, err)
	}
	if d := time.Since(t0); d < cfg.RTT {
		t.Errorf("round trip %s, want at least %s", d, cfg.RTT)
	}
	c.Close()

	// Two connections share the up rate: 2 x 200 KB at 1 MB/s is 0.4 s.
	const n = 200_000
	payload := bytes.Repeat([]byte("z"), n)
	t0 = time.Now()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			go func() { _, _ = c.Write(payload) }()
			got := make([]byte, n)
			if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, payload) {
				t.Errorf("echo of %d bytes: %v", n, err)
			}
		}()
	}
	wg.Wait()
	shared := time.Duration(float64(2*n-2*lineBurst) * 8 / cfg.Up * float64(time.Second))
	if d := time.Since(t0); d < shared {
		t.Errorf("2 x %d bytes up in %s, faster than the shared rate allows (%s)", n, d, shared)
	}
	up, down, conns := l.Wire()
	if up != 2+2*n || down != 2+2*n || conns != 3 {
		t.Errorf("wire: %d up, %d down, %d connections; want %d, %d, 3", up, down, conns, 2+2*n, 2+2*n)
	}
}
