package repo

import (
	"bufio"
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Codec turns plaintext into the bytes stored in an object and back. Every
// object except the marker goes through the repository's codec, so that
// encryption (a later codec) covers all of them.
type Codec interface {
	Seal(plain []byte) ([]byte, error)
	// SealWriter is Seal as the plaintext is written: what is written to
	// the writer it returns goes sealed to w, in the bytes Seal's readers
	// read, and Close finishes the object (it does not close w). size is
	// how many bytes will be written; Close fails when it was not that.
	// It holds a few blocks whatever the size.
	SealWriter(w io.Writer, size int64) (io.WriteCloser, error)
	// Open refuses output larger than limit bytes: a hostile remote cannot
	// make a small object inflate without bound.
	Open(sealed []byte, limit int64) ([]byte, error)
	// OpenReader is Open as the stored bytes arrive: reads give the
	// plaintext, and fail with ErrTooLarge past limit bytes, so an object
	// of any size passes through a buffer of a few blocks. Close releases
	// what it holds (not sealed).
	OpenReader(sealed *bufio.Reader, limit int64) (io.ReadCloser, error)
}

// ErrTooLarge is returned when an object inflates past its limit.
var ErrTooLarge = errors.New("object inflates past its recorded size (possible decompression bomb)")

// Zstd compresses with zstd and the ompsync dictionary (dict/omp1.zdict).
// Its output is deterministic for a given input, so a chunk uploaded again
// after a crash has identical bytes.
type Zstd struct {
	// small compresses objects under smallObject harder, with the
	// dictionary: most chunks hold one or two entries, where every byte
	// saved counts and costs little. large has no dictionary: above
	// smallObject it saves under 5% (under 2% from 500 KiB), and a frame
	// with one is decoded at half the speed (the decoder's assembly path
	// does not take dictionary frames), which a restore pays on every
	// byte.
	small, large *zstd.Encoder
	// decs reuses decoders: building one per object dominated restores.
	decs sync.Pool
}

// dictOMP1 holds omp's vocabulary (JSON keys, entry types, roles, tool
// names), so a chunk of one entry compresses nearly as well as a long run
// of them. Frames name it by its id; frames without one decode as before.
//
//go:embed dict/omp1.zdict
var dictOMP1 []byte

// smallObject is the size under which objects get the slower, tighter
// compression level.
const smallObject = 64 << 10

// streamWindow is SealWriter's window for objects over smallObject.
const streamWindow = 2 << 20

// sealWindow is Seal's window for objects over smallObject: the agent's
// default chunk size (a longer chunk, one long line, matches within it).
const sealWindow = 4 << 20

// maxWindow bounds the memory a hostile frame can make a decoder take;
// ompsync's own frames use at most 4 MiB (8 MiB before).
const maxWindow = 32 << 20

// NewZstd returns the default codec.
func NewZstd() *Zstd {
	// Not SpeedBestCompression: with the dictionary its tables take about
	// 70 MiB for 3% fewer bytes.
	small, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedBetterCompression),
		zstd.WithWindowSize(smallObject), zstd.WithEncoderDict(dictOMP1))
	if err != nil {
		panic(err) // only on invalid options or a damaged embedded dictionary
	}
	// A window of the agent's chunk size, not the default 8 MiB: a chunk
	// compresses the same, and the encoder's history takes half as much
	// (17 MiB of an agent's live heap, mid-upload).
	large, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithWindowSize(sealWindow))
	if err != nil {
		panic(err)
	}
	return &Zstd{small: small, large: large}
}

// Seal compresses plain.
func (z *Zstd) Seal(plain []byte) ([]byte, error) {
	enc := z.large
	if len(plain) < smallObject {
		enc = z.small
	}
	return enc.EncodeAll(plain, make([]byte, 0, len(plain)/3+64)), nil
}

// SealWriter compresses what is written to it into one zstd frame on w,
// with the options Seal uses for an object of size bytes. A small object
// is gathered and sealed by Seal's shared encoder: a new encoder with the
// dictionary builds 10 MB of tables first (10 ms of CPU a blob, which held
// a stopping agent past its deadline). A larger one gets an encoder of its
// own, since a stream's encoder holds state.
func (z *Zstd) SealWriter(w io.Writer, size int64) (io.WriteCloser, error) {
	if size < smallObject {
		return &smallWriter{z: z, w: w, buf: make([]byte, 0, size)}, nil
	}
	// A 2 MiB window: the encoder holds two of them (6 MiB in all, not the
	// 10 of Seal's 4 MiB), and blobs, mostly images, gain nothing from a
	// longer one. (Its lower-memory mode would copy the window at every
	// 128 KiB block: four times slower.)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithWindowSize(streamWindow))
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	// The frame records its size, as Seal's do; Close checks it.
	enc.ResetContentSize(w, size)
	return zstdWriter{enc}, nil
}

