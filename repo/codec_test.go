package repo

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// The dictionary is part of the repository format (docs/FORMAT.md): frames name it by
// id, so changing its bytes would make every stored object unreadable.
func TestDictionaryNeverChanges(t *testing.T) {
	const want = "542492ad7087ef5d2c5f3808abb665a30aa40e415c02c671604ad8f2506c7169"
	sum := sha256.Sum256(dictOMP1)
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("dict/omp1.zdict has SHA-256 %s, the format promises %s: a new dictionary needs a new id and file", got, want)
	}
	if id, err := zstd.InspectDictionary(dictOMP1); err != nil || id.ID() != 0x6f6d7031 {
		t.Fatalf("dictionary id: %v, %v", id, err)
	}
}

func corpusLines(t *testing.T) [][]byte {
	t.Helper()
	files, _ := filepath.Glob("../testdata/corpus/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no corpus in ../testdata/corpus")
	}
	var lines [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, bytes.SplitAfter(b, []byte("\n"))...)
	}
	return lines
}

// Small and large objects seal deterministically (a chunk put again after
// a crash has the same bytes), small ones with the dictionary and large
// ones without (docs/FORMAT.md), and open to what was sealed.
func TestZstdRoundTrip(t *testing.T) {
	z := NewZstd()
	small := corpusLines(t)[3]
	large := []byte(strings.Repeat(string(small), (smallObject/len(small))+2))
	for name, plain := range map[string][]byte{"small": small, "large": large, "empty": nil} {
		a, err := z.Seal(plain)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := NewZstd().Seal(plain)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: sealing twice gave different bytes", name)
		}
		var h zstd.Header
		want := uint32(0x6f6d7031)
		if len(plain) >= smallObject {
			want = 0
		}
		if err := h.Decode(a); len(plain) > 0 && (err != nil || h.DictionaryID != want) {
			t.Errorf("%s: frame dictionary id %#x (%v), want %#x", name, h.DictionaryID, err, want)
		}
		got, err := z.Open(a, int64(len(plain)))
		if err != nil || !bytes.Equal(got, plain) {
			t.Errorf("%s: opened %d bytes (%v), want %d", name, len(got), err, len(plain))
		}
		if b, err := z.Open(a, int64(len(plain))-1); len(plain) > 0 && (err != ErrTooLarge || b != nil) {
			t.Errorf("%s: opening under a smaller limit: %d bytes, %v; want none and ErrTooLarge", name, len(b), err)
		}
	}
}

// Objects written with the dictionary at any size (as ompsync did for
// large ones before) open, as do frames without it.
func TestZstdLargeDictionaryFrameOpens(t *testing.T) {
	z := NewZstd()
	small := corpusLines(t)[3]
	large := []byte(strings.Repeat(string(small), 4*smallObject/len(small)))
	old, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderDict(dictOMP1))
	sealed := old.EncodeAll(large, nil)
	if got, err := z.Open(sealed, int64(len(large))); err != nil || !bytes.Equal(got, large) {
		t.Fatalf("a large frame with the dictionary: %d bytes, %v", len(got), err)
	}
	r, err := z.OpenReader(bufio.NewReader(bytes.NewReader(sealed)), int64(len(large)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, large) {
		t.Fatalf("streamed: %d bytes, %v", len(got), err)
	}
}

// Objects written without the dictionary (any zstd frame) still open, and
// one session entry alone, the usual live chunk, is stored in fewer bytes
// with the dictionary than without.
func TestZstdDictionary(t *testing.T) {
	z := NewZstd()
	plainEnc, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	var with, without, raw int
	for _, l := range corpusLines(t) {
		if len(l) == 0 || len(l) >= smallObject {
			continue
		}
		old := plainEnc.EncodeAll(l, nil)
		got, err := z.Open(old, int64(len(l)))
		if err != nil || !bytes.Equal(got, l) {
			t.Fatalf("a frame without the dictionary: %v", err)
		}
		sealed, _ := z.Seal(l)
		raw, with, without = raw+len(l), with+len(sealed), without+len(old)
	}
	t.Logf("%d bytes of single entries: %d stored with the dictionary, %d without", raw, with, without)
	if with >= without*9/10 {
		t.Errorf("the dictionary saves too little: %d bytes against %d", with, without)
	}
}
