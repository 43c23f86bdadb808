package restore

import (
	"bytes"
	"strings"
	"testing"
)

// scanWriter finds every blob reference of a stream however its writes cut
// it, and keeps its first bytes, as reading the written file back would.
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
		if !bytes.Equal(out.Bytes(), stream) || !bytes.Equal(sw.head, stream[:min(len(stream), scanHead)]) {
			t.Fatalf("writes of %d: the bytes or the head kept differ", size)
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
