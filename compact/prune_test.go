package compact

import (
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ompsync/ompsync/repo"
)

const day = 24 * time.Hour

// Prune deletes superseded generations past retention and deleted sessions
// past theirs, never the newest generation, the one the catalog names, one
// another machine refers to, or a deleted session still within retention;
// its dry run reports exactly what it then deletes.
func TestPrune(t *testing.T) {
	eachRepo(t, func(t *testing.T, r *repo.Repo) {
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		rng := rand.New(rand.NewPCG(21, 22))
		gen := func(age time.Duration) string { return repo.NewGeneration(now.Add(-age).UnixNano()) }
		write := func(s repo.Stream, g string, meta bool) *writer {
			w := newWriter(r, s, g, 0)
			w.meta = !meta // putMeta runs only when meta is wanted
			for range 3 {
				if err := w.append(ctx, lines(rng, 2)); err != nil {
					t.Fatal(err)
				}
			}
			return w
		}
		art := func(id string) repo.Stream {
			return repo.Stream{SessionID: id, Machine: "laptop", Name: repo.ArtifactStream("subagents/0-Task.jsonl")}
		}
		keep := map[string]*writer{} // must still read after prune
		// A session rewritten three times, with an upload interrupted
		// before its meta in between and one in progress.
		s := session("rewritten", "laptop")
		g1 := write(s, gen(100*day), true)
		if err := r.PutHead(ctx, s, g1.gen, make([]byte, 256)); err != nil {
			t.Fatal(err)
		}
		write(s, gen(80*day), false)                   // superseded at 60 days: due
		keep["g2"] = write(s, gen(60*day), true)       // superseded at 10 days: kept
		keep["g3"] = write(s, gen(10*day), true)       // newest
		keep["inprogress"] = write(s, gen(day), false) // newer than the newest with meta
		write(art("rewritten"), gen(90*day), true)
		keep["a2"] = write(art("rewritten"), gen(50*day), true)

		// desk pulled bytes of referred's first generation: it stays.
		sr := session("referred", "laptop")
		keep["r1"] = write(sr, gen(100*day), true)
		keep["r2"] = write(sr, gen(40*day), true)
		desk := newWriter(r, session("referred", "desk"), gen(70*day), 0)
		if err := desk.appendRef(ctx, keep["r1"].data, keep["r1"]); err != nil {
			t.Fatal(err)
		}
		if err := desk.append(ctx, lines(rng, 1)); err != nil {
			t.Fatal(err)
		}
		keep["desk"] = desk

		// The catalog names an older generation than the newest: kept.
		sc := session("named", "laptop")
		keep["c1"] = write(sc, gen(100*day), true)
		keep["c2"] = write(sc, gen(50*day), true)

		// Deleted sessions: long ago, recently, and long ago but referred to.
		write(session("gone", "laptop"), gen(200*day), true)
		write(session("gone", "laptop"), gen(150*day), true)
		write(art("gone"), gen(150*day), true)
		keep["recent"] = write(session("recent", "laptop"), gen(200*day), true)
		keep["goneref"] = write(session("goneref", "laptop"), gen(200*day), true)
		deskRef := newWriter(r, session("goneref", "desk"), gen(120*day), 0)
		if err := deskRef.appendRef(ctx, keep["goneref"].data, keep["goneref"]); err != nil {
			t.Fatal(err)
		}
		keep["deskref"] = deskRef

		putCatalog(t, r, "laptop",
			entry("rewritten", keep["g3"].gen, repo.StatePresent, now.Add(-10*day)),
			entry("referred", keep["r2"].gen, repo.StatePresent, now.Add(-40*day)),
			entry("named", keep["c1"].gen, repo.StatePresent, now.Add(-100*day)),
			entry("gone", gen(150*day), repo.StateDeleted, now.Add(-100*day)),
			entry("recent", keep["recent"].gen, repo.StateDeleted, now.Add(-10*day)),
			entry("goneref", keep["goneref"].gen, repo.StateDeleted, now.Add(-100*day)))

		ret := Retention{Generations: 30 * day, Deleted: 90 * day}
		before := snapshotKeys(t, r)
		dry, err := Prune(ctx, r, "laptop", ret, now, true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(snapshotKeys(t, r), before) {
			t.Fatal("a dry run deleted something")
		}
		done, err := Prune(ctx, r, "laptop", ret, now, false)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(dry, done) {
			t.Fatalf("dry run reported\n%+v\nprune reported\n%+v", dry, done)
		}
		// What went is exactly what was reported.
		gone := map[string]bool{}
		for _, it := range done.Items {
			for _, k := range it.Keys {
				gone[k] = true
			}
		}
		var want []string
		for _, k := range before {
			if !gone[k] {
				want = append(want, k)
			}
		}
		if after := snapshotKeys(t, r); !slices.Equal(after, want) || len(gone) != done.Objects {
			t.Fatalf("left %d objects, want %d; report says %d deleted", len(after), len(want), done.Objects)
		}
		var got []string
		for _, it := range done.Items {
			got = append(got, it.Stream.SessionID+" "+it.Stream.Name+" "+it.Reason)
		}
		wantItems := []string{
			"gone artifacts/subagents%2F0-Task.jsonl session deleted",
			"gone session session deleted", "gone session session deleted",
			"rewritten artifacts/subagents%2F0-Task.jsonl superseded",
			"rewritten session superseded", "rewritten session superseded",
		}
		if !slices.Equal(got, wantItems) || done.Items[4].Generation != g1.gen || len(done.Items[4].Keys) != 5 {
			t.Fatalf("items %q, want %q; %+v", got, wantItems, done.Items)
		}
		if len(done.Kept) != 2 || done.Kept[0].Generation != keep["goneref"].gen || done.Kept[1].Generation != keep["r1"].gen ||
			done.Kept[1].Why != "referenced by machine desk" {
			t.Fatalf("kept %+v", done.Kept)
		}
		if !slices.Equal(done.Sessions, []string{"gone"}) {
			t.Fatalf("sessions to drop %v, want [gone]", done.Sessions)
		}
		for name, w := range keep {
			if name == "inprogress" {
				if n := len(chunksOf(t, r, w.s, w.gen)); n != 3 {
					t.Fatalf("the upload in progress lost chunks: %d left", n)
				}
				continue
			}
			checkStream(t, r, w, "after prune: "+name)
		}

		// Again: nothing more to delete; the deleted session is still
		// reported for its catalog entry to go.
		again, err := Prune(ctx, r, "laptop", ret, now, false)
		if err != nil || len(again.Items) != 0 || !slices.Equal(again.Sessions, []string{"gone"}) {
			t.Fatalf("second prune: %+v, %v", again, err)
		}
		if err := DropSessions(ctx, r, "laptop", again.Sessions, now); err != nil {
			t.Fatal(err)
		}
		cat, err := r.GetCatalog(ctx, "laptop")
		if err != nil || len(cat.Sessions) != 5 || slices.ContainsFunc(cat.Sessions, func(e repo.CatalogEntry) bool { return e.ID == "gone" }) {
			t.Fatalf("catalog after DropSessions: %+v, %v", cat.Sessions, err)
		}
	})
}

// Retention of zero keeps everything, and reads nothing.
func TestPruneForever(t *testing.T) {
	ctx := context.Background()
	r := fileRepo(t)
	cnt := &counter{Client: r.Client()}
	rep, err := Prune(ctx, repo.New(cnt, repo.NewZstd()), "laptop", Retention{}, time.Now(), false)
	if err != nil || rep.Objects != 0 || cnt.gets+cnt.lists != 0 {
		t.Fatalf("%+v, %v, %d requests", rep, err, cnt.gets+cnt.lists)
	}
}
