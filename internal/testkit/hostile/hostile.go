// Package hostile builds damaged and hostile remotes for the tests that run
// ompsync's readers (restore, verify, pull, compact) against them: the
// real binary under a memory cap (hostile_test.go), and in process from
// fuzzed input (FuzzHostileRemote). Each remote holds a good session of
// machine "good" beside the damaged session of machine "evil", so a test
// also sees that the rest goes on.
//
// Every remote claims more than it holds: sizes, ranges, frame sizes and
// reference chains that a reader must bound by its own limits, never by
// the claim (docs/RELIABILITY.md, "A hostile remote cannot hurt the
// machine").
package hostile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// The sessions every remote holds.
const (
	GoodMachine = "good"
	GoodID      = "0000aaaa-0000-7000-8000-000000000001"
	EvilMachine = "evil"
	BadID       = "0bad0000-0000-7000-8000-000000000001"
)

// Paths of the two sessions in an agent dir.
var (
	GoodRel = "sessions/-w/2026-10-07T00-45-40-001Z_" + GoodID + ".jsonl"
	BadRel  = "sessions/-w/2026-10-07T00-45-40-002Z_" + BadID + ".jsonl"
)

var at = time.Date(2026, 10, 7, 1, 2, 3, 0, time.UTC)

// Remote is one hostile remote.
type Remote struct {
	Name string
	// Want is part of what refuses the damage: the line naming the bad
	// session (or the evil machine's catalog); alternatives separated by
	// "|" where readers that stream and readers that read whole refuse it
	// at different points.
	Want string
	// Catalog: the damage is in the evil machine's catalog, so readers
	// name the catalog rather than the session.
	Catalog bool
	// Compacts: compacting the evil machine reads the damage, and so
	// refuses it; other damage compaction never reads.
	Compacts bool
	// Blob: the damage is in a blob the session references, which cat
	// never reads (it prints the session's bytes alone).
	Blob bool
	// Recorded: the damage is the size the catalog records alone, which
	// restore --at does not hold a copy to (it takes what was uploaded by
	// then, however much the catalog says there was later).
	Recorded bool
	// Listing, when set, rewrites the S3 server's LIST answers (through
	// internal/testkit/faultproxy): a remote only an S3 server can be.
	Listing func(r *http.Request, body []byte) []byte

	build func(b *builder) error
}

// Build writes the remote through c (an empty remote).
func (h Remote) Build(ctx context.Context, c remote.Client) error {
	b := &builder{ctx: ctx, c: c, z: repo.NewZstd()}
	good, cuts := GoodSession()
	gen, err := b.session(GoodMachine, GoodID, good, cuts...)
	if err != nil {
		return err
	}
	if err := b.catalog(GoodMachine, repo.CatalogEntry{ID: GoodID, Path: GoodRel, Generation: gen, Size: int64(len(good)), Mtime: at, State: repo.StatePresent, Changed: at}); err != nil {
		return err
	}
	if err := h.build(b); err != nil {
		return fmt.Errorf("build %s: %w", h.Name, err)
	}
	return nil
}

// GoodSession is the good session's file and its line boundaries.
func GoodSession() ([]byte, []int64) { return sessionFile(GoodID, "good work") }

// sessionFile is a valid session of three lines and its line boundaries.
func sessionFile(id, text string) ([]byte, []int64) {
	lines := []string{
		`{"type":"session","version":3,"id":"` + id + `","timestamp":"2026-10-07T00:45:40.000Z","cwd":"/home/u/w"}` + "\n",
		`{"type":"message","id":"aaaa0001","parentId":null,"timestamp":"2026-10-07T01:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":"first"}]}}` + "\n",
		`{"type":"message","id":"aaaa0002","parentId":"aaaa0001","timestamp":"2026-10-07T01:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"` + text + `"}]}}` + "\n",
	}
	var cuts []int64
	n := 0
	for _, l := range lines[:len(lines)-1] {
		n += len(l)
		cuts = append(cuts, int64(n))
	}
	return []byte(strings.Join(lines, "")), cuts
}

// builder writes objects the way a hostile remote holds them.
type builder struct {
	ctx context.Context
	c   remote.Client
	z   *repo.Zstd
}

