package repo

import (
	"context"
	"iter"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/safename"
)

// garbageLister is a remote whose listings are damaged or hostile: every
// List yields the given entries, whatever prefix was asked for. Objects
// are still read from the real client.
type garbageLister struct {
	remote.Client
	entries []remote.ObjectInfo
}

func (g *garbageLister) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	return func(yield func(remote.ObjectInfo, error) bool) {
		for _, e := range g.entries {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// mustNotPanic runs f and fails the test with the panic, so one case's
// panic does not hide the others.
func mustNotPanic(t *testing.T, what string, f func()) (panicked bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
			panicked = true
		}
	}()
	f()
	return false
}

const garbageID = "01a113d2-be76-73c7-986b-d3ac6e3fbb83"

// garbageListings are listings a damaged or hostile remote may return for
// a session's prefix.
func garbageListings() map[string][]remote.ObjectInfo {
	s := Stream{SessionID: garbageID, Machine: "laptop", Name: SessionStream}
	other := Stream{SessionID: "another-session", Machine: "laptop", Name: SessionStream}
	return map[string][]remote.ObjectInfo{
		"key outside the prefix":  {{Key: "v1/"}},
		"empty key":               {{Key: ""}},
		"traversal":               {{Key: SessionPrefix(garbageID) + "laptop/session/../../../../etc/passwd"}},
		"artifact traversal":      {{Key: SessionPrefix(garbageID) + "laptop/artifacts/..%2F..%2F.bashrc/0000000000000001/meta"}},
		"another session's key":   {{Key: other.MetaKey("0000000000000001")}},
		"unsafe machine":          {{Key: SessionPrefix(garbageID) + "../session/0000000000000001/meta"}},
		"bad generation":          {{Key: s.Prefix() + "NOTHEX0000000001/meta"}},
		"bad chunk name":          {{Key: s.GenPrefix("0000000000000001") + "0000000000000010-0000000000000001"}},
		"not UTF-8":               {{Key: s.GenPrefix("0000000000000001") + "\xff\xfe"}},
		"common prefix yielded":   {{Key: s.Prefix(), Prefix: true}},
		"common prefix outside":   {{Key: "v1/", Prefix: true}},
		"negative size":           {{Key: s.ChunkKey("0000000000000001", 0, 10), Size: -5}, {Key: s.MetaKey("0000000000000001")}},
		"chunk past any size":     {{Key: s.ChunkKey("0000000000000001", 0, 1<<62)}, {Key: s.MetaKey("0000000000000001")}},
		"listed but not there":    {{Key: s.ChunkKey("0000000000000001", 0, 10)}, {Key: s.MetaKey("0000000000000001")}},
		"duplicates out of order": {{Key: s.MetaKey("0000000000000002")}, {Key: s.MetaKey("0000000000000001")}, {Key: s.MetaKey("0000000000000002")}},
	}
}

// A listing from a damaged or hostile remote makes Inventory and the
// readers fail with an error naming the problem: no panic, no path outside
// the session, nothing read past what the reader allows.
func TestGarbageListingsInventory(t *testing.T) {
	for name, entries := range garbageListings() {
		t.Run(name, func(t *testing.T) {
			r := New(&garbageLister{Client: newTestRepo(t).Client(), entries: entries}, NewZstd())
			ctx := t.Context()
			var invs []*StreamInventory
			var err error
			if mustNotPanic(t, "Inventory", func() { invs, err = r.Inventory(ctx, garbageID, "") }) {
				return
			}
			if err != nil {
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				return
			}
			for _, inv := range invs {
				if inv.Stream.SessionID != garbageID || !safename.Machine(inv.Stream.Machine) {
					t.Errorf("inventory names stream %+v", inv.Stream)
				}
				if inv.Stream.Name != SessionStream {
					if rel, ok := ArtifactPath(inv.Stream.Name); !ok || !inside(rel) {
						t.Errorf("inventory names artifact %q", inv.Stream.Name)
					}
				}
				for _, g := range inv.Generations {
					if !ValidGeneration(g.Name) {
						t.Errorf("inventory names generation %q", g.Name)
					}
					if !g.HasMeta {
						continue
					}
					// Reading what was listed fails cleanly: nothing is
					// on the remote behind these listings.
					mustNotPanic(t, "ReadGeneration", func() {
						as, err := r.ReadGeneration(ctx, inv.Stream, g, 1<<20)
						if err == nil {
							t.Errorf("ReadGeneration of a garbage listing returned %d bytes", len(as.Data))
						}
					})
				}
			}
		})
	}
}

// Machines and reference chunks list prefixes of their own; a listing
// that yields keys outside them must not crash the reader.
func TestGarbageListingsMachines(t *testing.T) {
	for name, entries := range garbageListings() {
		t.Run(name, func(t *testing.T) {
			r := New(&garbageLister{Client: newTestRepo(t).Client(), entries: entries}, NewZstd())
			mustNotPanic(t, "Machines", func() {
				ms, err := r.Machines(t.Context())
				for _, m := range ms {
					if !safename.Machine(m) {
						t.Errorf("Machines yields %q (err %v)", m, err)
					}
				}
			})
		})
	}
}

// A reference chunk resolved through a garbage listing of the machine it
// names fails cleanly.
func TestGarbageListingsReference(t *testing.T) {
	base := newTestRepo(t)
	s := Stream{SessionID: garbageID, Machine: "laptop", Name: SessionStream}
	data := []byte("a line\n")
	hdr := ChunkHeader{Start: 0, End: int64(len(data)), SHA256: HashHex(data), StreamSHA256: HashHex(data),
		Ref: &ChunkSource{Machine: "desktop", Generation: "0000000000000009"}}
	if _, err := base.PutChunk(t.Context(), s, "0000000000000001", hdr, nil, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := base.PutMeta(t.Context(), s, Meta{SessionID: garbageID, Machine: "laptop", Stream: SessionStream, Generation: "0000000000000001", Path: "sessions/-w/x.jsonl"}); err != nil {
		t.Fatal(err)
	}
	g := &Generation{Name: "0000000000000001", HasMeta: true, Chunks: []ChunkRef{{Start: 0, End: int64(len(data))}}}
	for name, entries := range garbageListings() {
		t.Run(name, func(t *testing.T) {
			r := New(&garbageLister{Client: base.Client(), entries: entries}, NewZstd())
			mustNotPanic(t, "ReadGeneration", func() {
				if _, err := r.ReadGeneration(t.Context(), s, g, 1<<20); err == nil {
					t.Error("a reference resolved through a garbage listing was accepted")
				}
			})
		})
	}
}
