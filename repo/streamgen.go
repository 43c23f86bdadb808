package repo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"time"

	"github.com/ompsync/ompsync/remote"
)

// Streamed is what StreamGeneration wrote.
type Streamed struct {
	Meta Meta // with every; otherwise HashFrom only, from the chunk headers
	Size int64
	// Head is the generation's head object, the title slot to lay over
	// bytes [0, len(Head)), when there is one.
	Head []byte
	// Mtime is the newest file mtime the chunks carry (an artifact's;
	// zero when none does, as for sessions).
	Mtime time.Time
	// Uploaded, from StreamGenerationAt, is the time of the last upload
	// mark whose bytes it wrote (zero when it wrote none).
	Uploaded time.Time
}

// StreamGeneration reassembles a generation and writes its bytes to w as
// they arrive, verifying the running stream hash at every chunk boundary,
// which also proves that the chunks belong together. With every, each
// chunk's own hash is checked too (an audit: verify); without, each byte
// is hashed once: a chunk's own hash is checked where no stream hash
// covers its bytes (a generation of one chunk, bytes before hash_from),
// and when a stream hash fails, to say whether the chunk itself is
// damaged. Referenced bytes are always checked against the reference
// chunk's hash. Memory stays a few buffers whatever the generation's size
// (a reference's range, at most a chunk, is resolved in memory); the
// in-memory reference reader of the tests (FuzzStreamGeneration) refuses
// the same damage. Bytes written before an error must not be
// trusted: a caller writes to a temp file and keeps it only on nil. The
// head object is returned, not laid over, since w is written in order.
func (r *Repo) StreamGeneration(ctx context.Context, s Stream, g *Generation, maxSize int64, w io.Writer, every bool) (Streamed, error) {
	return r.streamGeneration(ctx, s, g, maxSize, w, every, time.Time{})
}

// StreamGenerationAt streams the bytes of a generation that were on the
// remote at t, as StreamGeneration streams them all: those up to the last
// upload mark (ChunkMarks) by then, counted from the chunk headers as
// they arrive. The chunk the cut falls in is read and
// verified whole, though only its bytes up to the cut are written, and no
// chunk after it is read. A cut inside the title slot (before hash_from)
// is refused: those bytes were never a file. The head object is returned
// only when bytes past the slot were written; whether it is as old as t
// is the caller's to say (g.HasHead).
func (r *Repo) StreamGenerationAt(ctx context.Context, s Stream, g *Generation, maxSize int64, w io.Writer, t time.Time) (Streamed, error) {
	if t.IsZero() {
		return Streamed{}, errors.New("StreamGenerationAt: no time")
	}
	return r.streamGeneration(ctx, s, g, maxSize, w, false, t)
}

