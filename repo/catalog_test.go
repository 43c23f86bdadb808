package repo

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A recent object carries, per changed session, only what changed since
// the catalog; read back over that catalog it gives the full entries, and
// it is much smaller than the same entries written whole.
func TestRecentPatches(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 123456789, time.UTC)
	base := Catalog{V: 1, Machine: "laptop", Updated: now}
	var changed []CatalogEntry
	for i := range 50 {
		id := fmt.Sprintf("019ad%03x-0000-7000-8000-%012x", i, i*7919)
		e := CatalogEntry{ID: id, Path: "sessions/--home-u-src--/2026-11-30T08-00-00-000Z_" + id + ".jsonl", Cwd: "/home/u/src",
			Title: fmt.Sprintf("session %d", i), Generation: fmt.Sprintf("%016x", now.UnixNano()+int64(i)), Size: int64(1000 + i),
			Mtime: now, State: StatePresent, Changed: now}
		base.Sessions = append(base.Sessions, e)
		e.Size += 500
		e.Mtime = now.Add(time.Duration(i) * time.Second)
		if i == 3 {
			e.Title, e.State = "", StateArchived // changed to empty: must not read as "unchanged"
		}
		changed = append(changed, e)
	}
	fresh := CatalogEntry{ID: "fresh", Path: "sessions/x/fresh.jsonl", Generation: "18ecbc17b1295105", Size: 7, State: StatePresent}
	changed = append(changed, fresh)
	recent := Catalog{Machine: "laptop", Updated: now.Add(time.Minute), Base: now, Sessions: changed}

	at := IndexCatalog(base.Sessions)
	patches := EncodeRecent(recent, at)
	whole := EncodeCatalog(recent)
	if len(patches) >= len(whole)/2 {
		t.Errorf("patches take %d bytes, whole entries %d", len(patches), len(whole))
	}
	// Entries written whole (as before patches) read the same, as far as
	// they name every field.
	var named []CatalogEntry
	for _, e := range changed {
		if e.Title != "" && e.Cwd != "" {
			named = append(named, e)
		}
	}
	for name, b := range map[string][]byte{"patches": patches, "whole entries": EncodeCatalog(Catalog{Machine: "laptop", Base: now, Sessions: named})} {
		want := changed
		if name != "patches" {
			want = named
		}
		got, err := DecodeRecent(b, base)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got.Refused) > 0 || len(got.Sessions) != len(want) {
			t.Fatalf("%s: %d entries, refused %q", name, len(got.Sessions), got.Refused)
		}
		byID := map[string]CatalogEntry{}
		for _, e := range got.Sessions {
			byID[e.ID] = e
		}
		for _, w := range want {
			if e := byID[w.ID]; !sameEntryForTest(e, w) {
				t.Errorf("%s: %s reads as %+v, want %+v", name, w.ID, e, w)
			}
		}
		if !got.Base.Equal(now) || got.Machine != "laptop" {
			t.Errorf("%s: base %v machine %q", name, got.Base, got.Machine)
		}
	}
	if !bytes.Equal(patches, EncodeRecent(recent, at)) {
		t.Error("encoding is not deterministic")
	}
}

