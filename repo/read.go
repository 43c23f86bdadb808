package repo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ompsync/ompsync/remote"
)

// ErrGap means a generation's chunks do not form one unbroken stream.
var ErrGap = errors.New("gap in stream")

// Assembled is a verified generation.
type Assembled struct {
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

// ReadGeneration reassembles a generation and verifies every chunk's hash and
// the running stream hash at every chunk boundary. maxSize bounds what it
// will assemble (the size a catalog recorded, with some slack), so a
// hostile listing cannot make it fetch without limit.
func (r *Repo) ReadGeneration(ctx context.Context, s Stream, g *Generation, maxSize int64) (*Assembled, error) {
	return r.readGeneration(ctx, s, g, maxSize, true)
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
func (r *Repo) ReadGenerationHashOnce(ctx context.Context, s Stream, g *Generation, maxSize int64) (*Assembled, error) {
	return r.readGeneration(ctx, s, g, maxSize, false)
}

type metaResult struct {
	meta Meta
	err  error
}

// readGeneration is ReadGeneration; every says whether each chunk's own hash
// is checked even where the stream hash covers its bytes.
func (r *Repo) readGeneration(ctx context.Context, s Stream, g *Generation, maxSize int64, every bool) (*Assembled, error) {
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
	return &Assembled{Meta: meta, Data: data, Marks: marks, Mtime: mtime}, nil
}

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
	var chunks []ChunkRef
	for obj, err := range r.client.List(ctx, s.GenPrefix(gen), remote.ListOptions{}) {
		if err != nil {
			return nil, err
		}
		name, inside := strings.CutPrefix(obj.Key, s.GenPrefix(gen))
		if cs, ce, ok := ParseChunkName(name); inside && ok {
			chunks = append(chunks, ChunkRef{Start: cs, End: ce, Size: obj.Size})
		}
		if len(chunks) > MaxSessionObjects {
			return nil, errTooManyObjects
		}
	}
	picked, covered := Cover(chunks)
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