// streamGeneration is StreamGeneration, cut at the time at when it is not
// zero.
func (r *Repo) streamGeneration(ctx context.Context, s Stream, g *Generation, maxSize int64, w io.Writer, every bool, at time.Time) (Streamed, error) {
	var out Streamed
	if !g.HasMeta {
		return out, fmt.Errorf("%s generation %s: no meta object", s.Prefix(), g.Name)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A meta object is read beside the chunks; a meta in the first chunk
	// comes with it (streamChunks).
	var meta Meta
	var metaErr error
	metaRead := make(chan struct{})
	metaObject := every && !g.MetaInChunk
	if metaObject {
		go func() {
			defer close(metaRead)
			meta, metaErr = r.GetMeta(ctx, s, g.Name)
		}()
	}
	err := r.streamChunks(ctx, s, g, maxSize, at, &chunkStream{w: w, out: &out, every: every, stream: sha256.New()})
	if metaObject {
		<-metaRead
		if metaErr != nil {
			return out, metaErr
		}
		if err == nil && meta.HashFrom != out.Meta.HashFrom {
			return out, fmt.Errorf("%s generation %s: the chunks' hash_from is %d, meta says %d", s.Prefix(), g.Name, out.Meta.HashFrom, meta.HashFrom)
		}
		out.Meta = meta // its hash_from is the chunks' (checked), or err goes back with it
	}
	if err != nil {
		return out, err
	}
	if !at.IsZero() {
		switch {
		case out.Size == 0:
			return out, nil // nothing uploaded by then: no title to lay over
		case out.Size < out.Meta.HashFrom:
			return out, fmt.Errorf("%s generation %s: the bytes uploaded by %s end inside the title slot", s.Prefix(), g.Name, at.UTC().Format(time.RFC3339))
		}
	}
	if g.HasHead {
		head, err := r.GetHead(ctx, s, g.Name)
		if err != nil && !errors.Is(err, remote.ErrNotFound) {
			return out, err
		}
		if err == nil {
			if !ValidHead(head) || out.Meta.HashFrom != HeadSize || out.Size < HeadSize {
				return out, fmt.Errorf("%s generation %s: head object does not fit a title slot", s.Prefix(), g.Name)
			}
			out.Head = head
		}
	}
	return out, nil
}

// streamChunks streams g's chunks to cs.w, on from cs.from (with cs.stream
// the running stream hash there): the one walk every reader of a
// generation's bytes takes.
func (r *Repo) streamChunks(ctx context.Context, s Stream, g *Generation, maxSize int64, at time.Time, cs *chunkStream) error {
	picked, covered := Cover(g.Chunks)
	switch {
	case covered < MaxEnd(g.Chunks):
		return fmt.Errorf("%s generation %s: %w at byte %d", s.Prefix(), g.Name, ErrGap, covered)
	case covered > maxSize:
		return &TooLargeError{s.Prefix(), g.Name, covered, maxSize}
	case covered < cs.from:
		return fmt.Errorf("%s generation %s: %w: it holds %d bytes, %d were read before", s.Prefix(), g.Name, ErrGap, covered, cs.from)
	}
	refReads := r.refReads
	if refReads == 0 {
		refReads = maxRefReads
	}
	pooled := r.bufs.buf()
	defer r.bufs.putBuf(pooled)
	out := cs.out
	cs.single = len(picked) == 1 && !cs.resume
	cs.hashFrom, cs.buf, cs.held, cs.cut = -1, *pooled, cs.from, math.MaxInt64
	for _, c := range picked {
		if c.End <= cs.from {
			continue // read before
		}
		hdr, body, closeBody, err := r.chunkReader(ctx, s, g.Name, c, &refReads)
		if err != nil {
			return err
		}
		if g.MetaInChunk && c.Start == 0 {
			if out.Meta, err = HeaderMeta(s, g.Name, hdr); err != nil {
				closeBody()
				return err
			}
		}
		if hdr.Mtime.After(out.Mtime) {
			out.Mtime = hdr.Mtime
		}
		stop := false
		if !at.IsZero() {
			var none bool
			if stop, none = cs.cutAt(hdr, c, at); none {
				closeBody() // nothing of it was on the remote then
				if cs.hashFrom < 0 {
					cs.hashFrom = hdr.HashFrom
				}
				break
			}
		}
		if err := r.streamChunk(ctx, s, g.Name, c, hdr, body, closeBody, cs); err != nil {
			return err
		}
		if stop {
			break // the rest came later than at
		}
	}
	out.Meta.HashFrom = max(cs.hashFrom, 0)
	return nil
}

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
	h := sha256.New()
	if from > 0 {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
			return nil, fmt.Errorf("stream hash state: %w", err)
		}
	}
	var out Streamed
	cs := &chunkStream{w: w, out: &out, resume: true, from: from, stream: h}
	if err := r.streamChunks(ctx, s, g, maxSize, time.Time{}, cs); err != nil {
		return nil, err
	}
	st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return nil, err
	}
	return &Tail{From: from, End: cs.held, HashFrom: out.Meta.HashFrom, HashState: st}, nil
}

// chunkStream is how far streamChunks has come through a generation.
type chunkStream struct {
	w             io.Writer
	out           *Streamed
	every, single bool
	// resume: the stream hash's state is wanted at the end (a tail read
	// on later), so no chunk may skip it (single).
	resume   bool
	from     int64 // where the bytes to write begin (a tail's start)
	stream   hash.Hash
	hashFrom int64 // -1 until a chunk says
	buf      []byte
	// held is how far the stream is read and hashed; out.Size, how far it
	// is written: the same, but for the bytes past a cut at at.
	held, cut int64
}

// cutAt cuts chunk c after its last upload mark by at (the first mark
// later than at ends what is written, whatever the marks after it). It reports whether such a mark
// stops the stream after c, and whether none of c was on the remote then.
func (cs *chunkStream) cutAt(hdr ChunkHeader, c ChunkRef, at time.Time) (stop, none bool) {
	cs.cut = cs.held
	for _, m := range ChunkMarks(hdr, c, cs.held) {
		if m.At > at.UnixMilli() {
			stop = true
			break
		}
		cs.cut, cs.out.Uploaded = m.End, m.Time()
	}
	return stop, cs.cut == cs.held
}

