package repo

import (
	"bytes"
	"context"
	"errors"

	"github.com/ompsync/ompsync/remote"
)

// This package's tests cannot import internal/testkit/repotest (it imports
// repo): what it gives the other packages' tests is here, as methods.

// Assembled is repotest.Assembled.
type Assembled struct {
	Meta Meta
	Data []byte
}

// ReadGeneration is repotest.ReadGeneration.
func (r *Repo) ReadGeneration(ctx context.Context, s Stream, g *Generation, maxSize int64) (*Assembled, error) {
	var buf bytes.Buffer
	st, err := r.StreamGeneration(ctx, s, g, maxSize, &buf, true)
	if err != nil {
		return nil, err
	}
	return &Assembled{Meta: st.Meta, Data: append(st.Head, buf.Bytes()[len(st.Head):]...)}, nil
}

// PutBlob is repotest.PutBlob.
func (r *Repo) PutBlob(ctx context.Context, name string, data []byte) (int, error) {
	n, err := r.putSealed(ctx, "blob", BlobKey(name), data, remote.PutOptions{IfAbsent: true})
	if errors.Is(err, remote.ErrPreconditionFailed) {
		return 0, nil
	}
	return n, err
}

// HasBlob is repotest.HasBlob.
func (r *Repo) HasBlob(ctx context.Context, name string) (bool, error) {
	_, err := r.client.Stat(ctx, BlobKey(name))
	if errors.Is(err, remote.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Check reads the marker and checks it (CheckMarker).
func (r *Repo) Check(ctx context.Context) error {
	m, err := r.ReadMarker(ctx)
	if err != nil {
		return err
	}
	return r.CheckMarker(m)
}

// DecodeChunk parses and verifies a chunk's plaintext (decodeChunk, every
// hash checked).
func DecodeChunk(plain []byte, start, end int64) (ChunkHeader, []byte, error) {
	return decodeChunk(plain, start, end, true)
}