// A patch cannot smuggle an unsafe value in: it is checked after it is
// laid over the catalog's entry, and a patch for a session the catalog
// lacks must be complete.
func TestRecentPatchChecked(t *testing.T) {
	base := Catalog{V: 1, Machine: "laptop", Sessions: []CatalogEntry{{ID: "a", Path: "sessions/x/a.jsonl", State: StatePresent}}}
	for _, b := range []string{
		`{"v":1,"machine":"laptop","sessions":[{"id":"a","path":"../../etc/passwd"}]}`,
		`{"v":1,"machine":"laptop","sessions":[{"id":"a","state":"purged"}]}`,
		`{"v":1,"machine":"laptop","sessions":[{"id":"b","size":5}]}`,
		`{"v":1,"machine":"laptop","sessions":[{"id":"../a","size":5}]}`,
		`{"v":1,"machine":"laptop","sessions":[{"n":1,"size":5}]}`,
		`{"v":1,"machine":"laptop","sessions":[{"n":-1,"size":5}]}`,
		`{"v":1,"machine":"laptop","sessions":[{"n":0,"id":"b","size":5}]}`,
	} {
		c, err := DecodeRecent([]byte(b), base)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if len(c.Sessions) != 0 || len(c.Refused) != 1 {
			t.Errorf("%s: accepted %+v", b, c.Sessions)
		}
	}
	// Positions name the catalog as stored: once entries were refused, or
	// it is not in the order it is stored in, they name nothing.
	for _, b := range []Catalog{
		{V: 1, Machine: "laptop", Sessions: base.Sessions, Refused: []string{"an unsafe entry"}},
		{V: 1, Machine: "laptop", Sessions: []CatalogEntry{{ID: "z", Path: "z", State: StatePresent}, base.Sessions[0]}},
	} {
		c, err := DecodeRecent([]byte(`{"v":1,"machine":"laptop","sessions":[{"n":0,"size":5}]}`), b)
		if err != nil || len(c.Sessions) != 0 {
			t.Errorf("a change by position over %+v: %+v, %v", b, c.Sessions, err)
		}
	}
	twice, err := DecodeRecent([]byte(`{"v":1,"machine":"laptop","sessions":[{"id":"a","size":1},{"n":0,"size":2}]}`), base)
	if err != nil || len(twice.Sessions) != 1 || twice.Sessions[0].Size != 1 || len(twice.Refused) != 1 {
		t.Errorf("a session listed twice: %+v, %v", twice, err)
	}
	for _, b := range []string{`{"v":2,"machine":"laptop"}`, `{"v":1,"machine":".."}`, `not json`} {
		if _, err := DecodeRecent([]byte(b), base); err == nil {
			t.Errorf("%s: accepted", b)
		}
	}
}

// Blob mtimes travel in the catalog and its recent object: the recent
// object's entries amend the catalog's, and an entry that does not name a
// blob (or names one twice) is refused, the others kept.
func TestCatalogBlobs(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 0, 0, 123456789, time.UTC)
	a, b, c := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	cat := Catalog{Machine: "laptop", Updated: now, Blobs: []BlobEntry{{b, now}, {a, now}}}
	base, err := DecodeCatalog(EncodeCatalog(cat))
	if err != nil || len(base.Refused) > 0 {
		t.Fatalf("decode: %v, refused %q", err, base.Refused)
	}
	if len(base.Blobs) != 2 || base.Blobs[0].Name != a || !base.Blobs[1].Mtime.Equal(now) {
		t.Fatalf("blobs read back as %+v", base.Blobs)
	}
	later := now.Add(time.Hour)
	recent := Catalog{Machine: "laptop", Updated: later, Base: now, Blobs: []BlobEntry{{c, later}, {a, later}}}
	r, err := DecodeRecent(EncodeRecent(recent, IndexCatalog(nil)), base)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]time.Time{}
	for _, e := range Amend(base, &r).Blobs {
		got[e.Name] = e.Mtime
	}
	if len(got) != 3 || !got[a].Equal(later) || !got[b].Equal(now) || !got[c].Equal(later) {
		t.Errorf("amended blobs %v", got)
	}

	bad := []byte(`{"v":1,"machine":"laptop","updated":"2026-12-01T08:00:00Z","sessions":[],"blobs":[` +
		`{"name":"../../etc/passwd","mtime":"2026-12-01T08:00:00Z"},{"name":"` + a + `","mtime":"2026-12-01T08:00:00Z"},` +
		`{"name":"` + a + `","mtime":"2026-12-01T09:00:00Z"}]}`)
	got2, err := DecodeCatalog(bad)
	if err != nil {
		t.Fatal(err)
	}
	if len(got2.Blobs) != 1 || got2.Blobs[0].Name != a || len(got2.Refused) != 2 {
		t.Errorf("kept %+v, refused %q", got2.Blobs, got2.Refused)
	}
}
