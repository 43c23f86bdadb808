package repo

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/safename"
)

// InventoryAll yields, for every session, exactly what Inventory returns
// for it alone, with or without a machine, from one LIST: several machines,
// artifacts, generations, heads, overlapping chunks, and a session with a
// key that does not parse (it alone fails).
func TestInventoryAllMatchesInventory(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t)
	data := []byte(strings.Repeat("line of text\n", 40))
	ids := []string{"0aaa", "0aaa-b", "0aaa_c", "1bbb", "2ccc"}
	for i, id := range ids {
		for _, m := range []string{"desk", "laptop"}[:1+i%2] {
			s := Stream{SessionID: id, Machine: m, Name: SessionStream}
			writeGen(t, r, s, "0000000000000001", data, 130)
			if i%2 == 0 {
				writeGen(t, r, s, "0000000000000002", data, 130, 390)
				if err := r.PutHead(ctx, s, "0000000000000002", data[:256]); err != nil {
					t.Fatal(err)
				}
				art := Stream{SessionID: id, Machine: m, Name: ArtifactStream("subagents/0.jsonl")}
				writeGen(t, r, art, "0000000000000003", data[:100])
			}
		}
	}
	// An overlapping chunk, and keys no Inventory of a session parses.
	s := Stream{SessionID: "1bbb", Machine: "desk", Name: SessionStream}
	if _, err := r.PutChunk(ctx, s, "0000000000000001", ChunkHeader{Start: 0, End: 390, SHA256: HashHex(data[:390]), StreamSHA256: HashHex(data[:390])}, data[:390], remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	put := func(key string) {
		if err := r.Client().Put(ctx, key, []byte("x"), remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put(SessionPrefix("2ccc") + "laptop/session/NOTHEX0000000001/meta")
	put(SessionsPrefix() + "stray")

	for _, machine := range []string{"", "desk", "laptop"} {
		seen := map[string]bool{}
		for so, err := range r.InventoryAll(ctx, machine, 0) {
			if err != nil {
				t.Fatalf("machine %q: %v", machine, err)
			}
			if seen[so.ID] {
				t.Errorf("machine %q: session %s yielded twice", machine, so.ID)
			}
			seen[so.ID] = true
			want, wantErr := r.Inventory(ctx, so.ID, machine)
			if (so.Err != nil) != (wantErr != nil) || so.Err != nil && so.Err.Error() != wantErr.Error() {
				t.Errorf("machine %q, session %s: error %v, Inventory says %v", machine, so.ID, so.Err, wantErr)
			}
			if len(want) == 0 && len(so.Streams) == 0 {
				continue
			}
			if !reflect.DeepEqual(so.Streams, want) {
				t.Errorf("machine %q, session %s: InventoryAll and Inventory differ", machine, so.ID)
			}
		}
		for _, id := range ids {
			if !seen[id] {
				t.Errorf("machine %q: session %s not yielded", machine, id)
			}
		}
	}
	for so := range r.InventoryAll(ctx, "", 0) {
		if so.ID == "2ccc" && (so.Err == nil || !strings.Contains(so.Err.Error(), "bad generation")) {
			t.Errorf("session with a bad key: %v", so.Err)
		}
	}
}

// A listing that yields a session's keys apart (a broken server) ends with
// an error rather than yielding the session twice; garbage listings yield
// no stream outside its session and do not panic.
func TestInventoryAllGarbage(t *testing.T) {
	a := Stream{SessionID: "0aaa", Machine: "m", Name: SessionStream}
	b := Stream{SessionID: "1bbb", Machine: "m", Name: SessionStream}
	apart := []remote.ObjectInfo{{Key: a.MetaKey("0000000000000001")}, {Key: b.MetaKey("0000000000000001")}, {Key: a.ChunkKey("0000000000000001", 0, 10)}}
	r := New(&garbageLister{Client: newTestRepo(t).Client(), entries: apart}, NewZstd())
	var ids []string
	var last error
	for so, err := range r.InventoryAll(t.Context(), "", 0) {
		if err != nil {
			last = err
			continue
		}
		ids = append(ids, so.ID)
	}
	if last == nil || !strings.Contains(last.Error(), "not listed together") || strings.Join(ids, " ") != "0aaa 1bbb" {
		t.Fatalf("keys apart: yielded %q, error %v", ids, last)
	}

	for name, entries := range garbageListings() {
		t.Run(name, func(t *testing.T) {
			r := New(&garbageLister{Client: newTestRepo(t).Client(), entries: entries}, NewZstd())
			mustNotPanic(t, "InventoryAll", func() {
				for so, err := range r.InventoryAll(t.Context(), "", 0) {
					if err != nil {
						if strings.Contains(err.Error(), "\n") {
							t.Errorf("error is not one line: %q", err)
						}
						continue
					}
					for _, inv := range so.Streams {
						if inv.Stream.SessionID != so.ID || !safename.Machine(inv.Stream.Machine) {
							t.Errorf("session %s: stream %+v", so.ID, inv.Stream)
						}
						for _, g := range inv.Generations {
							if !ValidGeneration(g.Name) {
								t.Errorf("generation %q", g.Name)
							}
						}
					}
				}
			})
		})
	}
}
