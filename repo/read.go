package repo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/session"
)

// ErrGap means a generation's chunks do not form one unbroken stream.
var ErrGap = errors.New("gap in stream")

// Assembled is a verified generation.
type Assembled struct {
	Meta Meta
	// Data is the file as last uploaded: chunks in order, with the head
	// object's title slot laid over the first bytes when there is one.
	Data []byte
}

// ReadGeneration reassembles a generation and verifies every chunk's hash and
// the running stream hash at every chunk boundary. maxSize bounds what it
// will assemble (the size a catalog recorded, with some slack), so a
// hostile listing cannot make it fetch without limit.
func (r *Repo) ReadGeneration(ctx context.Context, s Stream, g *Generation, maxSize int64) (*Assembled, error) {
	if !g.HasMeta {
		return nil, fmt.Errorf("%s generation %s: no meta object", s.Prefix(), g.Name)
	}
	meta, err := r.GetMeta(ctx, s, g.Name)
	if err != nil {
		return nil, err
	}
	picked, covered := Cover(g.Chunks)
	if covered < MaxEnd(g.Chunks) {
		return nil, fmt.Errorf("%s generation %s: %w at byte %d", s.Prefix(), g.Name, ErrGap, covered)
	}
	if covered > maxSize {
		return nil, fmt.Errorf("%s generation %s: %d bytes, more than the %d recorded", s.Prefix(), g.Name, covered, maxSize)
	}
	data := make([]byte, 0, covered)
	h := sha256.New()
	for _, c := range picked {
		hdr, chunk, err := r.GetChunk(ctx, s, g.Name, c.Start, c.End)
		if err != nil {
			return nil, err
		}
		if hdr.HashFrom != meta.HashFrom {
			return nil, fmt.Errorf("chunk %s: hash_from %d, meta says %d", ChunkName(c.Start, c.End), hdr.HashFrom, meta.HashFrom)
		}
		// An overlapping chunk contributes only the bytes past what is held.
		fresh := chunk[int64(len(data))-c.Start:]
		if skip := meta.HashFrom - int64(len(data)); skip > 0 {
			h.Write(fresh[min(skip, int64(len(fresh))):])
		} else {
			h.Write(fresh)
		}
		data = append(data, fresh...)
		if hex.EncodeToString(h.Sum(nil)) != hdr.StreamSHA256 {
			return nil, fmt.Errorf("chunk %s: stream hash mismatch: the chunks do not belong together", ChunkName(c.Start, c.End))
		}
	}
	if g.HasHead {
		head, err := r.GetHead(ctx, s, g.Name)
		if err != nil && !errors.Is(err, remote.ErrNotFound) {
			return nil, err
		}
		if err == nil {
			if meta.HashFrom != session.TitleSlotSize || len(head) != session.TitleSlotSize || len(data) < session.TitleSlotSize {
				return nil, fmt.Errorf("%s generation %s: head object does not fit a title slot", s.Prefix(), g.Name)
			}
			if _, ok := session.ParseTitleSlot(head); !ok {
				return nil, fmt.Errorf("%s generation %s: head object is not a title slot", s.Prefix(), g.Name)
			}
			copy(data, head)
		}
	}
	return &Assembled{Meta: meta, Data: data}, nil
}
