package repo

import (
	"bytes"
	"testing"
	"time"

	"github.com/ompsync/ompsync/safename"
)

func seedChunk(data []byte, start int64, hashFrom int64) []byte {
	return EncodeChunk(ChunkHeader{
		Start: start, End: start + int64(len(data)), HashFrom: hashFrom,
		SHA256: HashHex(data), StreamSHA256: HashHex(data),
	}, data)
}

// FuzzDecodeChunk: whatever a remote returns for a chunk key, a chunk is
// accepted only when its header names the key's range and its bytes are
// exactly that long and match their SHA-256; a reference chunk carries no
// bytes and names a safe machine and generation.
func FuzzDecodeChunk(f *testing.F) {
	line := []byte(`{"type":"message","id":"aaaa0001","parentId":null}` + "\n")
	f.Add(seedChunk(line, 0, 0), int64(0), int64(len(line)))
	f.Add(seedChunk(line, 256, 256), int64(256), int64(256+len(line)))
	f.Add(seedChunk(line, 0, 0), int64(0), int64(len(line)-1))
	f.Add(EncodeChunk(ChunkHeader{Start: 10, End: 20, SHA256: HashHex(line[:10]), Ref: &ChunkSource{Machine: "laptop", Generation: "0000000000000001"}}, nil), int64(10), int64(20))
	f.Add(EncodeChunk(ChunkHeader{Start: 10, End: 20, Ref: &ChunkSource{Machine: "../x", Generation: "0000000000000001"}}, nil), int64(10), int64(20))
	f.Add([]byte(`{"v":1,"start":0,"end":1,"sha256":"","hash_from":-1}`+"\nx"), int64(0), int64(1))
	f.Add([]byte("no header at all"), int64(0), int64(16))
	f.Fuzz(func(t *testing.T, plain []byte, start, end int64) {
		h, data, err := DecodeChunk(plain, start, end)
		if err != nil {
			if data != nil {
				t.Fatalf("refused chunk returns %d bytes", len(data))
			}
			return
		}
		if h.V != 1 || h.Start != start || h.End != end {
			t.Fatalf("accepted header %+v for [%d, %d)", h, start, end)
		}
		if h.Ref != nil {
			if len(data) != 0 || !safename.Machine(h.Ref.Machine) || !ValidGeneration(h.Ref.Generation) {
				t.Fatalf("accepted reference %+v with %d bytes", h.Ref, len(data))
			}
			return
		}
		if int64(len(data)) != end-start {
			t.Fatalf("accepted %d bytes for [%d, %d)", len(data), start, end)
		}
		if HashHex(data) != h.SHA256 {
			t.Fatalf("accepted bytes whose sha256 is not the header's")
		}
		if !bytes.HasSuffix(plain, data) {
			t.Fatalf("the bytes are not the object's tail")
		}
		if h.HashFrom < 0 || h.HashFrom > end {
			t.Fatalf("accepted hash_from %d for [%d, %d)", h.HashFrom, start, end)
		}
	})
}

// FuzzChunkRoundTrip: what the uploader encodes, a reader decodes to the
// same bytes; and the codec is deterministic, so a chunk uploaded again
// after a crash has identical bytes (idempotent retries).
func FuzzChunkRoundTrip(f *testing.F) {
	f.Add([]byte("a line\n"), int64(0), int64(0))
	f.Add([]byte("{\"x\":1}\n{\"y\":2}\n"), int64(256), int64(256))
	f.Add(bytes.Repeat([]byte{0}, 4096), int64(1<<40), int64(0))
	z := NewZstd()
	f.Fuzz(func(t *testing.T, data []byte, start, hashFrom int64) {
		if len(data) == 0 || start < 0 || start > 1<<50 || hashFrom < 0 || hashFrom > start+int64(len(data)) {
			return
		}
		end := start + int64(len(data))
		plain := seedChunk(data, start, hashFrom)
		sealed, err := z.Seal(plain)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := z.Seal(plain)
		if !bytes.Equal(sealed, again) {
			t.Fatal("sealing the same chunk twice gave different objects")
		}
		opened, err := z.Open(sealed, ChunkLimit(start, end))
		if err != nil {
			t.Fatalf("open a sealed chunk: %v", err)
		}
		h, got, err := DecodeChunk(opened, start, end)
		if err != nil {
			t.Fatalf("decode an encoded chunk: %v", err)
		}
		if !bytes.Equal(got, data) || h.HashFrom != hashFrom {
			t.Fatalf("round trip changed the chunk")
		}
	})
}