// smallWriter gathers an object under smallObject and seals it on Close.
type smallWriter struct {
	z   *Zstd
	w   io.Writer
	buf []byte
}

func (s *smallWriter) Write(p []byte) (int, error) {
	if len(s.buf)+len(p) > cap(s.buf) {
		return 0, fmt.Errorf("zstd: more than the %d bytes announced", cap(s.buf))
	}
	s.buf = append(s.buf, p...)
	return len(p), nil
}

func (s *smallWriter) Close() error {
	if len(s.buf) != cap(s.buf) {
		return fmt.Errorf("zstd: %d bytes written, %d announced", len(s.buf), cap(s.buf))
	}
	sealed, err := s.z.Seal(s.buf)
	if err != nil {
		return err
	}
	_, err = s.w.Write(sealed)
	return err
}

// zstdWriter is a frame being written. The encoder checks the size the
// frame records at Close (it is never 0 here: a smaller object is a
// smallWriter's).
type zstdWriter struct{ *zstd.Encoder }

func (z zstdWriter) Close() error {
	if err := z.Encoder.Close(); err != nil {
		return fmt.Errorf("zstd: %w", err)
	}
	return nil
}

// AgeHeader starts every age-encrypted object (the encrypting codec's).
const AgeHeader = "age-encryption.org/v1\n"

// Open decompresses sealed, stopping at limit bytes: OpenReader's
// plaintext, read into one buffer.
func (z *Zstd) Open(sealed []byte, limit int64) ([]byte, error) {
	// The age header is all OpenReader peeks at.
	rc, err := z.OpenReader(bufio.NewReaderSize(bytes.NewReader(sealed), len(AgeHeader)), limit)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	// The frame says how large it is (ompsync's always do): the output is
	// allocated once, not grown, unless that is past the limit. A hostile
	// frame may claim any size: the claim is believed only up to a ratio
	// real data does not pass; beyond it the buffer grows as read. Past
	// limit, the reader fails with ErrTooLarge.
	size := int64(len(sealed)) * 4
	var h zstd.Header
	if h.Decode(sealed) == nil && h.HasFCS && h.FrameContentSize <= uint64(limit) {
		size = min(int64(h.FrameContentSize), int64(len(sealed))*64+64<<10)
	}
	out, err := readAll(rc, min(size, limit)+1, limit+1)
	if err != nil {
		return nil, err // nothing of a failed open is handed on (or counted)
	}
	return out, nil
}

// OpenReader decompresses sealed as it is read, stopping at limit bytes.
func (z *Zstd) OpenReader(sealed *bufio.Reader, limit int64) (io.ReadCloser, error) {
	if head, _ := sealed.Peek(len(AgeHeader)); bytes.Equal(head, []byte(AgeHeader)) {
		return nil, fmt.Errorf("%w: the object is encrypted with age and no encryption is configured", ErrNoKey)
	}
	d, err := z.decoder()
	if err != nil {
		return nil, err
	}
	if err := d.Reset(sealed); err != nil {
		z.release(d)
		return nil, fmt.Errorf("zstd: %w", err)
	}
	return &zstdReader{z: z, d: d, left: limit}, nil
}

// decoder takes a decoder from the pool, or makes one.
func (z *Zstd) decoder() (*zstd.Decoder, error) {
	if d, _ := z.decs.Get().(*zstd.Decoder); d != nil {
		return d, nil
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxWindow), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderDicts(dictOMP1))
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	return d, nil
}

func (z *Zstd) release(d *zstd.Decoder) {
	_ = d.Reset(nil)
	z.decs.Put(d)
}

// zstdReader is a decoder's output, refused past its limit.
type zstdReader struct {
	z    *Zstd
	d    *zstd.Decoder
	left int64 // bytes still allowed
}

func (r *zstdReader) Read(p []byte) (int, error) {
	if r.d == nil {
		return 0, errors.New("zstd: read after close")
	}
	// One byte past the limit is enough to know it is a bomb.
	n, err := r.d.Read(p[:min(int64(len(p)), r.left+1)])
	r.left -= int64(n)
	switch {
	case r.left < 0:
		return 0, ErrTooLarge
	case errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded):
		return n, ErrTooLarge
	case err != nil && err != io.EOF:
		return n, fmt.Errorf("zstd: %w", err)
	}
	return n, err
}

func (r *zstdReader) Close() error {
	if r.d != nil {
		r.z.release(r.d)
		r.d = nil
	}
	return nil
}

// readAll is io.ReadAll into a buffer of capacity size to begin with: one
// allocation when size is right. Past it the buffer doubles, up to max
// bytes: append's gentler growth of large slices allocated five times what
// a bomb inflated to before it was refused.
func readAll(r io.Reader, size, max int64) ([]byte, error) {
	b := make([]byte, 0, min(size, max))
	for {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), min(2*int64(cap(b))+4096, max))
			copy(nb, b)
			b = nb
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if int64(len(b)) == max {
			return b, nil // the caller refuses what reaches max
		}
	}
}
