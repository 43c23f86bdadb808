package repo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

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
		hdr, chunk, err := r.chunkBytes(ctx, s, g.Name, c, 0)
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

// maxRefDepth bounds chains of reference chunks (a machine that pulled from
// a machine that pulled...); a hostile remote cannot make a reader loop.
const maxRefDepth = 4

// chunkBytes reads a chunk, resolving a reference chunk to the bytes it
// names and checking them against its hash.
func (r *Repo) chunkBytes(ctx context.Context, s Stream, gen string, c ChunkRef, depth int) (ChunkHeader, []byte, error) {
	hdr, data, err := r.GetChunk(ctx, s, gen, c.Start, c.End)
	if err != nil || hdr.Ref == nil {
		return hdr, data, err
	}
	if depth >= maxRefDepth {
		return hdr, nil, fmt.Errorf("chunk %s: reference chain deeper than %d", ChunkName(c.Start, c.End), maxRefDepth)
	}
	src := Stream{SessionID: s.SessionID, Machine: hdr.Ref.Machine, Name: s.Name}
	data, err = r.readRange(ctx, src, hdr.Ref.Generation, c.Start, c.End, depth+1)
	if err != nil {
		return hdr, nil, fmt.Errorf("chunk %s refers to %s: %w", ChunkName(c.Start, c.End), src.GenPrefix(hdr.Ref.Generation), err)
	}
	if HashHex(data) != hdr.SHA256 {
		return hdr, nil, fmt.Errorf("chunk %s: referenced bytes fail its sha256", ChunkName(c.Start, c.End))
	}
	return hdr, data, nil
}

// readRange reads bytes [start, end) of a generation from its chunks. Each
// chunk is verified by its own hash; the caller checks the range's hash.
func (r *Repo) readRange(ctx context.Context, s Stream, gen string, start, end int64, depth int) ([]byte, error) {
	var chunks []ChunkRef
	for obj, err := range r.client.List(ctx, s.GenPrefix(gen), remote.ListOptions{}) {
		if err != nil {
			return nil, err
		}
		name, inside := strings.CutPrefix(obj.Key, s.GenPrefix(gen))
		if cs, ce, ok := ParseChunkName(name); inside && ok {
			chunks = append(chunks, ChunkRef{Start: cs, End: ce, Size: obj.Size})
		}
	}
	picked, covered := Cover(chunks)
	if covered < end {
		return nil, fmt.Errorf("%w: holds [0, %d), need [%d, %d)", ErrGap, covered, start, end)
	}
	out := make([]byte, 0, end-start)
	for _, c := range picked {
		if c.End <= start || c.Start >= end {
			continue
		}
		_, data, err := r.chunkBytes(ctx, s, gen, c, depth)
		if err != nil {
			return nil, err
		}
		from := max(start, c.Start, start+int64(len(out)))
		out = append(out, data[from-c.Start:min(end, c.End)-c.Start]...)
	}
	return out, nil
}
