package repo

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"fmt"
)

// Tail is the bytes of a generation past an offset, verified.
type Tail struct {
	// Data is bytes [From, End) of the generation.
	Data     []byte
	From     int64
	End      int64
	HashFrom int64
	// HashState is the running stream hash at End (sha256's marshalled
	// state), to read on from there next time.
	HashState []byte
}

// ReadGenerationFrom reads a generation from offset from on, where a
// reader that had read it before left off with the running stream hash
// state (nil for from 0): the way a search cache keeps up with a session
// that grew, fetching only the chunks that hold new bytes (a chunk a
// compaction merged since may begin before from; it is read whole). Every
// byte returned is covered by a verified hash: each chunk's stream hash,
// continued from state, and a chunk's own hash for bytes before hash_from.
// The title slot's head object is not laid over the bytes.
func (r *Repo) ReadGenerationFrom(ctx context.Context, s Stream, g *Generation, from int64, state []byte, maxSize int64) (*Tail, error) {
	if !g.HasMeta {
		return nil, fmt.Errorf("%s generation %s: no meta object", s.Prefix(), g.Name)
	}
	picked, covered := Cover(g.Chunks)
	switch {
	case covered < MaxEnd(g.Chunks):
		return nil, fmt.Errorf("%s generation %s: %w at byte %d", s.Prefix(), g.Name, ErrGap, covered)
	case covered > maxSize:
		return nil, &TooLargeError{s.Prefix(), g.Name, covered, maxSize}
	case covered < from:
		return nil, fmt.Errorf("%s generation %s: %w: it holds %d bytes, %d were read before", s.Prefix(), g.Name, ErrGap, covered, from)
	}
	h := sha256.New()
	if from > 0 {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
			return nil, fmt.Errorf("stream hash state: %w", err)
		}
	}
	refReads := r.refReads
	if refReads == 0 {
		refReads = maxRefReads
	}
	t := &Tail{From: from, End: from, HashFrom: -1}
	for _, c := range picked {
		if c.End <= from {
			continue
		}
		hdr, chunk, err := r.chunkBytes(ctx, s, g.Name, c, 0, false, &refReads)
		if err != nil {
			return nil, err
		}
		switch {
		case t.HashFrom < 0:
			t.HashFrom = hdr.HashFrom
			if from > 0 && from < t.HashFrom {
				return nil, fmt.Errorf("chunk %s: read on from %d, inside the bytes before hash_from %d", ChunkName(c.Start, c.End), from, t.HashFrom)
			}
		case hdr.HashFrom != t.HashFrom:
			return nil, fmt.Errorf("chunk %s: hash_from %d, the chunks before say %d", ChunkName(c.Start, c.End), hdr.HashFrom, t.HashFrom)
		}
		checked := hdr.Ref != nil // checked against its hash as resolved
		if !checked && c.Start < t.HashFrom {
			if !chunkHashOK(hdr, chunk) {
				return nil, errChunkHash(c.Start, c.End)
			}
			checked = true
		}
		fresh := chunk[t.End-c.Start:]
		if skip := t.HashFrom - t.End; skip > 0 {
			h.Write(fresh[min(skip, int64(len(fresh))):])
		} else {
			h.Write(fresh)
		}
		if hex.EncodeToString(h.Sum(nil)) != hdr.StreamSHA256 {
			if !checked && !chunkHashOK(hdr, chunk) {
				return nil, errChunkHash(c.Start, c.End)
			}
			return nil, errStreamHash(c.Start, c.End)
		}
		t.Data = append(t.Data, fresh...)
		t.End = c.End
	}
	if t.HashFrom < 0 {
		t.HashFrom = 0 // nothing new was read
	}
	st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return nil, err
	}
	t.HashState = st
	return t, nil
}
