package hostile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/repo"
)

// Fuzzed is a remote generated from fuzz input: the bad session (which
// references a blob when the input says so), then up to eight damages,
// each with parameters from the input. It returns what a reader may
// restore of the bad session, known once the remote is built; a reader
// may also refuse it, and nothing else (every object is hash-checked).
func Fuzzed(input []byte) (Remote, *FuzzWant) {
	in := fuzzInput{b: input}
	blob := []byte("the blob " + fmt.Sprint(in.byte()))
	text := "x"
	withBlob := in.byte()%2 == 0
	if withBlob {
		text = " blob:sha256:" + repo.HashHex(blob)
	}
	data, cuts := sessionFile(BadID, text)
	want := &FuzzWant{Data: data, cuts: cuts}
	return Remote{Name: "fuzzed", build: func(b *builder) error {
		s := stream(EvilMachine, BadID)
		gen, err := b.session(EvilMachine, BadID, data, cuts...)
		if err != nil {
			return err
		}
		if withBlob {
			if err := b.sealed(repo.BlobKey(repo.HashHex(blob)), blob); err != nil {
				return err
			}
		}
		entry := repo.CatalogEntry{ID: BadID, Path: BadRel, Generation: gen, Size: int64(len(data)), Mtime: at, State: repo.StatePresent, Changed: at}
		bounds := append(append([]int64{0}, cuts...), int64(len(data)))
		chunk := func(i byte) (int64, int64) {
			k := int(i) % (len(bounds) - 1)
			return bounds[k], bounds[k+1]
		}
		header := func(a, e int64, body []byte) repo.ChunkHeader {
			h := sha256.Sum256(data[:min(e, int64(len(data)))])
			return repo.ChunkHeader{Start: a, End: e, SHA256: repo.HashHex(body), StreamSHA256: hex.EncodeToString(h[:])}
		}
		catalogBomb := false
		for range min(8, int(in.byte())) {
			if in.done() {
				break
			}
			switch op := in.byte() % 11; op {
			case 0: // the catalog claims a size
				entry.Size = int64(in.u64() >> 1)
			case 1: // a chunk key claiming any range, over something small
				a, e := claimedRange(in.u64(), in.u64())
				if err := b.sealed(s.ChunkKey(gen, a, e), []byte("junk")); err != nil {
					return err
				}
			case 2: // a chunk key claiming any range, over a zero bomb
				a, e := claimedRange(in.u64(), in.u64())
				hdr := repo.ChunkHeader{Start: a, End: e, SHA256: strings.Repeat("0", 64), StreamSHA256: strings.Repeat("0", 64)}
				if err := b.raw(s.ChunkKey(gen, a, e), rleBomb(repo.EncodeChunk(hdr, nil), int64(in.u32()%(96<<20)))); err != nil {
					return err
				}
			case 3: // a chunk's bytes changed under its hashes
				a, e := chunk(in.byte())
				body := bytes.Clone(data[a:e])
				body[int(in.byte())%len(body)] ^= 1 << (in.byte() % 8)
				hdr := header(a, e, data[a:e])
				if err := b.sealed(s.ChunkKey(gen, a, e), repo.EncodeChunk(hdr, body)); err != nil {
					return err
				}
			case 4: // a chunk replaced by a reference along a chain of machines
				a, e := chunk(in.byte())
				depth, loop := int(in.byte()%7), in.byte()%2 == 0
				if err := b.refChain(s, gen, data, a, e, depth, loop); err != nil {
					return err
				}
			case 5: // a reference that claims any range
				a, e := claimedRange(in.u64(), in.u64())
				hdr := repo.ChunkHeader{Start: a, End: e, SHA256: strings.Repeat("0", 64), StreamSHA256: strings.Repeat("0", 64), Ref: &repo.ChunkSource{Machine: "m1", Generation: gen}}
				if err := b.sealed(s.ChunkKey(gen, a, e), repo.EncodeChunk(hdr, nil)); err != nil {
					return err
				}
			case 6: // a chunk's frame claims a content size and a window
				a, e := chunk(in.byte())
				plain := repo.EncodeChunk(header(a, e, data[a:e]), data[a:e])
				if err := b.raw(s.ChunkKey(gen, a, e), frame(in.u64(), in.byte()%32, plain)); err != nil {
					return err
				}
			case 7: // a chunk gone
				a, e := chunk(in.byte())
				if err := b.c.Delete(b.ctx, s.ChunkKey(gen, a, e)); err != nil {
					return err
				}
				want.lost = append(want.lost, a)
			case 8: // the blob's bytes: wrong, or a bomb
				if in.byte()%2 == 0 {
					err = b.sealed(repo.BlobKey(repo.HashHex(blob)), []byte("not the blob"))
				} else {
					err = b.raw(repo.BlobKey(repo.HashHex(blob)), rleBomb(nil, int64(in.u32()%(96<<20))))
				}
				if err != nil {
					return err
				}
			case 9: // the catalog's path
				entry.Path = []string{"sessions/../../x.jsonl", "/etc/x.jsonl", "sessions/-w/.x.jsonl", "auth.json", "sessions/-w/\x00.jsonl"}[in.byte()%5]
			case 10: // the catalog a bomb
				catalogBomb = true
			}
		}
		if catalogBomb {
			return b.raw(repo.CatalogKey(EvilMachine), rleBomb([]byte(`{"v":1,"machine":"evil","sessions":[`), int64(in.u32()%(96<<20))))
		}
		// Read last, so older corpus inputs build what they did.
		if err := b.format2(s, gen, data[:bounds[1]], in.byte()%4); err != nil {
			return err
		}
		want.claimed = entry.Size
		return b.catalog(EvilMachine, entry)
	}}, want
}

