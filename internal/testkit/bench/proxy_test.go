package bench

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestProxyCountsRequestsAndBytes(t *testing.T) {
	var hosts []string
	var mu sync.Mutex
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodGet {
			w.Write(bytes.Repeat([]byte("x"), 300))
		}
	}))
	defer backend.Close()
	p, err := StartProxy(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var puts []PutEvent
	p.OnPut(func(ev PutEvent) { puts = append(puts, ev) })

	do := func(method, path string, body []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, p.URL+path, bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	do(http.MethodPut, "/bkt/v1/machines/m/catalog", make([]byte, 1000))
	do(http.MethodGet, "/bkt/v1/machines/m/catalog", nil)
	do(http.MethodGet, "/bkt?list-type=2&prefix=v1/", nil)
	do(http.MethodHead, "/bkt/k", nil)

	c := p.Counts()
	want := Counts{Puts: 1, Gets: 1, Lists: 1, Heads: 1, Up: 1000, Down: 600}
	if c != want {
		t.Fatalf("counts %+v, want %+v", c, want)
	}
	if c.Requests() != 4 {
		t.Fatalf("Requests() = %d", c.Requests())
	}
	if len(puts) != 1 || puts[0].Bucket != "bkt" || puts[0].Key != "v1/machines/m/catalog" || puts[0].Size != 1000 {
		t.Fatalf("put events %+v", puts)
	}
	// The signed Host header must reach the server unchanged.
	for _, h := range hosts {
		if h != strings.TrimPrefix(p.URL, "http://") {
			t.Fatalf("server saw Host %q, want the proxy's %q", h, p.URL)
		}
	}
	if d := c.Sub(Counts{Puts: 1, Up: 1000}); d.Puts != 0 || d.Up != 0 || d.Gets != 1 {
		t.Fatalf("Sub: %+v", d)
	}
	if a := c.Add(c); a.Up != 2000 || a.Lists != 2 {
		t.Fatalf("Add: %+v", a)
	}
}
