package remotetest

import (
	"fmt"
	"io"
	"testing"

	"github.com/ompsync/ompsync/remote"
)

// smallSize is a typical chunk: a few session lines, compressed.
const smallSize = 4 << 10

// BenchPutSmall measures 4 KiB puts to fresh keys, one at a time.
func BenchPutSmall(b *testing.B, c remote.Client) {
	data := randomBytes(1, smallSize)
	b.SetBytes(smallSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := c.Put(b.Context(), fmt.Sprintf("bench/put/%08d", i), data, remote.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchGetSmall measures whole reads of 4 KiB objects, one at a time.
func BenchGetSmall(b *testing.B, c remote.Client) {
	const keys = 64
	data := randomBytes(2, smallSize)
	for i := range keys {
		if err := c.Put(b.Context(), fmt.Sprintf("bench/get/%02d", i), data, remote.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(smallSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		rc, err := c.Get(b.Context(), fmt.Sprintf("bench/get/%02d", i%keys), 0, -1)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil || n != smallSize {
			b.Fatalf("read %d bytes, %v", n, err)
		}
		i++
	}
}
