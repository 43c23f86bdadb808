package restore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// headLen is how much of a file's start plan keeps in memory: every
// store's title slot (omp's 256 bytes) is in it.
const headLen = 4 << 10

// compareBuf is the size of each of the two buffers a streamed comparison
// reads through.
const compareBuf = 256 << 10

// body is one file's bytes as the merge rule weighs them, read through r
// and never held whole: a copy's verified temp file, the local file, or
// bytes already in memory (data).
type body struct {
	r    io.ReaderAt
	size int64
	head []byte // the first min(size, headLen) bytes
	// file is the verified temp file r reads, which a write may take as
	// the new file (a link or a rename, not a copy).
	file string
	data []byte
}

func memBody(data []byte) body {
	return body{r: bytes.NewReader(data), size: int64(len(data)), head: data[:min(len(data), headLen)], data: data}
}

// fileBody reads the first size bytes of f.
func fileBody(f *os.File, size int64) (body, error) {
	head := make([]byte, min(size, headLen))
	if _, err := f.ReadAt(head, 0); err != nil {
		return body{}, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return body{r: f, size: size, head: head}, nil
}

// content is what a write puts in a file: src's bytes with slot, when not
// nil, laid over the first of them (a newer title from another copy).
type content struct {
	src  body
	slot []byte
}

func (c content) size() int64 { return c.src.size }

// ReadAt reads src with the slot laid over.
func (c content) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.src.r.ReadAt(p, off)
	if off < int64(len(c.slot)) {
		copy(p[:n], c.slot[off:])
	}
	return n, err
}

// head is the content's first bytes, the slot laid over.
func (c content) head() []byte {
	if c.slot == nil {
		return c.src.head
	}
	h := append([]byte(nil), c.src.head...)
	copy(h, c.slot)
	return h
}

// section is the content's bytes [from, end).
func (c content) section(from int64) io.Reader {
	return io.NewSectionReader(c, from, c.size()-from)
}

// sum is the SHA-256 of the content's bytes [from, end), read again.
func (c content) sum(from int64) (string, error) {
	h := sha256.New()
	if _, err := io.CopyBuffer(h, c.section(from), make([]byte, compareBuf)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// isPrefix reports whether a's bytes are a prefix of b's (with f.slotted,
// past title slots of the same length), reading both a buffer at a time.
func isPrefix(a, b body, f format) (bool, error) {
	la, lb := f.slotLen(a.head), f.slotLen(b.head)
	if la != lb || a.size > b.size {
		return false, nil
	}
	same, err := sameBytes(a.r, b.r, int64(la), a.size)
	if errors.Is(err, io.EOF) {
		// Shorter than it was a moment ago: omp (or a user) cut it.
		return false, errors.New("the local file shrank while restoring; nothing written (run the restore again)")
	}
	return same, err
}

// sameBytes reports whether a and b hold the same bytes [from, to).
func sameBytes(a, b io.ReaderAt, from, to int64) (bool, error) {
	n := min(to-from, compareBuf)
	if n <= 0 {
		return true, nil
	}
	ba, bb := make([]byte, n), make([]byte, n)
	for off := from; off < to; {
		k := min(to-off, n)
		if _, err := a.ReadAt(ba[:k], off); err != nil {
			return false, err
		}
		if _, err := b.ReadAt(bb[:k], off); err != nil {
			return false, err
		}
		if !bytes.Equal(ba[:k], bb[:k]) {
			return false, nil
		}
		off += k
	}
	return true, nil
}

// onlyWriter hides a file's ReadFrom, so that io.Copy goes through the
// buffer it is given (an O_APPEND file cannot take copy_file_range).
type onlyWriter struct{ io.Writer }