// FuzzZstdOpen: a stored object never inflates past the limit a reader
// gives (zstd bombs), and never panics the reader.
func FuzzZstdOpen(f *testing.F) {
	z := NewZstd()
	small, _ := z.Seal([]byte("hello\n"))
	bomb, _ := z.Seal(make([]byte, 1<<20))
	f.Add(small, uint32(100))
	f.Add(small, uint32(3))
	f.Add(bomb, uint32(1000))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0}, uint32(10))
	f.Add([]byte(AgeHeader+"rest"), uint32(10))
	f.Fuzz(func(t *testing.T, sealed []byte, limit uint32) {
		out, err := z.Open(sealed, int64(limit))
		if err == nil && int64(len(out)) > int64(limit) {
			t.Fatalf("opened %d bytes past the limit %d", len(out), limit)
		}
	})
}

// FuzzDecodeMeta: a meta object a reader accepts never names a path that
// leaves the agent dir. (Its ids are compared with the object's key by
// restore, never used as paths.)
func FuzzDecodeMeta(f *testing.F) {
	m := Meta{SessionID: "01a113d2-be76-73c7-986b-d3ac6e3fbb83", Machine: "laptop", Stream: SessionStream,
		Generation: "18ecbc17b1295105", Path: "sessions/-w/2026_x.jsonl", Cwd: "/home/u", HashFrom: 256, Created: time.Unix(1, 0).UTC()}
	f.Add(EncodeMeta(m))
	m.Path = "../../.bashrc"
	f.Add(EncodeMeta(m))
	m.Path = "sessions/a\\..\\b"
	f.Add(EncodeMeta(m))
	f.Add([]byte(`{"v":1,"path":"/etc/passwd"}`))
	f.Add([]byte(`{"v":1,"path":"a/\u0000/b"}`))
	f.Add([]byte(`{"v":2,"path":"a"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			return
		}
		if m.V != 1 {
			t.Fatalf("accepted meta version %d", m.V)
		}
		if !safename.RelPath(m.Path) || !inside(m.Path) {
			t.Fatalf("accepted unsafe path %q", m.Path)
		}
	})
}

// FuzzDecodeCatalog: every entry of an accepted catalog has a safe id,
// path, generation and state, and the machine name is one safe segment;
// what is accepted encodes and decodes again to the same entries.
func FuzzDecodeCatalog(f *testing.F) {
	c := Catalog{Machine: "laptop", Updated: time.Unix(2, 0).UTC(), Sessions: []CatalogEntry{{
		ID: "01a113d2-be76-73c7-986b-d3ac6e3fbb83", Path: "sessions/-w/2026_x.jsonl", Cwd: "/w", Title: "t",
		Generation: "18ecbc17b1295105", Size: 11071, State: StatePresent,
	}}}
	f.Add(EncodeCatalog(c))
	c.Sessions[0].ID = "../x"
	f.Add(EncodeCatalog(c))
	c.Sessions[0].ID, c.Sessions[0].Path = "ok", "sessions/../../x"
	f.Add(EncodeCatalog(c))
	c.Sessions[0].Path, c.Sessions[0].State = "a", "purged"
	f.Add(EncodeCatalog(c))
	f.Add([]byte(`{"v":1,"machine":"..","sessions":[]}`))
	f.Add([]byte(`{"v":1,"machine":"m","sessions":[{"id":"a","path":"b","state":"deleted","generation":"ZZ"}]}`))
	f.Add([]byte(`{"v":1,"machine":"m","sessions":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCatalog(b)
		if err != nil {
			return
		}
		if c.V != 1 || !safename.Machine(c.Machine) {
			t.Fatalf("accepted catalog v%d of machine %q", c.V, c.Machine)
		}
		for _, e := range c.Sessions {
			if !safename.SessionID(e.ID) || !safename.RelPath(e.Path) || !inside(e.Path) {
				t.Fatalf("accepted entry with id %q path %q", e.ID, e.Path)
			}
			if e.Generation != "" && !ValidGeneration(e.Generation) {
				t.Fatalf("accepted generation %q", e.Generation)
			}
			switch e.State {
			case StatePresent, StateDeleted, StateArchived:
			default:
				t.Fatalf("accepted state %q", e.State)
			}
		}
		again, err := DecodeCatalog(EncodeCatalog(c))
		if err != nil {
			t.Fatalf("an accepted catalog does not decode after encoding: %v", err)
		}
		if len(again.Sessions) != len(c.Sessions) {
			t.Fatalf("%d entries after a round trip, want %d", len(again.Sessions), len(c.Sessions))
		}
	})
}

// FuzzDecodeRecent: a recent object laid over a catalog yields only safe
// entries, and encoding them again as patches over the same catalog decodes
// to the same entries.
func FuzzDecodeRecent(f *testing.F) {
	base := Catalog{Machine: "laptop", Updated: time.Unix(2, 0).UTC(), Sessions: []CatalogEntry{{
		ID: "01a113d2-be76-73c7-986b-d3ac6e3fbb83", Path: "sessions/-w/2026_x.jsonl", Cwd: "/w", Title: "t",
		Generation: "18ecbc17b1295105", Size: 11071, State: StatePresent,
	}}}
	at := IndexCatalog(base.Sessions)
	grown := base.Sessions[0]
	grown.Size = 12000
	fresh := CatalogEntry{ID: "new", Path: "sessions/-w/new.jsonl", Generation: "18ecbc17b1295106", Size: 9, State: StatePresent}
	f.Add(EncodeRecent(Catalog{Machine: "laptop", Base: base.Updated, Sessions: []CatalogEntry{grown, fresh}}, at))
	f.Add(EncodeCatalog(Catalog{Machine: "laptop", Base: base.Updated, Sessions: []CatalogEntry{grown}}))
	f.Add([]byte(`{"v":1,"machine":"laptop","sessions":[{"id":"new"},{"id":"01a113d2-be76-73c7-986b-d3ac6e3fbb83","path":"../x"}]}`))
	f.Add([]byte(`{"v":1,"machine":"laptop","sessions":[{"id":"01a113d2-be76-73c7-986b-d3ac6e3fbb83","state":"gone","generation":"x"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeRecent(b, base)
		if err != nil {
			return
		}
		if !safename.Machine(c.Machine) {
			t.Fatalf("accepted machine %q", c.Machine)
		}
		for _, e := range c.Sessions {
			if why := entryProblem(e); why != "" || !inside(e.Path) {
				t.Fatalf("accepted an unsafe entry: %s (path %q)", why, e.Path)
			}
		}
		again, err := DecodeRecent(EncodeRecent(c, at), base)
		if err != nil {
			t.Fatalf("accepted changes do not decode after encoding: %v", err)
		}
		if len(again.Sessions) != len(c.Sessions) {
			t.Fatalf("%d entries after a round trip, want %d", len(again.Sessions), len(c.Sessions))
		}
		byID := map[string]CatalogEntry{}
		for _, e := range again.Sessions {
			byID[e.ID] = e
		}
		for _, e := range c.Sessions {
			if !sameEntryForTest(byID[e.ID], e) {
				t.Fatalf("entry changed in a round trip: %+v, want %+v", byID[e.ID], e)
			}
		}
	})
}

func sameEntryForTest(a, b CatalogEntry) bool {
	return a.ID == b.ID && a.Path == b.Path && a.Cwd == b.Cwd && a.Title == b.Title && a.Generation == b.Generation &&
		a.Size == b.Size && a.Mtime.Equal(b.Mtime) && a.State == b.State && a.Changed.Equal(b.Changed)
}

// FuzzParseChunkName: a name that parses is a non-empty, non-negative
// range, and is the one name ChunkName gives it, so a listed chunk is
// fetched under the key it was listed by.
func FuzzParseChunkName(f *testing.F) {
	for _, n := range []string{ChunkName(0, 1), ChunkName(256, 11071), ChunkName(1<<62, 1<<62+1),
		"0000000000000001-0000000000000001", "000000000000000A-000000000000000B", "ffffffffffffffff-ffffffffffffffff", "0000000000000000-000000000000000g", "-"} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) {
		s, e, ok := ParseChunkName(name)
		if !ok {
			return
		}
		if s < 0 || e <= s {
			t.Fatalf("%q parses to [%d, %d)", name, s, e)
		}
		if back := ChunkName(s, e); back != name {
			t.Fatalf("%q parses to [%d, %d), which is named %q", name, s, e, back)
		}
	})
}

// FuzzArtifactPath: an artifact stream name a reader accepts yields a path
// that stays inside the session's artifact folder.
func FuzzArtifactPath(f *testing.F) {
	for _, s := range []string{ArtifactStream("subagents/0-Explore.jsonl"), ArtifactStream("a b/ü.txt"),
		"artifacts/..%2F..%2Fetc", "artifacts/a%5Cb", "artifacts/%00", "artifacts/", "artifacts/a/b", "session"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stream string) {
		rel, ok := ArtifactPath(stream)
		if !ok {
			return
		}
		if !safename.RelPath(rel) || !inside(rel) || !inside("sessions/d/x/"+rel) {
			t.Fatalf("ArtifactPath(%q) = %q leaves its folder", stream, rel)
		}
		if again, ok := ArtifactPath(ArtifactStream(rel)); !ok || again != rel {
			t.Fatalf("ArtifactPath(ArtifactStream(%q)) = %q, %t", rel, again, ok)
		}
	})
}