func (b *builder) raw(key string, stored []byte) error {
	return b.c.Put(b.ctx, key, stored, remote.PutOptions{})
}

// sealed stores plain through the plaintext codec, as any object.
func (b *builder) sealed(key string, plain []byte) error {
	s, err := b.z.Seal(plain)
	if err != nil {
		return err
	}
	return b.raw(key, s)
}

func stream(machine, id string) repo.Stream {
	return repo.Stream{SessionID: id, Machine: machine, Name: repo.SessionStream}
}

// session writes data as a valid generation of machine's session stream,
// in chunks cut at cuts, with its meta.
func (b *builder) session(machine, id string, data []byte, cuts ...int64) (string, error) {
	s := stream(machine, id)
	gen := repo.NewGeneration(at.UnixNano())
	if err := b.chunks(s, gen, data, cuts...); err != nil {
		return "", err
	}
	return gen, b.meta(s, gen)
}

// chunks writes data's chunks, cut at cuts, without a meta; each marked
// uploaded a minute after the one before, the first as a compaction marks
// two uploads (its middle half a minute before its end), so that readers
// --at have cuts inside a chunk and at its end to take.
func (b *builder) chunks(s repo.Stream, gen string, data []byte, cuts ...int64) error {
	h := sha256.New()
	bounds := append(append([]int64{0}, cuts...), int64(len(data)))
	for i := 0; i+1 < len(bounds); i++ {
		a, e := bounds[i], bounds[i+1]
		h.Write(data[a:e])
		uploaded := at.Add(time.Duration(i+1) * time.Minute)
		marks := repo.UploadMark(e, uploaded)
		if i == 0 && e-a >= 2 {
			marks = append([]repo.Mark{{End: (a + e) / 2, At: uploaded.Add(-30 * time.Second).UnixMilli()}}, marks...)
		}
		hdr := repo.ChunkHeader{Start: a, End: e, SHA256: repo.HashHex(data[a:e]), StreamSHA256: hex.EncodeToString(h.Sum(nil)), Uploaded: marks}
		if err := b.sealed(s.ChunkKey(gen, a, e), repo.EncodeChunk(hdr, data[a:e])); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) meta(s repo.Stream, gen string) error {
	m := repo.Meta{SessionID: s.SessionID, Machine: s.Machine, Stream: s.Name, Generation: gen, Path: BadRel, Created: at}
	return b.sealed(s.MetaKey(gen), repo.EncodeMeta(m))
}

// ref writes a reference chunk of s's generation gen for [a, e) of data,
// naming machine's generation src.
func (b *builder) ref(s repo.Stream, gen string, data []byte, a, e int64, machine, src string) error {
	sum := sha256.Sum256(data[:min(e, int64(len(data)))])
	hdr := repo.ChunkHeader{Start: a, End: e, SHA256: repo.HashHex(data[a:min(e, int64(len(data)))]), StreamSHA256: hex.EncodeToString(sum[:]),
		Ref: &repo.ChunkSource{Machine: machine, Generation: src}}
	return b.sealed(s.ChunkKey(gen, a, e), repo.EncodeChunk(hdr, nil))
}

func (b *builder) catalog(machine string, entries ...repo.CatalogEntry) error {
	return b.sealed(repo.CatalogKey(machine), repo.EncodeCatalog(repo.Catalog{Machine: machine, Updated: at, Sessions: entries}))
}

// bad writes the bad session (valid, with text in its last line) and a
// catalog entry for it that claims size bytes (0: its real size).
func (b *builder) bad(text string, size int64) (data []byte, cuts []int64, gen string, err error) {
	data, cuts = sessionFile(BadID, text)
	if gen, err = b.session(EvilMachine, BadID, data, cuts...); err != nil {
		return nil, nil, "", err
	}
	if size == 0 {
		size = int64(len(data))
	}
	err = b.catalog(EvilMachine, repo.CatalogEntry{ID: BadID, Path: BadRel, Generation: gen, Size: size, Mtime: at, State: repo.StatePresent, Changed: at})
	return data, cuts, gen, err
}

// frame is a zstd frame whose header claims a content size of fcs and a
// window of 2^(10+wexp) bytes, holding content in one raw block.
func frame(fcs uint64, wexp byte, content []byte) []byte {
	var f bytes.Buffer
	f.Write([]byte{0x28, 0xb5, 0x2f, 0xfd})
	f.WriteByte(3 << 6) // an 8-byte content size, a window descriptor, no checksum
	f.WriteByte(wexp << 3)
	binary.Write(&f, binary.LittleEndian, fcs)
	for len(content) > 0 || f.Len() == 14 {
		n := min(len(content), 128<<10)
		last := uint32(0)
		if n == len(content) {
			last = 1
		}
		h := last | uint32(n)<<3 // block type 0: raw
		f.Write([]byte{byte(h), byte(h >> 8), byte(h >> 16)})
		f.Write(content[:n])
		content = content[n:]
	}
	return f.Bytes()
}

// rleBomb is a zstd frame of n zero bytes in RLE blocks (4 bytes per
// 128 KiB), after prefix in a raw block, that claims no content size.
func rleBomb(prefix []byte, n int64) []byte {
	var f bytes.Buffer
	f.Write([]byte{0x28, 0xb5, 0x2f, 0xfd})
	f.WriteByte(0)       // no content size, a window descriptor
	f.WriteByte(13 << 3) // 8 MiB window
	h := uint32(len(prefix)) << 3
	f.Write([]byte{byte(h), byte(h >> 8), byte(h >> 16)})
	f.Write(prefix)
	for n > 0 {
		k := min(n, 128<<10)
		n -= k
		last := uint32(0)
		if n == 0 {
			last = 1
		}
		h := last | 1<<1 | uint32(k)<<3 // block type 1: RLE
		f.Write([]byte{byte(h), byte(h >> 8), byte(h >> 16), 0})
	}
	return f.Bytes()
}

// Remotes are the hostile remotes the harness runs every reader against.
func Remotes() []Remote {
	const tib = int64(1) << 40
	return []Remote{
		{Name: "catalog claims 1 TiB", Recorded: true, Want: "of the 1099511627776 its catalog records", build: func(b *builder) error {
			_, _, _, err := b.bad("x", tib)
			return err
		}},
		{Name: "catalog and listing claim 1 TiB", Want: "more than the", build: func(b *builder) error {
			data, _, gen, err := b.bad("x", tib)
			if err != nil {
				return err
			}
			n := int64(len(data))
			return b.sealed(stream(EvilMachine, BadID).ChunkKey(gen, n, tib), []byte("never read"))
		}},
		{Name: "chunk key past the chunk limit, a valid bomb behind it", Want: "a chunk may hold", build: func(b *builder) error {
			data, _, gen, err := b.bad("x", 200<<20)
			if err != nil {
				return err
			}
			n, k := int64(len(data)), int64(160<<20)
			own, all := zeroSums(data, k)
			hdr := repo.ChunkHeader{Start: n, End: n + k, SHA256: own, StreamSHA256: all}
			return b.raw(stream(EvilMachine, BadID).ChunkKey(gen, n, n+k), rleBomb(repo.EncodeChunk(hdr, nil), k))
		}},
		{Name: "frame claims 1 TiB", Want: "frame size does not match", Compacts: true, build: func(b *builder) error {
			data, cuts, gen, err := b.bad("x", 0)
			if err != nil {
				return err
			}
			a, e := cuts[0], cuts[1]
			h := sha256.Sum256(data[:e])
			hdr := repo.ChunkHeader{Start: a, End: e, SHA256: repo.HashHex(data[a:e]), StreamSHA256: hex.EncodeToString(h[:])}
			return b.raw(stream(EvilMachine, BadID).ChunkKey(gen, a, e), frame(uint64(tib), 10, repo.EncodeChunk(hdr, data[a:e])))
		}},
		{Name: "frame claims a 2 GiB window", Want: "decompression bomb", Compacts: true, build: func(b *builder) error {
			data, cuts, gen, err := b.bad("x", 0)
			if err != nil {
				return err
			}
			a, e := cuts[0], cuts[1]
			h := sha256.Sum256(data[:e])
			hdr := repo.ChunkHeader{Start: a, End: e, SHA256: repo.HashHex(data[a:e]), StreamSHA256: hex.EncodeToString(h[:])}
			plain := repo.EncodeChunk(hdr, data[a:e])
			return b.raw(stream(EvilMachine, BadID).ChunkKey(gen, a, e), frame(uint64(len(plain)), 21, plain))
		}},
		// A valid header, then far more bytes than its range: read whole it
		// inflates past the limit; streamed, it holds more than its range.
		{Name: "decompression bomb: 1 GiB of zeros in 32 KiB", Want: "decompression bomb|holds more bytes than its range", Compacts: true, build: func(b *builder) error {
			data, cuts, gen, err := b.bad("x", 0)
			if err != nil {
				return err
			}
			a, e := cuts[0], cuts[1]
			h := sha256.Sum256(data[:e])
			hdr := repo.ChunkHeader{Start: a, End: e, SHA256: repo.HashHex(data[a:e]), StreamSHA256: hex.EncodeToString(h[:])}
			return b.raw(stream(EvilMachine, BadID).ChunkKey(gen, a, e), rleBomb(repo.EncodeChunk(hdr, nil), 1<<30))
		}},
		{Name: "reference past the chunk limit", Want: "a chunk may hold", build: func(b *builder) error {
			data, _, gen, err := b.bad("x", 200<<20)
			if err != nil {
				return err
			}
			n, k := int64(len(data)), int64(160<<20)
			own, all := zeroSums(data, k)
			hdr := repo.ChunkHeader{Start: n, End: n + k, SHA256: own, StreamSHA256: all, Ref: &repo.ChunkSource{Machine: "evil2", Generation: gen}}
			return b.sealed(stream(EvilMachine, BadID).ChunkKey(gen, n, n+k), repo.EncodeChunk(hdr, nil))
		}},
		{Name: "reference bomb: one reference to 5,000 one-byte references", Want: "reference bomb", build: func(b *builder) error {
			text := strings.Repeat("y", 5000)
			data, cuts := sessionFile(BadID, text)
			s := stream(EvilMachine, BadID)
			gen := repo.NewGeneration(at.UnixNano())
			// Its own first line, then the rest by reference to evil2,
			// whose every byte is a reference to evil3, which holds them.
			if err := b.chunks(s, gen, data[:cuts[0]]); err != nil {
				return err
			}
			n := int64(len(data))
			if err := b.ref(s, gen, data, cuts[0], n, "evil2", gen); err != nil {
				return err
			}
			if err := b.meta(s, gen); err != nil {
				return err
			}
			if err := b.chunks(stream("evil3", BadID), gen, data); err != nil {
				return err
			}
			if err := b.chunks(stream("evil2", BadID), gen, data[:cuts[0]]); err != nil {
				return err
			}
			for i := cuts[0]; i < n; i++ {
				if err := b.ref(stream("evil2", BadID), gen, data, i, i+1, "evil3", gen); err != nil {
					return err
				}
			}
			return b.catalog(EvilMachine, repo.CatalogEntry{ID: BadID, Path: BadRel, Generation: gen, Size: n, Mtime: at, State: repo.StatePresent, Changed: at})
		}},
		{Name: "reference chain deeper than 4", Want: "reference chain deeper than 4", build: func(b *builder) error {
			return b.chain([]string{EvilMachine, "m1", "m2", "m3", "m4", "m5"}, false)
		}},
		{Name: "circular references", Want: "reference chain deeper than 4", build: func(b *builder) error {
			return b.chain([]string{EvilMachine, "m1", EvilMachine}, true)
		}},
		{Name: "chunk hash mismatch", Want: "sha256 mismatch", Compacts: true, build: func(b *builder) error {
			data, cuts, gen, err := b.bad("x", 0)
			if err != nil {
				return err
			}
			a, e := cuts[0], cuts[1]
			wrong := bytes.Replace(data[a:e], []byte("first"), []byte("FIRST"), 1)
			h := sha256.Sum256(data[:e])
			hdr := repo.ChunkHeader{Start: a, End: e, SHA256: repo.HashHex(data[a:e]), StreamSHA256: hex.EncodeToString(h[:])}
			return b.sealed(stream(EvilMachine, BadID).ChunkKey(gen, a, e), repo.EncodeChunk(hdr, wrong))
		}},
		{Name: "stream hash mismatch", Want: "stream hash mismatch", build: func(b *builder) error {
			data, cuts, gen, err := b.bad("x", 0)
			if err != nil {
				return err
			}
			a, e := cuts[0], cuts[1]
			hdr := repo.ChunkHeader{Start: a, End: e, SHA256: repo.HashHex(data[a:e]), StreamSHA256: strings.Repeat("0", 64)}
			return b.sealed(stream(EvilMachine, BadID).ChunkKey(gen, a, e), repo.EncodeChunk(hdr, data[a:e]))
		}},
		{Name: "blob does not match its name", Blob: true, Want: "does not match its sha256", build: func(b *builder) error {
			name := repo.HashHex([]byte("the real blob"))
			if _, _, _, err := b.bad(" blob:sha256:"+name, 0); err != nil {
				return err
			}
			return b.sealed(repo.BlobKey(name), []byte("not the real blob"))
		}},
		{Name: "blob bomb: 4 GiB of zeros", Blob: true, Want: "decompression bomb", build: func(b *builder) error {
			name := repo.HashHex([]byte("the real blob"))
			if _, _, _, err := b.bad(" blob:sha256:"+name, 0); err != nil {
				return err
			}
			return b.raw(repo.BlobKey(name), rleBomb(nil, 4<<30))
		}},
		{Name: "catalog bomb: 4 GiB of zeros", Want: "decompression bomb", Catalog: true, build: func(b *builder) error {
			if _, _, _, err := b.bad("x", 0); err != nil {
				return err
			}
			return b.raw(repo.CatalogKey(EvilMachine), rleBomb([]byte(`{"v":1,"machine":"evil","sessions":[`), 4<<30))
		}},
		{Name: "catalog path leaves the agent dir", Want: "has unsafe path", build: func(b *builder) error {
			data, cuts := sessionFile(BadID, "x")
			gen, err := b.session(EvilMachine, BadID, data, cuts...)
			if err != nil {
				return err
			}
			return b.catalog(EvilMachine, repo.CatalogEntry{ID: BadID, Path: "sessions/../../../outside/x.jsonl", Generation: gen, Size: int64(len(data)), Mtime: at, State: repo.StatePresent, Changed: at})
		}},
		{Name: "first chunk without meta", Want: "carries no meta", Compacts: true, build: func(b *builder) error {
			return b.format2Bad(nil)
		}},
		{Name: "first chunk's meta names another session", Want: "describes another generation", Compacts: true, build: func(b *builder) error {
			return b.format2Bad(&repo.Meta{SessionID: GoodID, Machine: EvilMachine, Stream: repo.SessionStream, Path: GoodRel, Created: at})
		}},
		{Name: "endless listing", Want: "the listing goes on past", Compacts: true, Listing: endlessListing(), build: func(b *builder) error {
			_, _, _, err := b.bad("x", 0)
			return err
		}},
	}
}

// format2Bad writes the repository's marker and the bad session with no
// meta object: complete by its chunk at 0, whose header carries meta (nil:
// none), which readers must refuse. The good session keeps its meta
// object, which readers take over the header's.
func (b *builder) format2Bad(meta *repo.Meta) error {
	if err := b.raw(repo.MarkerKey, []byte(`{"format":2,"created":"2026-10-07T01:02:03Z"}`)); err != nil {
		return err
	}
	data, cuts := sessionFile(BadID, "x")
	s := stream(EvilMachine, BadID)
	gen := repo.NewGeneration(at.UnixNano())
	if meta != nil {
		meta.Generation = gen
	}
	if err := b.chunks(s, gen, data, cuts...); err != nil {
		return err
	}
	// The first chunk again, with the meta given.
	h := sha256.Sum256(data[:cuts[0]])
	hdr := repo.ChunkHeader{Start: 0, End: cuts[0], SHA256: hex.EncodeToString(h[:]), StreamSHA256: hex.EncodeToString(h[:]),
		Uploaded: repo.UploadMark(cuts[0], at.Add(time.Minute)), Meta: meta}
	if err := b.sealed(s.ChunkKey(gen, 0, cuts[0]), repo.EncodeChunk(hdr, data[:cuts[0]])); err != nil {
		return err
	}
	return b.catalog(EvilMachine, repo.CatalogEntry{ID: BadID, Path: BadRel, Generation: gen, Size: int64(len(data)), Mtime: at, State: repo.StatePresent, Changed: at})
}

// chain writes the bad session on machines[0] as one reference to
// machines[1], which refers to machines[2], and so on; the last holds the
// bytes unless loop (then it refers back to machines[1]).
func (b *builder) chain(machines []string, loop bool) error {
	data, _ := sessionFile(BadID, "x")
	n := int64(len(data))
	gen := repo.NewGeneration(at.UnixNano())
	for i, m := range machines {
		s := stream(m, BadID)
		switch {
		case i == 0 && len(machines) > 1:
			if err := b.ref(s, gen, data, 0, n, machines[1], gen); err != nil {
				return err
			}
			if err := b.meta(s, gen); err != nil {
				return err
			}
		case i == len(machines)-1 && !loop:
			if err := b.chunks(s, gen, data); err != nil {
				return err
			}
		case i == len(machines)-1:
			// machines[0] again: already written, and it refers on.
		default:
			if err := b.ref(s, gen, data, 0, n, machines[i+1], gen); err != nil {
				return err
			}
		}
	}
	return b.catalog(EvilMachine, repo.CatalogEntry{ID: BadID, Path: BadRel, Generation: gen, Size: n, Mtime: at, State: repo.StatePresent, Changed: at})
}

// endlessListing answers every LIST that reaches the bad session (its own
// prefix, or all sessions) with a page of new keys under it and a new
// continuation token, forever. Pages are made once and kept: every command
// of the test lists the same ones, and making them under the race
// detector cost more than the commands reading them.
func endlessListing() func(r *http.Request, body []byte) []byte {
	var pages sync.Map // prefix and page number -> []byte
	return func(r *http.Request, body []byte) []byte {
		q := r.URL.Query()
		if r.Method != http.MethodGet || q.Get("list-type") != "2" {
			return body
		}
		prefix := q.Get("prefix")
		if prefix != repo.SessionsPrefix() && prefix != repo.SessionPrefix(BadID) && !strings.HasPrefix(prefix, repo.SessionPrefix(BadID)) {
			return body
		}
		page := 0
		if tok := q.Get("continuation-token"); tok != "" {
			fmt.Sscanf(tok, "page%d", &page)
		}
		key := fmt.Sprintf("%d %s", page, prefix)
		if p, ok := pages.Load(key); ok {
			return p.([]byte)
		}
		s := stream(EvilMachine, BadID)
		var out strings.Builder
		fmt.Fprintf(&out, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>%s</Prefix><KeyCount>1000</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated><NextContinuationToken>page%d</NextContinuationToken>`, xmlEscape(prefix), page+1)
		for i := range 1000 {
			start := int64(page*1000+i) * 10
			fmt.Fprintf(&out, `<Contents><Key>%s</Key><LastModified>2026-11-30T00:00:00.000Z</LastModified><ETag>"x"</ETag><Size>100</Size><StorageClass>STANDARD</StorageClass></Contents>`,
				xmlEscape(s.ChunkKey("18ecbc17b1295105", start, start+10)))
		}
		out.WriteString(`</ListBucketResult>`)
		p := []byte(out.String())
		pages.Store(key, p)
		return p
	}
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// zeroSums are the SHA-256 of k zero bytes, and of prefix followed by them.
func zeroSums(prefix []byte, k int64) (own, all string) {
	z := make([]byte, 1<<20)
	o, a := sha256.New(), sha256.New()
	a.Write(prefix)
	for k > 0 {
		n := min(k, int64(len(z)))
		o.Write(z[:n])
		a.Write(z[:n])
		k -= n
	}
	return hex.EncodeToString(o.Sum(nil)), hex.EncodeToString(a.Sum(nil))
}
