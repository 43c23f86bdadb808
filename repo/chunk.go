package repo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ompsync/ompsync/safename"
)

// ChunkHeader is the first line of a chunk's plaintext; the raw bytes follow.
// StreamSHA256 lets a reader verify the whole stream it reassembled, not just
// each chunk: it is the SHA-256 of bytes [HashFrom, End) of the generation.
// HashFrom skips omp's title slot, which is rewritten in place and travels
// in the head object.
type ChunkHeader struct {
	V            int    `json:"v"`
	Start        int64  `json:"start"`
	End          int64  `json:"end"`
	HashFrom     int64  `json:"hash_from"`
	SHA256       string `json:"sha256"`
	StreamSHA256 string `json:"stream_sha256"`
	// Ref, when set, means the chunk holds no bytes: they are bytes
	// [Start, End) of another machine's generation of the same stream,
	// pulled from there by sync. SHA256 still covers them.
	Ref *ChunkSource `json:"ref,omitempty"`
	// Uploaded, when present, says when its bytes reached the remote:
	// bytes up to each mark's end by its time (see Mark). Readers before
	// marks ignore the member; a chunk without it falls back to the
	// listing's modification time.
	Uploaded []Mark `json:"uploaded,omitempty"`
	// Mtime, when present, is the file's modification time when the
	// chunk's bytes were read: an artifact has no catalog entry to carry
	// it, and restore gives the file back the last chunk's. Session
	// chunks leave it out (the catalog records theirs). Readers before it
	// ignore the member.
	Mtime time.Time `json:"mtime,omitzero"`
	// Meta is the generation's meta in a chunk starting at offset 0, so a
	// new generation costs one PUT: a generation without a meta object
	// takes this.
	Meta *Meta `json:"meta,omitempty"`
}

// ChunkSource names where a reference chunk's bytes live.
type ChunkSource struct {
	Machine    string `json:"machine"`
	Generation string `json:"generation"`
}

// maxHeader bounds the header line a reader accepts, but for a header
// carrying meta.
const maxHeader = 1024

// maxMetaHeader bounds the header line of a chunk at offset 0, which may
// carry its generation's meta (a path and cwd of up to a few KiB each,
// escaped): the reader's own bound, whatever the chunk claims.
const maxMetaHeader = 64 << 10

// headerLimit is the longest header line a chunk starting at start may have.
func headerLimit(start int64) int {
	if start == 0 {
		return maxMetaHeader
	}
	return maxHeader
}

// EncodeChunk builds the plaintext of a chunk object. Its header stays
// within what every reader accepts: marks are thinned until the header
// without meta fits 1024 bytes. A meta is kept only in a chunk at offset 0
// (see MetaFits).
func EncodeChunk(h ChunkHeader, data []byte) []byte {
	h.V = 1
	h.Uploaded = ThinMarks(h.Uploaded, MaxMarks)
	meta := h.Meta
	h.Meta = nil
	hb, _ := json.Marshal(h)
	for len(hb) > maxHeader && len(h.Uploaded) > 0 {
		if len(h.Uploaded) == 1 {
			h.Uploaded = nil
		} else {
			h.Uploaded = ThinMarks(h.Uploaded, len(h.Uploaded)/2)
		}
		hb, _ = json.Marshal(h)
	}
	if meta != nil && h.Start == 0 {
		m := *meta
		m.V = 1
		m.Path = EncodePath(m.Path)
		h.Meta = &m
		hb, _ = json.Marshal(h)
	}
	out := make([]byte, 0, len(hb)+1+len(data))
	out = append(out, hb...)
	out = append(out, '\n')
	return append(out, data...)
}

// MetaFits reports whether h with m as its meta stays within the header
// a reader accepts of a chunk at offset 0. A writer that finds it does not
// puts the meta object first instead, so a listed chunk at 0 always has a
// meta to go with it.
func MetaFits(h ChunkHeader, m Meta) bool {
	h.Meta = &m
	return h.Start == 0 && bytes.IndexByte(EncodeChunk(h, nil), '\n') <= maxMetaHeader
}

// ChunkLimit is the most plaintext a chunk for [start, end) may hold.
func ChunkLimit(start, end int64) int64 { return end - start + int64(headerLimit(start)) }

