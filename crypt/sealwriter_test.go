package crypt_test

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/repo"
)

// sealStream seals plain through SealWriter, in writes of odd sizes.
func sealStream(t *testing.T, c repo.Codec, plain []byte, size int64) ([]byte, error) {
	t.Helper()
	var out bytes.Buffer
	w, err := c.SealWriter(&out, size)
	if err != nil {
		return nil, err
	}
	for p := plain; len(p) > 0; {
		n := min(len(p), 77_777)
		if _, err := w.Write(p[:n]); err != nil {
			return nil, err
		}
		p = p[n:]
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// What SealWriter writes is what Seal's readers read (docs/FORMAT.md: one
// zstd frame of the plaintext, recording its size, or that encrypted with
// age), whole and as a stream, for every size class: empty, under the
// small-object size, and several MiB of text and of noise.
func TestSealWriterOpens(t *testing.T) {
	k := newKey(t)
	noise := make([]byte, 5<<20)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(noise)
	plains := map[string][]byte{
		"empty": {}, "small": sessionBytes(1000), "text": sessionBytes(9 << 20), "noise": noise,
	}
	for _, cc := range []struct {
		name      string
		codec     repo.Codec
		encrypted bool
	}{
		{"zstd", repo.NewZstd(), false},
		{"age", mustNew(t, crypt.Options{IdentityFile: k.file}), true},
	} {
		for name, plain := range plains {
			t.Run(cc.name+"/"+name, func(t *testing.T) {
				sealed, err := sealStream(t, cc.codec, plain, int64(len(plain)))
				if err != nil {
					t.Fatal(err)
				}
				if got := bytes.HasPrefix(sealed, []byte(repo.AgeHeader)); got != cc.encrypted {
					t.Fatalf("object starts with the age header: %t, want %t", got, cc.encrypted)
				}
				if !cc.encrypted && len(plain) > 0 {
					var h zstd.Header
					dict := uint32(0) // the dictionary only for small objects (docs/FORMAT.md)
					if len(plain) < 64<<10 {
						dict = 0x6f6d7031
					}
					if err := h.Decode(sealed); err != nil || !h.HasFCS || h.FrameContentSize != uint64(len(plain)) || h.DictionaryID != dict {
						t.Errorf("frame header %+v, %v; want its size %d and dictionary %#x", h, err, len(plain), dict)
					}
				}
				got, err := cc.codec.Open(sealed, int64(len(plain)))
				if err != nil || !bytes.Equal(got, plain) {
					t.Fatalf("Open: %d bytes, %v; want the %d sealed", len(got), err, len(plain))
				}
				if got, err := openReader(cc.codec, sealed, int64(len(plain))); err != nil || !bytes.Equal(got, plain) {
					t.Fatalf("OpenReader: %d bytes, %v", len(got), err)
				}
				if len(plain) > 0 {
					if _, err := cc.codec.Open(sealed, int64(len(plain)-1)); err == nil {
						t.Errorf("opened under a limit one byte short")
					}
				}
			})
		}
	}
}

// A stream of other than the size announced fails at Close.
func TestSealWriterSizeChecked(t *testing.T) {
	k := newKey(t)
	plain := sessionBytes(100_000)
	for _, c := range []repo.Codec{repo.NewZstd(), mustNew(t, crypt.Options{IdentityFile: k.file})} {
		for _, size := range []int64{int64(len(plain)) - 1, int64(len(plain)) + 1, 0} {
			_, err := sealStream(t, c, plain, size)
			if err == nil || !strings.Contains(err.Error(), "zstd:") {
				t.Errorf("%T: %d bytes sealed as %d: %v, want an error", c, len(plain), size, err)
			}
		}
		if _, err := sealStream(t, c, nil, 5); err == nil {
			t.Errorf("%T: nothing sealed as 5 bytes: no error", c)
		}
	}
}
