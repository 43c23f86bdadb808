package repo_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// A new repository gets a random id; Init keeps it; another repository has
// another.
func TestMarkerID(t *testing.T) {
	ctx := context.Background()
	c := newRemote(t)
	r := repo.New(c, repo.NewZstd())
	if err := r.Init(ctx); err != nil {
		t.Fatal(err)
	}
	id := marker(t, c).ID
	if !repo.ValidID(id) || r.ID() != id {
		t.Fatalf("new repository: marker id %q, Repo.ID %q", id, r.ID())
	}
	again := repo.New(c, repo.NewZstd())
	if err := again.Init(ctx); err != nil || again.ID() != id || marker(t, c).ID != id {
		t.Fatalf("Init of an existing repository: %v, id %q then %q, want %q", err, again.ID(), marker(t, c).ID, id)
	}
	other := repo.New(newRemote(t), repo.NewZstd())
	if err := other.Init(ctx); err != nil || other.ID() == id {
		t.Fatalf("another repository: %v, id %q", err, other.ID())
	}
}

// A marker without an id (as before ids, or edited by hand) gets one from the
// first writer, which keeps everything else it says; readers never add one.
func TestMarkerIDAddedToOldMarker(t *testing.T) {
	ctx := context.Background()
	k := newKey(t)
	c := newRemote(t)
	enc := codec(t, crypt.Options{IdentityFile: k.file})
	if err := repo.New(c, enc).Init(ctx); err != nil {
		t.Fatal(err)
	}
	before := marker(t, c)
	// What an older ompsync wrote: the same marker without the id.
	var old map[string]any
	b, _ := json.Marshal(before)
	_ = json.Unmarshal(b, &old)
	delete(old, "id")
	b, _ = json.Marshal(old)
	if err := c.Put(ctx, repo.MarkerKey, b, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := repo.New(c, enc).Check(ctx); err != nil || marker(t, c).ID != "" {
		t.Fatalf("a reader wrote an id (%v, %q)", err, marker(t, c).ID)
	}
	r := repo.New(c, enc)
	if err := r.Init(ctx); err != nil {
		t.Fatal(err)
	}
	after := marker(t, c)
	if !repo.ValidID(after.ID) || after.ID != r.ID() || after.ID == before.ID {
		t.Fatalf("old marker: id %q (Repo.ID %q), want a new valid one", after.ID, r.ID())
	}
	if !after.Created.Equal(before.Created) || after.Encryption == nil || !slices.Equal(after.Encryption.Recipients, before.Encryption.Recipients) {
		t.Fatalf("the id changed the marker: before %+v, after %+v", before, after)
	}
	// A rekey keeps the id, so the agents' states stay this repository's.
	if _, err := repo.New(c, codec(t, crypt.Options{IdentityFile: k.file})).Rekey(ctx, repo.RekeyOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if got := marker(t, c).ID; got != after.ID {
		t.Fatalf("rekey changed the id %q to %q", after.ID, got)
	}
}

// A marker whose id is not one ompsync writes is damaged.
func TestMarkerBadIDRefused(t *testing.T) {
	ctx := context.Background()
	c := newRemote(t)
	for _, id := range []string{"../x", strings.Repeat("a", 65), "ABCDEF", "id with space"} {
		b, _ := json.Marshal(map[string]any{"format": 2, "created": time.Now(), "id": id})
		if err := c.Put(ctx, repo.MarkerKey, b, remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := repo.New(c, repo.NewZstd()).ReadMarker(ctx); err == nil || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("id %q: %v, want damaged", id, err)
		}
	}
}

// The writer of a catalog travels with it and with its recent object, and
// CatalogWriter names the last one with a single small read.
func TestCatalogWriter(t *testing.T) {
	ctx := context.Background()
	c := newRemote(t)
	r := repo.New(c, repo.NewZstd())
	if _, _, err := r.CatalogWriter(ctx, "box"); !errors.Is(err, remote.ErrNotFound) {
		t.Fatalf("no catalog: %v, want not found", err)
	}
	a := &repo.Writer{Instance: repo.NewID(), Host: "box", StateDir: "/home/u/.local/state/ompsync"}
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	cat := repo.Catalog{Machine: "box", Updated: t0, Writer: a, Sessions: []repo.CatalogEntry{
		{ID: "s1", Path: "sessions/-w/x_s1.jsonl", Generation: repo.NewGeneration(1), Size: 10, State: repo.StatePresent},
	}}
	if _, err := r.PutCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	w, at, err := r.CatalogWriter(ctx, "box")
	if err != nil || w == nil || *w != *a || !at.Equal(t0) {
		t.Fatalf("catalog alone: %+v at %v, %v", w, at, err)
	}
	// Another writer's recent object over it is the last write.
	b := &repo.Writer{Instance: repo.NewID(), Host: "other"}
	t1 := t0.Add(time.Minute)
	if err := r.PutRecent(ctx, repo.Catalog{Machine: "box", Updated: t1, Base: t0, Writer: b}, repo.IndexCatalog(cat.Sessions)); err != nil {
		t.Fatal(err)
	}
	if w, at, err := r.CatalogWriter(ctx, "box"); err != nil || w == nil || *w != *b || !at.Equal(t1) {
		t.Fatalf("with a recent object: %+v at %v, %v", w, at, err)
	}
	got, err := r.GetCatalog(ctx, "box")
	if err != nil || got.Writer == nil || *got.Writer != *b || !got.Updated.Equal(t1) {
		t.Fatalf("GetCatalog: writer %+v, updated %v, %v", got.Writer, got.Updated, err)
	}
	base, recent, err := r.GetCatalogParts(ctx, "box")
	if err != nil {
		t.Fatal(err)
	}
	if w, at := repo.LastWrite(base, recent); w == nil || *w != *b || !at.Equal(t1) {
		t.Fatalf("LastWrite: %+v at %v", w, at)
	}
}

// A writer that no agent writes (a hostile or damaged remote) makes the
// catalog unreadable rather than a name in a message.
func TestCatalogWriterChecked(t *testing.T) {
	ctx := context.Background()
	c := newRemote(t)
	r := repo.New(c, repo.NewZstd())
	for _, w := range []repo.Writer{
		{Instance: "not hex"},
		{Instance: repo.NewID(), HostID: "../x"},
		{Instance: repo.NewID(), Host: strings.Repeat("h", 5000)},
	} {
		if _, err := r.PutCatalog(ctx, repo.Catalog{Machine: "box", Updated: time.Now(), Writer: &w}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetCatalog(ctx, "box"); err == nil || !strings.Contains(err.Error(), "writer") {
			t.Errorf("writer %+v: GetCatalog %v", w, err)
		}
		if _, _, err := r.CatalogWriter(ctx, "box"); err == nil || !strings.Contains(err.Error(), "writer") {
			t.Errorf("writer %+v: CatalogWriter %v", w, err)
		}
	}
}
