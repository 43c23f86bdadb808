package repo

import (
	"bytes"
	"io"
	"testing"
)

// BenchmarkSealWriterSmall is a small blob streamed through SealWriter, as
// the agent uploads one.
func BenchmarkSealWriterSmall(b *testing.B) {
	z := NewZstd()
	plain := bytes.Repeat([]byte(`{"type":"message","text":"hello world"}`+"\n"), 300)
	b.SetBytes(int64(len(plain)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w, err := z.SealWriter(io.Discard, int64(len(plain)))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := w.Write(plain); err != nil {
				b.Fatal(err)
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