// FuzzWant is what a reader may restore of a fuzzed remote's bad session.
type FuzzWant struct {
	// Data is the session as it was written.
	Data []byte
	// cuts are where its chunks start (after the first); lost the starts
	// of the chunks the remote lost; claimed the size the catalog records.
	cuts    []int64
	lost    []int64
	claimed int64
}

// Allows reports whether a restore of b is honest: the bytes written, or,
// when the remote lost every chunk from some line on, the bytes before
// them, if the catalog claims no more (else the reader must see the gap).
// Nothing tells such a remote from one whose writer never uploaded the
// rest: the chunks left verify, the last ending at a line. A chunk the
// remote still holds past the cut is a gap, never a shorter session.
func (w *FuzzWant) Allows(b []byte) bool {
	if bytes.Equal(b, w.Data) {
		return true
	}
	n := int64(len(b))
	if n == 0 || n < w.claimed || !bytes.Equal(b, w.Data[:min(n, int64(len(w.Data)))]) {
		return false
	}
	for _, start := range append([]int64{0}, w.cuts...) {
		if start >= n && !slices.Contains(w.lost, start) {
			return false // held, so the cut is a gap
		}
	}
	return slices.Contains(w.lost, n)
}

// format2 writes the repository's marker, for mode 1-3 (0: no marker,
// which reads alike). Mode 2 moves the meta of s's generation gen into
// its first chunk (first, the bytes [0, len(first))), written again over
// whatever damage it holds; mode 3 deletes the meta object alone, so the
// first chunk carries no meta, which readers must refuse.
func (b *builder) format2(s repo.Stream, gen string, first []byte, mode byte) error {
	if mode == 0 {
		return nil
	}
	if err := b.raw(repo.MarkerKey, []byte(`{"format":2,"created":"2026-10-07T01:02:03Z"}`)); err != nil {
		return err
	}
	if mode == 1 {
		return nil
	}
	if err := b.c.Delete(b.ctx, s.MetaKey(gen)); err != nil {
		return err
	}
	if mode == 3 {
		return nil
	}
	m := repo.Meta{SessionID: s.SessionID, Machine: s.Machine, Stream: s.Name, Generation: gen, Path: BadRel, Created: at}
	sum := repo.HashHex(first)
	hdr := repo.ChunkHeader{Start: 0, End: int64(len(first)), SHA256: sum, StreamSHA256: sum, Meta: &m}
	return b.sealed(s.ChunkKey(gen, 0, int64(len(first))), repo.EncodeChunk(hdr, first))
}

// claimedRange is a chunk range [a, e) from two numbers: anywhere in
// int64, never empty.
func claimedRange(x, y uint64) (int64, int64) {
	a := int64(x >> 2)
	e := a + 1 + int64(y>>2)%(int64(1)<<62-a)
	return a, e
}

// refChain replaces [a, e) of s's generation gen by a reference to m1,
// which refers to m2, and so on for depth machines; the last holds the
// bytes, or (loop) refers back to m1.
func (b *builder) refChain(s repo.Stream, gen string, data []byte, a, e int64, depth int, loop bool) error {
	next := func(i int) string { return fmt.Sprintf("m%d", i) }
	if err := b.ref(s, gen, data, a, e, next(1), gen); err != nil {
		return err
	}
	for i := 1; i <= depth; i++ {
		m := stream(next(i), s.SessionID)
		switch {
		case i < depth:
			err := b.ref(m, gen, data, a, e, next(i+1), gen)
			if err != nil {
				return err
			}
		case loop:
			if err := b.ref(m, gen, data, a, e, next(1), gen); err != nil {
				return err
			}
		default:
			if err := b.chunks(m, gen, data); err != nil {
				return err
			}
		}
		if a > 0 && i < depth || a > 0 && loop {
			// The machine's generation is read from offset 0.
			if err := b.chunks(m, gen, data[:a]); err != nil {
				return err
			}
		}
	}
	return nil
}

// fuzzInput reads numbers from fuzz input; past its end it reads zeros.
type fuzzInput struct {
	b []byte
}

func (f *fuzzInput) done() bool { return len(f.b) == 0 }

func (f *fuzzInput) take(n int) []byte {
	out := make([]byte, n)
	k := copy(out, f.b)
	f.b = f.b[k:]
	return out
}

func (f *fuzzInput) byte() byte  { return f.take(1)[0] }
func (f *fuzzInput) u32() uint32 { return binary.LittleEndian.Uint32(f.take(4)) }
func (f *fuzzInput) u64() uint64 { return binary.LittleEndian.Uint64(f.take(8)) }

// fastPut writes a file remote's objects without fsyncs: hostile remotes
// of thousands of objects are built in a second.
type fastPut struct {
	remote.Client
	dir string
}

func (f fastPut) Put(_ context.Context, key string, data []byte, _ remote.PutOptions) error {
	p := filepath.Join(f.dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o600)
}

// NewFastRemote is a folder remote in dir whose puts skip the fsyncs, for
// fuzzing: a hostile remote is built for every input.
func NewFastRemote(dir string) (remote.Client, error) {
	c, err := file.New(dir)
	if err != nil {
		return nil, err
	}
	return fastPut{c, dir}, nil
}
