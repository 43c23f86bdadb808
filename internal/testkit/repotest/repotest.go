// Package repotest does with a repository what tests do and ompsync never
// does: read a whole generation into memory, put a blob held in memory, ask
// whether a blob is there. The repo package's own tests, which cannot
// import it, have the same as methods (repo/export_test.go).
package repotest

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// Assembled is a verified generation, in memory.
type Assembled struct {
	Meta repo.Meta
	// Data is the file as last uploaded, with the head object's title
	// slot laid over its first bytes when there is one.
	Data []byte
	// Mtime is the newest file mtime the chunks carry.
	Mtime time.Time
}

// ReadGeneration is StreamGeneration, every hash checked, into memory,
// within maxSize bytes.
func ReadGeneration(ctx context.Context, r *repo.Repo, s repo.Stream, g *repo.Generation, maxSize int64) (*Assembled, error) {
	var buf bytes.Buffer
	st, err := r.StreamGeneration(ctx, s, g, maxSize, &buf, true)
	if err != nil {
		return nil, err
	}
	as := &Assembled{Meta: st.Meta, Data: buf.Bytes(), Mtime: st.Mtime}
	copy(as.Data, st.Head)
	return as, nil
}

// PutBlob stores a blob unless it is there, as the agent's streamed
// PutBlobFrom stores it: checked against the marker, sealed, put if absent.
func PutBlob(ctx context.Context, r *repo.Repo, name string, data []byte) (int, error) {
	if err := r.CheckWrite(ctx); err != nil {
		return 0, err
	}
	sealed, err := r.Codec().Seal(data)
	if err != nil {
		return 0, err
	}
	err = r.Client().Put(ctx, repo.BlobKey(name), sealed, remote.PutOptions{IfAbsent: true})
	if errors.Is(err, remote.ErrPreconditionFailed) {
		return 0, nil
	}
	return len(sealed), err
}

// HasBlob reports whether a blob is on the remote.
func HasBlob(ctx context.Context, r *repo.Repo, name string) (bool, error) {
	_, err := r.Client().Stat(ctx, repo.BlobKey(name))
	if errors.Is(err, remote.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
