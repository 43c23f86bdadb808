package repo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/ompsync/ompsync/remote"
)

// openStream opens the object at key for reading its plaintext as it
// arrives: within limit plaintext bytes and sealedLimit(limit) stored
// bytes, so an object of any size costs a few buffers, not its size.
func (r *Repo) openStream(ctx context.Context, key string, limit int64) (io.ReadCloser, error) {
	rc, err := r.client.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	stored := &storedBody{ctx: ctx, key: key, rc: rc, left: sealedLimit(limit)}
	body := r.bufs.reader(stored)
	plain, err := r.codec.OpenReader(body, limit)
	if errors.Is(err, ErrNotEncrypted) && r.plaintextAllowed(ctx) {
		plain, err = (&Zstd{}).OpenReader(body, limit)
	}
	if err != nil {
		rc.Close()
		r.bufs.putReader(body)
		if stored.err != nil {
			err = stored.err
		}
		return nil, fmt.Errorf("open %s: %w", key, r.explainOpen(ctx, err))
	}
	return &plainStream{ReadCloser: plain, stored: stored, key: key, bufs: &r.bufs, body: body}, nil
}

// streamBufSize is the size of the buffers a streamed object passes
// through: its stored bytes, its plaintext's header line (the longest a
// chunk may have, and its newline) and its bytes on their way out.
const streamBufSize = maxMetaHeader + 1

// streamBufs reuses the readers and buffers streamed objects pass through:
// three of them made for each of 1,000 sessions were 220 MB of the 320 MB
// a restore allocated, and its resident size. What is put back must not
// be used again by whoever put it.
type streamBufs struct{ readers, bytes sync.Pool }

// reader is a buffered reader of streamBufSize bytes over r.
func (b *streamBufs) reader(r io.Reader) *bufio.Reader {
	if br, _ := b.readers.Get().(*bufio.Reader); br != nil {
		br.Reset(r)
		return br
	}
	return bufio.NewReaderSize(r, streamBufSize)
}

func (b *streamBufs) putReader(br *bufio.Reader) {
	br.Reset(nil) // not holding on to what it read from
	b.readers.Put(br)
}

// buf is a buffer of streamBufSize bytes.
func (b *streamBufs) buf() *[]byte {
	if p, _ := b.bytes.Get().(*[]byte); p != nil {
		return p
	}
	buf := make([]byte, streamBufSize)
	return &buf
}

func (b *streamBufs) putBuf(p *[]byte) { b.bytes.Put(p) }

// storedBody is an object's stored bytes, refused past left and with a
// body that breaks off reported as the network failing, whichever client
// (wrapped for retries or not) carried it.
type storedBody struct {
	ctx  context.Context
	key  string
	rc   io.ReadCloser
	left int64
	// err is the first failure of the stored bytes themselves, which the
	// layers above may report as a mere unexpected end.
	err error
}

func (b *storedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p[:min(int64(len(p)), b.left+1)])
	b.left -= int64(n)
	if b.left < 0 {
		b.err = errors.New("the stored object is larger than its plaintext could need")
		return 0, b.err
	}
	var re *remote.Error
	if err != nil && err != io.EOF && b.ctx.Err() == nil && !errors.As(err, &re) {
		err = &remote.Error{Op: "get", Key: b.key, Transient: true, Err: err}
	}
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// plainStream closes the plaintext and the stored body under it.
type plainStream struct {
	io.ReadCloser
	stored *storedBody
	key    string
	// body, the buffered stored bytes, goes back to bufs when closed.
	bufs *streamBufs
	body *bufio.Reader
}

func (s *plainStream) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		if s.stored.err != nil {
			err = s.stored.err
		}
		err = fmt.Errorf("read %s: %w", s.key, err)
	}
	return n, err
}

func (s *plainStream) Close() error {
	err := s.ReadCloser.Close()
	if berr := s.stored.rc.Close(); err == nil {
		err = berr
	}
	if s.body != nil {
		s.bufs.putReader(s.body)
		s.body = nil // a second Close must not give it back twice
	}
	return err
}

// OpenBlob opens a blob of at most limit bytes for reading as it arrives;
// the caller checks its hash against its name.
func (r *Repo) OpenBlob(ctx context.Context, name string, limit int64) (io.ReadCloser, error) {
	return r.openStream(ctx, BlobKey(name), limit)
}
