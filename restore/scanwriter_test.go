package restore

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scanWriter finds every blob reference of a stream however its writes cut
// it, as reading the written file back would.
func TestScanWriterFindsReferencesAcrossWrites(t *testing.T) {
	var b strings.Builder
	var want []string
	for i := range 40 {
		name := strings.Repeat(string("0123456789abcdef"[i%16]), 63) + string("0123456789abcdef"[i/16])
		want = append(want, name)
		b.WriteString(strings.Repeat("x", i*7) + `"blob:sha256:` + name + `" `)
	}
	stream := []byte(b.String())
	for _, size := range []int{1, 3, 50, 75, 76, 77, 200, 1 << 20} {
		var out bytes.Buffer
		sw := &scanWriter{w: &out, refs: map[string]bool{}}
		for p := stream; len(p) > 0; p = p[min(size, len(p)):] {
			if _, err := sw.Write(p[:min(size, len(p))]); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(out.Bytes(), stream) {
			t.Fatalf("writes of %d: the bytes passed on differ", size)
		}
		for _, name := range want {
			if !sw.refs[name] {
				t.Errorf("writes of %d bytes: reference %s not found", size, name[:8])
			}
		}
		if len(sw.refs) != len(want) {
			t.Errorf("writes of %d bytes: %d references, want %d", size, len(sw.refs), len(want))
		}
	}
}

// A streamed copy stays in memory up to spillAt bytes, else goes to a temp
// file: either way it holds the stream's bytes with the title slot laid
// over them, and its first bytes (the header a copy is checked by) are
// those of the file, whatever the writes.
func TestSpillKeepsTheBytesAndTheHead(t *testing.T) {
	slot := []byte("SLOT-LAID-OVER")
	for _, n := range []int{300, spillAt - 1, spillAt, spillAt + 1, 3*spillAt + 12345} {
		for _, size := range []int{1000, 64 << 10, spillAt + 7} {
			stream := make([]byte, n)
			for i := range stream {
				stream[i] = byte('a' + i%23)
			}
			dir := t.TempDir()
			sp := &spill{dir: dir, buf: make([]byte, 0, 4<<10)}
			for p := stream; len(p) > 0; p = p[min(size, len(p)):] {
				if _, err := sp.Write(p[:min(size, len(p))]); err != nil {
					t.Fatal(err)
				}
			}
			if err := sp.overlay(slot); err != nil {
				t.Fatal(err)
			}
			if err := sp.close(true); err != nil {
				t.Fatal(err)
			}
			want := append(append([]byte(nil), slot...), stream[len(slot):]...)
			got := sp.buf
			if sp.name != "" {
				if filepath.Dir(sp.name) != dir {
					t.Errorf("%d bytes: temp file %s outside %s", n, sp.name, dir)
				}
				var err error
				if got, err = os.ReadFile(sp.name); err != nil {
					t.Fatal(err)
				}
			}
			if (sp.name != "") != (n > spillAt) {
				t.Errorf("%d bytes in writes of %d: spilled %v", n, size, sp.name != "")
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%d bytes in writes of %d: the copy differs", n, size)
			}
			if h := sp.first(); !bytes.Equal(h, want[:min(n, len(h))]) || len(h) < min(n, scanHead) {
				t.Errorf("%d bytes in writes of %d: head of %d bytes, want the first %d", n, size, len(h), min(n, scanHead))
			}
		}
	}
}