// streamChunk streams chunk c (its header hdr, its bytes body, closed
// with closeBody) on from where cs stands, and checks its hashes.
func (r *Repo) streamChunk(ctx context.Context, s Stream, gen string, c ChunkRef, hdr ChunkHeader, body io.Reader, closeBody func(), cs *chunkStream) error {
	defer closeBody()
	switch {
	case cs.hashFrom < 0:
		cs.hashFrom = hdr.HashFrom
		if cs.from > 0 && cs.from < cs.hashFrom {
			return fmt.Errorf("chunk %s: read on from %d, inside the bytes before hash_from %d", ChunkName(c.Start, c.End), cs.from, cs.hashFrom)
		}
	case hdr.HashFrom != cs.hashFrom:
		return fmt.Errorf("chunk %s: hash_from %d, the chunks before say %d", ChunkName(c.Start, c.End), hdr.HashFrom, cs.hashFrom)
	}
	// A chunk's own hash where no stream hash covers its bytes, or
	// everywhere with every; referenced bytes were checked as resolved.
	var own hash.Hash
	if hdr.Ref == nil && (cs.every || cs.single || c.Start < cs.hashFrom) {
		own = sha256.New()
	}
	pos := c.Start
	for {
		n, err := body.Read(cs.buf)
		b := cs.buf[:n]
		if own != nil {
			own.Write(b)
		}
		// An overlapping chunk contributes only the bytes past what is
		// read.
		if skip := cs.held - pos; skip > 0 {
			b = b[min(skip, int64(len(b))):]
		}
		pos += int64(n)
		if len(b) > 0 {
			// One chunk alone is checked by its own hash (and its stream
			// hash by equality, below): hashing its bytes twice was up to
			// a tenth of a restore's CPU.
			if from := cs.hashFrom - cs.held; from < int64(len(b)) && !(cs.single && !cs.every) {
				cs.stream.Write(b[max(from, 0):])
			}
			if keep := b[:max(min(cs.cut-cs.held, int64(len(b))), 0)]; len(keep) > 0 {
				if _, werr := cs.w.Write(keep); werr != nil {
					return werr
				}
				cs.out.Size += int64(len(keep))
			}
			cs.held += int64(len(b))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if pos != c.End {
		return fmt.Errorf("chunk %s: holds %d bytes, want %d", ChunkName(c.Start, c.End), pos-c.Start, c.End-c.Start)
	}
	if own != nil && hex.EncodeToString(own.Sum(nil)) != hdr.SHA256 {
		return errChunkHash(c.Start, c.End)
	}
	if cs.single && !cs.every {
		if cs.hashFrom == 0 && hdr.StreamSHA256 != hdr.SHA256 {
			return errStreamHash(c.Start, c.End)
		}
		return nil
	}
	if hex.EncodeToString(cs.stream.Sum(nil)) != hdr.StreamSHA256 {
		if own == nil && hdr.Ref == nil {
			// Say whether the chunk itself is damaged: read it again whole.
			if _, _, err := r.GetChunk(ctx, s, gen, c.Start, c.End); err != nil {
				return err
			}
		}
		return errStreamHash(c.Start, c.End)
	}
	return nil
}

// chunkReader opens chunk c: its checked header, and its bytes as they
// arrive, exactly its range's length and then the end (a reference's
// bytes, resolved and checked against its hash, from memory).
func (r *Repo) chunkReader(ctx context.Context, s Stream, gen string, c ChunkRef, refReads *int) (ChunkHeader, io.Reader, func(), error) {
	hdr, br, rc, err := r.openChunk(ctx, s, gen, c, true)
	if err != nil {
		return hdr, nil, nil, err
	}
	closeBody := func() {
		rc.Close()
		r.bufs.putReader(br)
	}
	if hdr.Ref != nil {
		// A reference holds no bytes of its own; decodeChunk checks the
		// rest of its header, and chunkBytes resolves it.
		_, err := br.ReadByte()
		closeBody()
		if err != io.EOF {
			return hdr, nil, nil, fmt.Errorf("chunk %s: a reference chunk holds bytes", ChunkName(c.Start, c.End))
		}
		hdr, data, err := r.chunkBytes(ctx, s, gen, c, 0, false, refReads)
		if err != nil {
			return hdr, nil, nil, err
		}
		return hdr, bytes.NewReader(data), func() {}, nil
	}
	// A data chunk's bytes are checked as they arrive.
	if err := checkHeader(&hdr, c.Start, c.End); err != nil {
		closeBody()
		return hdr, nil, nil, err
	}
	return hdr, &exactBody{r: br, raw: rc, left: c.End - c.Start, name: ChunkName(c.Start, c.End)}, closeBody, nil
}

// readHeader reads and parses a chunk's header line from br, whose buffer
// holds the longest line any chunk may have (streamBufSize); a line longer
// than one starting where c does may have is no header. Without a header,
// with drain, the rest is read first: a bomb says so if it is one, as the
// whole read would have.
func readHeader(br *bufio.Reader, c ChunkRef, drain bool) (ChunkHeader, error) {
	line, err := br.ReadSlice('\n')
	if err == nil && len(line) > headerLimit(c.Start)+1 {
		err = bufio.ErrBufferFull
	}
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) || err == io.EOF {
			if drain {
				if _, derr := io.Copy(io.Discard, br); derr != nil {
					return ChunkHeader{}, derr
				}
			}
			return ChunkHeader{}, fmt.Errorf("chunk %s: no header", ChunkName(c.Start, c.End))
		}
		return ChunkHeader{}, err
	}
	return parseHeader(line[:len(line)-1], c.Start, c.End)
}

