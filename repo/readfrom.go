package repo

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
)

// Tail is where StreamGenerationFrom read a generation from and to.
type Tail struct {
	// The bytes written were [From, End) of the generation.
	From     int64
	End      int64
	HashFrom int64
	// HashState is the running stream hash at End (sha256's marshalled
	// state), to read on from there next time.
	HashState []byte
}

// StreamGenerationFrom writes to w the bytes of a generation from offset
// from on, where a reader that had read it before left off with the
// running stream hash state (nil for from 0): the way a search cache keeps
// up with a session that grew, fetching only the chunks that hold new
// bytes (a chunk a compaction merged since may begin before from; it is
// read whole, and only its bytes past from are written). Every byte is
// covered by a verified hash: each chunk's stream hash, continued from
// state, and a chunk's own hash for bytes before hash_from. The bytes go
// to w as they arrive, a buffer at a time, so memory stays a few buffers
// whatever the tail's size; but a chunk's hashes are checked at its end,
// so bytes written before an error must not be trusted: a caller keeps
// what it made of them only on nil. The title slot's head object is not
// laid over the bytes.
func (r *Repo) StreamGenerationFrom(ctx context.Context, s Stream, g *Generation, from int64, state []byte, maxSize int64, w io.Writer) (*Tail, error) {
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
	var buf []byte
	for _, c := range picked {
		if c.End <= from {
			continue
		}
		if buf == nil {
			buf = make([]byte, 64<<10)
		}
		// The chunk that makes the generation complete must carry its
		// meta (read from 0 it is checked; read on, it was before).
		metaInChunk := g.MetaInChunk && c.Start == 0
		if err := r.streamChunkFrom(ctx, s, g.Name, c, metaInChunk, h, t, buf, w, &refReads); err != nil {
			return nil, err
		}
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

// streamChunkFrom writes chunk c's bytes past t.End to w, continuing the
// stream hash h, and checks the chunk's hashes at its end.
func (r *Repo) streamChunkFrom(ctx context.Context, s Stream, gen string, c ChunkRef, metaInChunk bool, h hash.Hash, t *Tail, buf []byte, w io.Writer, refReads *int) error {
	hdr, body, closeBody, err := r.chunkReader(ctx, s, gen, c, refReads)
	if err != nil {
		return err
	}
	defer closeBody()
	if metaInChunk {
		if _, err := HeaderMeta(s, gen, hdr); err != nil {
			return err
		}
	}
	switch {
	case t.HashFrom < 0:
		t.HashFrom = hdr.HashFrom
		if t.From > 0 && t.From < t.HashFrom {
			return fmt.Errorf("chunk %s: read on from %d, inside the bytes before hash_from %d", ChunkName(c.Start, c.End), t.From, t.HashFrom)
		}
	case hdr.HashFrom != t.HashFrom:
		return fmt.Errorf("chunk %s: hash_from %d, the chunks before say %d", ChunkName(c.Start, c.End), hdr.HashFrom, t.HashFrom)
	}
	// The chunk's own hash where no stream hash covers its bytes;
	// referenced bytes were checked as resolved.
	var own hash.Hash
	if hdr.Ref == nil && c.Start < t.HashFrom {
		own = sha256.New()
	}
	pos := c.Start
	for {
		n, rerr := body.Read(buf)
		b := buf[:n]
		if own != nil {
			own.Write(b)
		}
		// A chunk that begins before what is read contributes only the
		// bytes past it.
		if skip := t.End - pos; skip > 0 {
			b = b[min(skip, int64(len(b))):]
		}
		pos += int64(n)
		if len(b) > 0 {
			if skip := t.HashFrom - t.End; skip < int64(len(b)) {
				h.Write(b[max(skip, 0):])
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
			t.End += int64(len(b))
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if pos != c.End {
		return fmt.Errorf("chunk %s: holds %d bytes, want %d", ChunkName(c.Start, c.End), pos-c.Start, c.End-c.Start)
	}
	if own != nil && hex.EncodeToString(own.Sum(nil)) != hdr.SHA256 {
		return errChunkHash(c.Start, c.End)
	}
	if hex.EncodeToString(h.Sum(nil)) != hdr.StreamSHA256 {
		if own == nil && hdr.Ref == nil {
			// Say whether the chunk itself is damaged: read it again
			// whole.
			if _, _, err := r.GetChunk(ctx, s, gen, c.Start, c.End); err != nil {
				return err
			}
		}
		return errStreamHash(c.Start, c.End)
	}
	return nil
}
