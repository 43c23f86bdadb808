package repo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/ompsync/ompsync/remote"
)

// The in-memory generation reader: the reference StreamGeneration is
// held to (FuzzStreamGeneration), and what the repo's tests read whole
// generations with.

// RefAssembled is a verified generation, as the reference reader returns it.
type RefAssembled struct {
	Meta Meta
	// Data is the file as last uploaded: chunks in order, with the head
	// object's title slot laid over the first bytes when there is one.
	Data []byte
	// Marks say when Data's bytes reached the remote, in stream order:
	// the chunks' upload marks, or for a chunk without them its listed
	// modification time (see UploadedBy).
	Marks []Mark
	// Mtime is the newest file mtime the chunks carry (an artifact's;
	// zero when none does, as for sessions).
	Mtime time.Time
}

// ReadGenerationHashOnce reassembles a generation as ReadGeneration does,
// refusing the same damage, but hashes each byte once: every byte it returns
// is covered by a verified hash, not by two. A chunk's own sha256 is checked
// when the generation is that one chunk (its stream hash would only cover
// the same bytes again) and when it holds bytes before hash_from (no stream
// hash covers them); the bytes of every other chunk are covered by the
// running stream hash, checked at every chunk boundary, which also proves
// that the chunks belong together. When a stream hash fails, the chunk's own
// hash says whether the chunk itself is damaged. Referenced bytes are always
// checked against the reference chunk's sha256. Readers that hold a whole
// generation use it; the commands stream instead (StreamGeneration, the
// same checks as bytes arrive, which FuzzStreamGeneration holds to these
// readers'), `ompsync verify`, an audit of the remote, with every hash.
func (r *Repo) ReadGenerationHashOnce(ctx context.Context, s Stream, g *Generation, maxSize int64) (*RefAssembled, error) {
	return r.ReadGenerationRef(ctx, s, g, maxSize, false)
}

type metaResult struct {
	meta Meta
	err  error
}

// ReadGenerationRef reassembles a generation in memory and verifies every
// chunk's hash (with every; otherwise as ReadGenerationHashOnce) and the
// running stream hash at every chunk boundary: the reference that
// StreamGeneration, which the product reads with, is held to.
func (r *Repo) ReadGenerationRef(ctx context.Context, s Stream, g *Generation, maxSize int64, every bool) (*RefAssembled, error) {
	if !g.HasMeta {
		return nil, fmt.Errorf("%s generation %s: no meta object", s.Prefix(), g.Name)
	}
	// The audit reads the meta while the first chunk is: a round trip less
	// per generation; its errors still come first. A restore does not read
	// it at all: the listing shows it (the generation is complete), the key
	// names the stream, and hash_from, all it would add, every chunk header
	// carries (and must agree on).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	metaC := make(chan metaResult, 1)
	metaObject := every && !g.MetaInChunk
	if metaObject {
		go func() {
			m, err := r.GetMeta(ctx, s, g.Name)
			metaC <- metaResult{m, err}
		}()
	}
	picked, covered := Cover(g.Chunks)
	var err error
	switch {
	case covered < MaxEnd(g.Chunks):
		err = fmt.Errorf("%s generation %s: %w at byte %d", s.Prefix(), g.Name, ErrGap, covered)
	case covered > maxSize:
		err = &TooLargeError{s.Prefix(), g.Name, covered, maxSize}
	}
	var hdr ChunkHeader
	var chunk []byte
	refReads := r.refReads
	if refReads == 0 {
		refReads = maxRefReads
	}
	if err == nil && len(picked) > 0 {
		hdr, chunk, err = r.chunkBytes(ctx, s, g.Name, picked[0], 0, false, &refReads)
	}
	var meta Meta
	if metaObject {
		mr := <-metaC
		if mr.err != nil {
			return nil, mr.err
		}
		meta = mr.meta
	}
	if err != nil {
		return nil, err
	}
	switch {
	case g.MetaInChunk && len(picked) > 0:
		// Cover's first pick starts at 0 here: the chunk that makes the
		// generation complete.
		if meta, err = HeaderMeta(s, g.Name, hdr); err != nil {
			return nil, err
		}
	case !every:
		meta.HashFrom = hdr.HashFrom
	}

	// One chunk: its own hash covers every byte, and it is the only
	// check a generation of one chunk needs (with hash_from 0 its stream
	// hash is the same sum, so the header must say so).
	single := len(picked) == 1 && !every
	// data grows as verified bytes arrive, never to a size the listing
	// claims: its keys are the remote's word.
	var data []byte
	var marks []Mark
	var mtime time.Time
	h := sha256.New()
	for i, c := range picked {
		if i > 0 {
			if hdr, chunk, err = r.chunkBytes(ctx, s, g.Name, c, 0, false, &refReads); err != nil {
				return nil, err
			}
		}
		if hdr.Mtime.After(mtime) {
			mtime = hdr.Mtime
		}
		if hdr.HashFrom != meta.HashFrom {
			return nil, fmt.Errorf("chunk %s: hash_from %d, meta says %d", ChunkName(c.Start, c.End), hdr.HashFrom, meta.HashFrom)
		}
		// Reference chunks were checked against their hash as resolved.
		checked := hdr.Ref != nil
		if !checked && (every || single || c.Start < meta.HashFrom) {
			if !chunkHashOK(hdr, chunk) {
				return nil, errChunkHash(c.Start, c.End)
			}
			checked = true
		}
		if single {
			if meta.HashFrom == 0 && hdr.StreamSHA256 != hdr.SHA256 {
				return nil, errStreamHash(c.Start, c.End)
			}
			data = chunk
			marks = ChunkMarks(hdr, c, 0)
			break
		}
		// An overlapping chunk contributes only the bytes past what is held.
		fresh := chunk[int64(len(data))-c.Start:]
		if skip := meta.HashFrom - int64(len(data)); skip > 0 {
			h.Write(fresh[min(skip, int64(len(fresh))):])
		} else {
			h.Write(fresh)
		}
		marks = append(marks, ChunkMarks(hdr, c, int64(len(data)))...)
		data = append(data, fresh...)
		if hex.EncodeToString(h.Sum(nil)) != hdr.StreamSHA256 {
			if !checked && !chunkHashOK(hdr, chunk) {
				return nil, errChunkHash(c.Start, c.End)
			}
			return nil, errStreamHash(c.Start, c.End)
		}
	}
	if g.HasHead {
		head, err := r.GetHead(ctx, s, g.Name)
		if err != nil && !errors.Is(err, remote.ErrNotFound) {
			return nil, err
		}
		if err == nil {
			if meta.HashFrom != HeadSize || len(head) != HeadSize || len(data) < HeadSize {
				return nil, fmt.Errorf("%s generation %s: head object does not fit a title slot", s.Prefix(), g.Name)
			}
			if !ValidHead(head) {
				return nil, fmt.Errorf("%s generation %s: head object is not a title slot", s.Prefix(), g.Name)
			}
			copy(data, head)
		}
	}
	return &RefAssembled{Meta: meta, Data: data, Marks: marks, Mtime: mtime}, nil
}
