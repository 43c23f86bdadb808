package remote

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
)

// ErrSourceChanged: a PutReader source gave other bytes (or fewer) than it
// did when its checksum was computed; nothing was stored.
var ErrSourceChanged = errors.New("the bytes to upload changed while they were read")

// Sums are the checksums of a PutReader source, from one pass over it
// (MD5 only when asked for).
type Sums struct {
	MD5    [md5.Size]byte
	SHA256 [sha256.Size]byte
	// held: computed (SumsFor keeps them); withMD5: MD5 among them.
	held, withMD5 bool
}

// SumsFor returns the checksums of the size bytes of r: those in kept
// from an earlier attempt's pass when it holds them (with MD5 when asked
// for), else computed now and, with kept set, kept there. The bytes a put
// then sends are checked against them (CheckedReader).
func SumsFor(ctx context.Context, r io.ReaderAt, size int64, withMD5 bool, kept *Sums) (Sums, error) {
	if kept != nil && kept.held && (kept.withMD5 || !withMD5) {
		return *kept, nil
	}
	sums, err := Checksum(ctx, r, size, withMD5)
	if err != nil {
		return Sums{}, err
	}
	if kept != nil {
		if kept.held && kept.SHA256 != sums.SHA256 {
			// Kept without MD5 (another driver's attempt), and the bytes
			// changed since.
			return Sums{}, ErrSourceChanged
		}
		*kept = sums
	}
	return sums, nil
}

// readBlock is how much of a source one read takes: large enough that a
// file is read in few system calls, small enough to be nothing beside the
// objects in memory elsewhere.
const readBlock = 256 << 10

// Checksum reads size bytes of r once and returns their SHA-256, and their
// MD5 when withMD5 (S3's Content-MD5; MD5 is slower than SHA-256 here, so
// it is computed only where it is sent). A source shorter than size is an
// error (a file cut under the reader).
func Checksum(ctx context.Context, r io.ReaderAt, size int64, withMD5 bool) (Sums, error) {
	if size < 0 {
		return Sums{}, fmt.Errorf("negative size %d", size)
	}
	m, s := md5.New(), sha256.New()
	w := io.Writer(s)
	if withMD5 {
		w = io.MultiWriter(m, s)
	}
	n, err := copyBlocks(ctx, w, io.NewSectionReader(r, 0, size))
	if err != nil {
		return Sums{}, err
	}
	if n != size {
		return Sums{}, fmt.Errorf("%w: %d of %d bytes", ErrSourceChanged, n, size)
	}
	sums := Sums{held: true, withMD5: withMD5}
	if withMD5 {
		m.Sum(sums.MD5[:0])
	}
	s.Sum(sums.SHA256[:0])
	return sums, nil
}

// copyBlocks is io.Copy in readBlock reads that stops when ctx ends.
func copyBlocks(ctx context.Context, w io.Writer, r io.Reader) (int64, error) {
	return io.CopyBuffer(w, ContextBody(ctx, io.NopCloser(r)), make([]byte, readBlock))
}

// CheckedReader reads size bytes of r, the second pass of a PutReader: it
// hashes what it gives and, at the end of the bytes, fails with
// ErrSourceChanged when they are not those sums were computed from (or
// when r ends early), so a request that sends it is cut off before it
// completes and the server stores nothing. It is an io.ReadSeeker, which
// S3 clients need to sign a body and to rewind it.
func CheckedReader(r io.ReaderAt, size int64, sums Sums) io.ReadSeeker {
	return &checkedReader{sr: io.NewSectionReader(r, 0, size), size: size, want: sums.SHA256, h: sha256.New()}
}

type checkedReader struct {
	sr   *io.SectionReader
	size int64
	want [sha256.Size]byte
	h    hash.Hash
	pos  int64 // bytes hashed: the offset of the next Read
}

func (c *checkedReader) Read(p []byte) (int, error) {
	n, err := c.sr.Read(p)
	c.h.Write(p[:n])
	c.pos += int64(n)
	if err == io.EOF || err == nil && c.pos == c.size {
		if c.pos != c.size || !bytes.Equal(c.h.Sum(nil), c.want[:]) {
			return 0, ErrSourceChanged // n bytes withheld: the body never completes
		}
	}
	return n, err
}

// Seek rewinds: only to the start (and to the end, to learn the size),
// which is all a client signing or retrying a body asks for.
func (c *checkedReader) Seek(offset int64, whence int) (int64, error) {
	pos, err := c.sr.Seek(offset, whence)
	if err != nil {
		return pos, err
	}
	switch {
	case pos == 0:
		c.h.Reset()
		c.pos = 0
	case pos != c.pos && !(pos == c.size && whence == io.SeekEnd):
		return pos, errors.New("checked reader: seek other than to the start")
	}
	return pos, nil
}

// sameBytes reports whether rd gives exactly size bytes, those of r, by
// their SHA-256. An error reading rd is returned; a source r that gives
// fewer bytes than size (changed since) is not the same.
func sameBytes(ctx context.Context, rd io.Reader, r io.ReaderAt, size int64) (bool, error) {
	want, err := Checksum(ctx, r, size, false)
	if err != nil {
		return false, ctx.Err() // nil when it is the source that fell short
	}
	h := sha256.New()
	// One byte past size says the stored object is longer: a body that
	// never ends is read no further.
	n, err := copyBlocks(ctx, h, io.LimitReader(rd, size+1))
	if err != nil {
		return false, err
	}
	return n == size && bytes.Equal(h.Sum(nil), want.SHA256[:]), nil
}