// UploadedAt is when the last bytes of chunk c reached the remote: its
// newest upload mark, or, for a chunk written without marks, the listing's
// modification time. A rekey or a compaction rewrites objects, not marks.
func (r *Repo) UploadedAt(ctx context.Context, s Stream, gen string, c ChunkRef) (time.Time, error) {
	h, err := r.chunkHeader(ctx, s, gen, c)
	if err != nil {
		return time.Time{}, err
	}
	var at int64
	for _, m := range h.Uploaded {
		at = max(at, m.At)
	}
	if at == 0 {
		return c.ModTime, nil
	}
	return time.UnixMilli(at).UTC(), nil
}

// chunkHeader reads only the header line of chunk c: the object is opened
// as a stream and closed after its first line, so finding a generation's
// meta in its first chunk costs the first block of a chunk of any size.
func (r *Repo) chunkHeader(ctx context.Context, s Stream, gen string, c ChunkRef) (ChunkHeader, error) {
	hdr, br, rc, err := r.openChunk(ctx, s, gen, c, false)
	if err != nil {
		return hdr, err
	}
	rc.Close()
	r.bufs.putReader(br)
	if hdr.V != 1 || hdr.Start != c.Start || hdr.End != c.End {
		return hdr, fmt.Errorf("chunk %s: header says [%d, %d)", ChunkName(c.Start, c.End), hdr.Start, hdr.End)
	}
	return hdr, nil
}

// openChunk opens chunk c as a stream and reads its header line (drain:
// see readHeader); the caller closes rc and gives br back.
func (r *Repo) openChunk(ctx context.Context, s Stream, gen string, c ChunkRef, drain bool) (ChunkHeader, *bufio.Reader, io.ReadCloser, error) {
	if err := checkChunkRange(c.Start, c.End); err != nil {
		return ChunkHeader{}, nil, nil, err
	}
	key := s.ChunkKey(gen, c.Start, c.End)
	if limit := sealedLimit(ChunkLimit(c.Start, c.End)); c.Size > limit {
		// Listed larger than it could need: refused before its GET, as
		// getAll would refuse it after.
		return ChunkHeader{}, nil, nil, fmt.Errorf("read %s: object larger than %d bytes", key, limit)
	}
	rc, err := r.openStream(ctx, key, ChunkLimit(c.Start, c.End))
	if err != nil {
		return ChunkHeader{}, nil, nil, err
	}
	br := r.bufs.reader(rc)
	hdr, err := readHeader(br, c, drain)
	if err != nil {
		rc.Close()
		r.bufs.putReader(br)
		return hdr, nil, nil, err
	}
	return hdr, br, rc, nil
}

// exactBody is a chunk's bytes, which must end exactly at its range's end:
// what r holds past the header, then raw, read directly (through r, every
// byte was copied once more).
type exactBody struct {
	r    *bufio.Reader
	raw  io.Reader
	left int64
	name string
}

func (b *exactBody) source() io.Reader {
	if b.r.Buffered() > 0 {
		return b.r
	}
	return b.raw
}

func (b *exactBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		var one [1]byte
		if _, err := io.ReadFull(b.source(), one[:]); err != io.EOF {
			if err == nil {
				return 0, fmt.Errorf("chunk %s: holds more bytes than its range", b.name)
			}
			return 0, err
		}
		return 0, io.EOF
	}
	n, err := b.source().Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(n)
	if err == io.EOF && b.left > 0 {
		return n, fmt.Errorf("chunk %s: ends %d bytes short of its range", b.name, b.left)
	}
	if err == io.EOF {
		err = nil // the check of the end is the next read's
	}
	return n, err
}
