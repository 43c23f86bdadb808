package compact

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
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
		// write puts a generation; without meta, one whose upload was cut
		// off before its first chunk landed: incomplete.
		write := func(s repo.Stream, g string, meta bool) *writer {
			w := newWriter(r, s, g, 0)
			w.meta = !meta // putMeta runs only when meta is wanted
			for range 3 {
				if err := w.append(ctx, lines(rng, 2)); err != nil {
					t.Fatal(err)
				}
			}
			if !meta {
				first := chunksOf(t, r, s, g)[0]
				if err := r.Client().Delete(ctx, s.ChunkKey(g, first.Start, first.End)); err != nil {
					t.Fatal(err)
				}
			}
			return w
		}
		art := func(id string) repo.Stream {
			return repo.Stream{SessionID: id, Machine: "laptop", Name: repo.ArtifactStream("subagents/0-Task.jsonl")}
		}
		keep := map[string]*writer{} // must still read after prune
		// A session rewritten three times, with an upload cut off before
		// its first chunk in between and one in progress.
		s := session("rewritten", "laptop")
		g1 := write(s, gen(100*day), true)
		if err := r.PutHead(ctx, s, g1.gen, make([]byte, 256)); err != nil {
			t.Fatal(err)
		}
		write(s, gen(80*day), false)             // superseded at 60 days: due
		keep["g2"] = write(s, gen(60*day), true) // superseded at 10 days: kept
		// The newest, an omp rewrite: every line of g1 and more.
		keep["g3"] = newWriter(r, s, gen(10*day), 0)
		for _, b := range [][]byte{g1.data, lines(rng, 2)} {
			if err := keep["g3"].append(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
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
		dry, err := Prune(ctx, r, store.OMP(), "laptop", ret, now, true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(snapshotKeys(t, r), before) {
			t.Fatal("a dry run deleted something")
		}
		done, err := Prune(ctx, r, store.OMP(), "laptop", ret, now, false)
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
				if n := len(chunksOf(t, r, w.s, w.gen)); n != 2 { // its first never landed
					t.Fatalf("the upload in progress lost chunks: %d left", n)
				}
				continue
			}
			checkStream(t, r, w, "after prune: "+name)
		}

		// Again: nothing more to delete; the deleted session is still
		// reported for its catalog entry to go.
		again, err := Prune(ctx, r, store.OMP(), "laptop", ret, now, false)
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
	rep, err := Prune(ctx, repo.New(cnt, repo.NewZstd()), store.OMP(), "laptop", Retention{}, time.Now(), false)
	if err != nil || rep.Objects != 0 || cnt.gets+cnt.lists != 0 {
		t.Fatalf("%+v, %v, %d requests", rep, err, cnt.gets+cnt.lists)
	}
}

// ompFile is an omp session file: a title slot, then entries with ids
// and times; contents[i] is entry i's content.
func ompFile(title string, updated int, contents []string) []byte {
	slot := fmt.Sprintf(`{"type":"title","title":%q,"updatedAt":"2026-11-0%dT10:00:00.000Z"}`, title, updated)
	b := []byte(slot + strings.Repeat(" ", 255-len(slot)) + "\n")
	for i, c := range contents {
		b = fmt.Appendf(b, `{"type":"message","id":"%08x","parentId":null,"timestamp":"2026-11-01T10:00:%02d.000Z","message":{"role":"user","content":%q}}`+"\n", i, i, c)
	}
	return b
}

// A superseded generation holding entries the newest lacks (the file was
// cut short, then went on) stays, and prune says how to get it back; one
// whose every entry the newest holds goes, though omp rewrote its title
// slot and pruned an entry's content, and so does the short generation
// in between.
func TestPruneKeepsLostEntries(t *testing.T) {
	eachRepo(t, func(t *testing.T, r *repo.Repo) {
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		gen := func(age time.Duration) string { return repo.NewGeneration(now.Add(-age).UnixNano()) }
		upload := func(s repo.Stream, g string, b []byte) *writer {
			w := newWriter(r, s, g, 256)
			for len(b) > 0 { // a chunk per 300 bytes or so, cut at lines
				n := bytes.IndexByte(b[min(300, len(b)-1):], '\n') + min(300, len(b)-1) + 1
				if err := w.append(ctx, b[:n]); err != nil {
					t.Fatal(err)
				}
				b = b[n:]
			}
			return w
		}
		var full []string
		for i := range 12 {
			full = append(full, fmt.Sprintf("turn %d: %s", i, strings.Repeat("x", 40*i)))
		}
		cut := session("cut", "laptop")
		whole := upload(cut, gen(100*day), ompFile("fix the bug", 1, full))
		stub := upload(cut, gen(60*day), ompFile("fix the bug", 1, full[:2])) // began as shrank
		wentOn := `{"type":"message","id":"0000ffff","parentId":"00000001","timestamp":"2026-11-20T10:00:00.000Z","message":{"role":"user","content":"went on"}}` + "\n"
		went := upload(cut, gen(50*day), append(ompFile("fix the bug", 2, full[:2]), wentOn...))

		rw := session("rewritten", "laptop")
		before := upload(rw, gen(100*day), ompFile("old title", 1, full))
		pruned := slices.Clone(full)
		pruned[3] = "[output pruned]"
		after := upload(rw, gen(50*day), ompFile("new title", 3, append(pruned, "more")))

		putCatalog(t, r, "laptop",
			entry("cut", went.gen, repo.StatePresent, now.Add(-50*day)),
			entry("rewritten", after.gen, repo.StatePresent, now.Add(-50*day)))
		ret := Retention{Generations: 30 * day}
		dry, err := Prune(ctx, r, store.OMP(), "laptop", ret, now, true)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Prune(ctx, r, store.OMP(), "laptop", ret, now, false)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(dry, rep) {
			t.Fatalf("dry run reported\n%+v\nprune reported\n%+v", dry, rep)
		}
		var got []string
		for _, it := range rep.Items {
			got = append(got, it.Stream.SessionID+" "+it.Generation+" "+it.Reason)
		}
		if want := []string{"cut " + stub.gen + " superseded", "rewritten " + before.gen + " superseded"}; !slices.Equal(got, want) {
			t.Fatalf("pruned %q, want %q", got, want)
		}
		wantWhy := "holds lines the current generation " + went.gen + " lacks (the first is line 4; the file was cut short or edited): 'ompsync restore --generation " + whole.gen + " cut' brings them back"
		if len(rep.Kept) != 1 || rep.Kept[0].Generation != whole.gen || rep.Kept[0].Why != wantWhy {
			t.Fatalf("kept %+v, want %s: %s", rep.Kept, whole.gen, wantWhy)
		}
		checkStream(t, r, whole, "the complete copy after prune")
		checkStream(t, r, went, "the newest after prune")
		checkStream(t, r, after, "the rewrite after prune")
		if again, err := Prune(ctx, r, store.OMP(), "laptop", ret, now, false); err != nil || len(again.Items) != 0 || len(again.Kept) != 1 {
			t.Fatalf("second prune: %+v, %v", again, err)
		}
	})
}
