package repo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

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
	body := bufio.NewReaderSize(stored, 64<<10)
	plain, err := r.codec.OpenReader(body, limit)
	if errors.Is(err, ErrNotEncrypted) && r.plaintextAllowed(ctx) {
		plain, err = (&Zstd{}).OpenReader(body, limit)
	}
	if err != nil {
		rc.Close()
		if stored.err != nil {
			err = stored.err
		}
		return nil, fmt.Errorf("open %s: %w", key, r.explainOpen(ctx, err))
	}
	return &plainStream{ReadCloser: plain, stored: stored, key: key}, nil
}

// storedBody is an object's stored bytes, refused past left and with a
// body that breaks off reported as the network failing (as getAll does).
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
	return err
}

// OpenBlob opens a blob of at most limit bytes for reading as it arrives;
// the caller checks its hash against its name.
func (r *Repo) OpenBlob(ctx context.Context, name string, limit int64) (io.ReadCloser, error) {
	return r.openStream(ctx, BlobKey(name), limit)
}
