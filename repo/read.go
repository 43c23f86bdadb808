package repo

import (
	"context"
	"errors"
	"fmt"
)

// ErrGap means a generation's chunks do not form one unbroken stream.
var ErrGap = errors.New("gap in stream")

func errStreamHash(start, end int64) error {
	return fmt.Errorf("chunk %s: stream hash mismatch: the chunks do not belong together", ChunkName(start, end))
}

// MaxChunkSize is the most bytes a reader takes one chunk to hold. Writers
// stay below it (the agent cuts a backlog into 4 MiB chunks and a longer
// line at this size, compaction merges up to 32 MiB), so a key naming a
// longer range is damage: refused before a byte of it is read, however well
// its object compresses.
const MaxChunkSize = 64 << 20

// checkChunkRange refuses a chunk key whose range is past MaxChunkSize.
func checkChunkRange(start, end int64) error {
	if end-start > MaxChunkSize {
		return fmt.Errorf("chunk %s: its key names %d bytes, more than the %d a chunk may hold", ChunkName(start, end), end-start, MaxChunkSize)
	}
	return nil
}

// getChunk reads and opens one chunk object, within MaxChunkSize.
func (r *Repo) getChunk(ctx context.Context, s Stream, gen string, start, end int64) ([]byte, error) {
	if err := checkChunkRange(start, end); err != nil {
		return nil, err
	}
	return r.getOpen(ctx, s.ChunkKey(gen, start, end), ChunkLimit(start, end))
}

// maxRefDepth bounds chains of reference chunks (a machine that pulled from
// a machine that pulled...); a hostile remote cannot make a reader loop.
const maxRefDepth = 4

// maxRefReads bounds the chunks one generation's references may make a
// reader fetch: a reference resolves to the few chunks its source holds for
// the range (compaction keeps a stream under a few hundred), but a hostile
// remote could cut every level of a chain into one-byte chunks, each a
// reference again.
const maxRefReads = 1 << 12

var errRefBomb = fmt.Errorf("its references make more than %d chunk reads (a reference bomb)", maxRefReads)

// chunkBytes reads a chunk, resolving a reference chunk to the bytes it
// names and checking them against its hash. The bytes of a chunk that holds
// them are checked against its hash only with hash. refReads is what is
// left of the generation's budget of chunks read for references.
func (r *Repo) chunkBytes(ctx context.Context, s Stream, gen string, c ChunkRef, depth int, hash bool, refReads *int) (ChunkHeader, []byte, error) {
	plain, err := r.getChunk(ctx, s, gen, c.Start, c.End)
	if err != nil {
		return ChunkHeader{}, nil, err
	}
	hdr, data, err := decodeChunk(plain, c.Start, c.End, hash)
	if err != nil || hdr.Ref == nil {
		return hdr, data, err
	}
	if depth >= maxRefDepth {
		return hdr, nil, fmt.Errorf("chunk %s: reference chain deeper than %d", ChunkName(c.Start, c.End), maxRefDepth)
	}
	src := Stream{SessionID: s.SessionID, Machine: hdr.Ref.Machine, Name: s.Name}
	data, err = r.readRange(ctx, src, hdr.Ref.Generation, c.Start, c.End, depth+1, refReads)
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
// The range is one chunk's, so within MaxChunkSize.
func (r *Repo) readRange(ctx context.Context, s Stream, gen string, start, end int64, depth int, refReads *int) ([]byte, error) {
	g, err := r.ListGeneration(ctx, s, gen)
	if err != nil {
		return nil, err
	}
	picked, covered := Cover(g.Chunks)
	if covered < end {
		return nil, fmt.Errorf("%w: holds [0, %d), need [%d, %d)", ErrGap, covered, start, end)
	}
	var out []byte
	for _, c := range picked {
		if c.End <= start || c.Start >= end {
			continue
		}
		if *refReads--; *refReads < 0 {
			return nil, errRefBomb
		}
		_, data, err := r.chunkBytes(ctx, s, gen, c, depth, true, refReads)
		if err != nil {
			return nil, err
		}
		from := max(start, c.Start, start+int64(len(out)))
		out = append(out, data[from-c.Start:min(end, c.End)-c.Start]...)
	}
	return out, nil
}