// decodeChunk parses and verifies a chunk's plaintext against the range its
// key names; without hash it checks everything but the sha256 of the bytes,
// which the caller then covers (see chunkHashOK). The stream hash is
// checked by the reader that reassembles.
func decodeChunk(plain []byte, start, end int64, hash bool) (ChunkHeader, []byte, error) {
	nl := bytes.IndexByte(plain, '\n')
	if nl < 0 || nl > headerLimit(start) {
		return ChunkHeader{}, nil, fmt.Errorf("chunk %s: no header", ChunkName(start, end))
	}
	h, err := parseHeader(plain[:nl], start, end)
	if err != nil {
		return h, nil, err
	}
	data := plain[nl+1:]
	if err := checkHeader(&h, start, end); err != nil {
		return h, nil, err
	}
	switch {
	case h.Ref != nil && len(data) != 0:
		return h, nil, fmt.Errorf("chunk %s: a reference chunk holds bytes", ChunkName(start, end))
	case h.Ref != nil:
		return h, nil, nil
	case int64(len(data)) != end-start:
		return h, nil, fmt.Errorf("chunk %s: holds %d bytes, want %d", ChunkName(start, end), len(data), end-start)
	case hash && !chunkHashOK(h, data):
		return h, nil, errChunkHash(start, end)
	}
	return h, data, nil
}

// checkHeader checks what a chunk's header says of itself against the
// range its key names; a reference's bytes are checked where it resolves.
// The times are advice, not bytes: marks that cannot be right are dropped,
// and the listing's time stands in for them.
func checkHeader(h *ChunkHeader, start, end int64) error {
	if !validMarks(h.Uploaded, start, end) {
		h.Uploaded = nil
	}
	name := ChunkName(start, end)
	switch {
	case h.V != 1 && h.Ref == nil:
		return fmt.Errorf("chunk %s: unknown chunk version %d", name, h.V)
	case h.V != 1 || h.Start != start || h.End != end:
		return fmt.Errorf("chunk %s: header says [%d, %d)", name, h.Start, h.End)
	case h.Ref != nil && (!safename.Machine(h.Ref.Machine) || !ValidGeneration(h.Ref.Generation)):
		return fmt.Errorf("chunk %s: bad reference", name)
	case h.Ref == nil && (h.HashFrom < 0 || h.HashFrom > end):
		return fmt.Errorf("chunk %s: bad hash_from %d", name, h.HashFrom)
	}
	return nil
}

// parseHeader parses a chunk's header line: only one carrying meta may be
// longer than 1024 bytes.
func parseHeader(line []byte, start, end int64) (ChunkHeader, error) {
	var h ChunkHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return ChunkHeader{}, fmt.Errorf("chunk %s: bad header: %w", ChunkName(start, end), err)
	}
	if len(line) > maxHeader && h.Meta == nil {
		return ChunkHeader{}, fmt.Errorf("chunk %s: a header of %d bytes, more than the %d a header without meta may have", ChunkName(start, end), len(line), maxHeader)
	}
	return h, nil
}

// HeaderMeta is the meta a chunk at offset 0 of generation gen of s
// carries, checked as a meta object is and against the key: it must name
// this session, machine, stream and generation, and the chunk's hash_from.
// A chunk without one is damage where the generation has no meta object
// (Generation.MetaInChunk).
func HeaderMeta(s Stream, gen string, h ChunkHeader) (Meta, error) {
	where := s.Prefix() + " generation " + gen
	if h.Meta == nil {
		return Meta{}, fmt.Errorf("%s: no meta object, and its first chunk %s carries no meta: the generation is damaged", where, ChunkName(h.Start, h.End))
	}
	m := *h.Meta
	if err := m.decode(); err != nil {
		return Meta{}, fmt.Errorf("%s: first chunk's meta: %w", where, err)
	}
	switch {
	case m.SessionID != s.SessionID || m.Machine != s.Machine || m.Stream != s.Name || m.Generation != gen:
		return Meta{}, fmt.Errorf("%s: first chunk's meta describes another generation (session %q, machine %q, stream %q, generation %q)",
			where, m.SessionID, m.Machine, m.Stream, m.Generation)
	case m.HashFrom != h.HashFrom:
		return Meta{}, fmt.Errorf("%s: first chunk's meta says hash_from %d, its header %d", where, m.HashFrom, h.HashFrom)
	}
	return m, nil
}

// chunkHashOK reports whether data hashes to the chunk header's sha256.
func chunkHashOK(h ChunkHeader, data []byte) bool { return HashHex(data) == h.SHA256 }

func errChunkHash(start, end int64) error {
	return fmt.Errorf("chunk %s: sha256 mismatch", ChunkName(start, end))
}

// HashHex is the hex SHA-256 of b.
func HashHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
