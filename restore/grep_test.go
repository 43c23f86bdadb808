package restore

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/search"
)

// Grep is one place's search, as GrepAll runs it.
func Grep(ctx context.Context, r *repo.Repo, prefixes []string, opts GrepOptions, emit func(GrepMatch) error) (*GrepReport, error) {
	rep := &GrepReport{}
	return rep, grepPlace(ctx, r, prefixes, opts, rep, emit)
}

// cacheSize is the bytes of records the search cache in dir holds.
func cacheSize(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// grep runs Grep and returns its matches.
func grep(t *testing.T, r *repo.Repo, pattern string, cache *search.Cache, opts Options, prefixes ...string) ([]GrepMatch, *GrepReport) {
	t.Helper()
	m, err := search.Compile(search.Pattern{Text: pattern})
	if err != nil {
		t.Fatal(err)
	}
	var out []GrepMatch
	rep, err := Grep(context.Background(), r, prefixes, GrepOptions{Options: opts, Pattern: m, Cache: cache}, func(gm GrepMatch) error {
		out = append(out, gm)
		return nil
	})
	if err != nil {
		t.Fatalf("grep %q: %v", pattern, err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("grep %q: %v", pattern, rep.Problems)
	}
	return out, rep
}

// sessionGets counts the GETs of session objects since the log was reset,
// and the LISTs of session objects.
func sessionGets(log *keyLog) (gets, lists int) {
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, k := range log.gets {
		if strings.HasPrefix(k, repo.SessionsPrefix()) {
			gets++
		}
	}
	for _, k := range log.lists {
		if strings.HasPrefix(k, repo.SessionsPrefix()) {
			lists++
		}
	}
	log.gets, log.lists = nil, nil
	return gets, lists
}

// A marker planted in one line of one session among 1,000 is found once,
// though two machines hold it; a deleted session's only with
// IncludeDeleted. A second search of the unchanged remote GETs no session
// object; after the session grows, only its new chunk.
func TestGrep(t *testing.T) {
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	log := &keyLog{Client: c}
	r := repo.New(log, repo.NewZstd())
	desk, laptop := newMachine(t, r, "desk"), newMachine(t, r, "laptop")
	const marker = "MARKER-7f3a-only-here"
	var markerID, markerRel string
	for i := range 1000 {
		id := fmt.Sprintf("019a1000-0000-7000-8000-%012d", i)
		rel := sessionPath("-w", id, i%1000)
		data := synthSession(id, "/home/u/w", fmt.Sprintf("session %d", i), 6)
		if i == 500 {
			markerID, markerRel = id, rel
			data = append(data, messageLine("0000beef", "00000006", "assistant", "2026-10-07T02:00:00.000Z", "the fix: "+marker+" in auth.go")...)
			laptop.write(rel, data, base)
		}
		desk.write(rel, data, base)
	}
	gone := "019a2000-0000-7000-8000-000000000001"
	goneRel := sessionPath("-x", gone, 1)
	desk.write(goneRel, append(synthSession(gone, "/home/u/x", "deleted one", 2), messageLine("0000dead", "00000002", "user", "2026-10-07T02:00:00.000Z", "GONE-MARKER here")...), base)
	desk.backup()
	laptop.backup()
	if err := os.Remove(desk.path(goneRel)); err != nil {
		t.Fatal(err)
	}
	desk.backup()

	cache, err := search.OpenCache(filepath.Join(t.TempDir(), "search"), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	got, rep := grep(t, r, marker, cache, Options{})
	if len(got) != 1 {
		t.Fatalf("%d matches, want 1: %+v", len(got), got)
	}
	m := got[0]
	if m.Session != markerID || m.Title != "session 500" || m.Entry != "0000beef" || m.Role != "assistant" || m.Kind != "text" ||
		m.Text != "the fix: "+marker+" in auth.go" || !m.Time.Equal(time.Date(2026, 10, 7, 2, 0, 0, 0, time.UTC)) ||
		strings.Join(m.Machines, ",") != "desk,laptop" || m.State != repo.StatePresent {
		t.Errorf("match %+v", m)
	}
	if rep.Sessions != 1000 || rep.Copies != 1001 || rep.Fetched != 1001 || rep.DeletedLeft != 1 || rep.Bytes == 0 {
		t.Errorf("first run: %+v", rep)
	}
	// A line many sessions share is printed once per session.
	if got, _ := grep(t, r, "line 2 of session 7", cache, Options{}); len(got) != 111 {
		t.Errorf("line 2 of session 7*: %d matches, want 111 (7, 70-79, 700-799)", len(got))
	}

	if got, _ := grep(t, r, "GONE-MARKER", cache, Options{}); len(got) != 0 {
		t.Errorf("a deleted session searched without IncludeDeleted: %+v", got)
	}
	if got, _ := grep(t, r, "GONE-MARKER", cache, Options{IncludeDeleted: true}); len(got) != 1 || got[0].State != repo.StateDeleted {
		t.Errorf("a deleted session with IncludeDeleted: %+v", got)
	}

	// Unchanged: nothing read but the catalogs.
	sessionGets(log)
	got, rep = grep(t, r, marker, cache, Options{})
	if n, l := sessionGets(log); n != 0 || l != 0 || rep.Fetched != 0 || len(got) != 1 {
		t.Errorf("second run: %d session GETs, %d LISTs, %d copies fetched, %d matches", n, l, rep.Fetched, len(got))
	}

	// Grown: the new chunk alone.
	desk.appendTo(markerRel, messageLine("0000cafe", "0000beef", "user", "2026-10-07T03:00:00.000Z", "and "+marker+" again"), base.Add(2*time.Hour))
	desk.backup()
	sessionGets(log)
	got, rep = grep(t, r, marker, cache, Options{})
	if n, l := sessionGets(log); n != 1 || l != 1 || rep.Fetched != 1 || len(got) != 2 || got[1].Entry != "0000cafe" || strings.Join(got[0].Machines, ",") != "desk,laptop" {
		t.Errorf("after an append: %d session GETs, %d LISTs, %d fetched, matches %+v", n, l, rep.Fetched, got)
	}

	// By prefix, by file name; --since.
	if got, _ := grep(t, r, marker, cache, Options{}, strings.ToUpper(markerID), "sessions/-w/x_019a1000-0000-7000-8000-000000000001.jsonl"); len(got) != 2 {
		t.Errorf("by prefix: %d matches", len(got))
	}
	m2, _ := search.Compile(search.Pattern{Text: marker})
	var since []GrepMatch
	if _, err := Grep(context.Background(), r, nil, GrepOptions{Pattern: m2, Cache: cache, Since: time.Date(2026, 10, 7, 2, 30, 0, 0, time.UTC)}, func(gm GrepMatch) error {
		since = append(since, gm)
		return nil
	}); err != nil || len(since) != 1 || since[0].Entry != "0000cafe" {
		t.Errorf("--since: %v %+v", err, since)
	}

	// A cache too small for everything: the same answers; it stays
	// within its bound.
	smallDir := filepath.Join(t.TempDir(), "small")
	small, err := search.OpenCache(smallDir, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	for range 2 {
		if got, _ := grep(t, r, marker, small, Options{}); len(got) != 2 {
			t.Errorf("small cache: %d matches", len(got))
		}
		if n := cacheSize(t, smallDir); n > 64<<10 {
			t.Errorf("small cache holds %d bytes", n)
		}
	}
	// No cache at all.
	if got, _ := grep(t, r, marker, nil, Options{}); len(got) != 2 {
		t.Errorf("no cache: %d matches", len(got))
	}
}

// A rewritten session is read again whole, and its older generation,
// which the remote keeps, is searched too: a line only it holds is found,
// marked older, and a later search finds it in the cache without reading
// the remote; once retention removes the generation, it is not found.
func TestGrepRewritten(t *testing.T) {
	r := fileRemote(t)
	m := newMachine(t, r, "desk")
	id := "019a3000-0000-7000-8000-000000000001"
	rel := sessionPath("-w", id, 1)
	m.write(rel, append(synthSession(id, "/w", "t", 2), messageLine("00000009", "00000002", "user", "2026-10-07T02:00:00.000Z", "OLD-WORDS")...), base)
	m.backup()
	cache, err := search.OpenCache(filepath.Join(t.TempDir(), "search"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	if got, _ := grep(t, r, "OLD-WORDS", cache, Options{}); len(got) != 1 {
		t.Fatalf("before: %d matches", len(got))
	}
	m.replace(rel, append(synthSession(id, "/w", "t", 2), messageLine("00000009", "00000002", "user", "2026-10-07T02:00:00.000Z", "NEW-WORDS")...), base)
	m.backup()
	for _, run := range []string{"first", "cached"} {
		got, rep := grep(t, r, "OLD-WORDS", cache, Options{})
		if len(got) != 1 || !got[0].Older || fmt.Sprint(got[0].Machines) != "[desk]" || rep.Copies != 2 {
			t.Errorf("%s search of the old generation's words: %+v, %+v", run, got, rep)
		}
		if want := map[string]int{"first": 2, "cached": 0}[run]; rep.Fetched != want {
			t.Errorf("%s search read %d copies, want %d", run, rep.Fetched, want)
		}
	}
	if got, _ := grep(t, r, "NEW-WORDS", cache, Options{}); len(got) != 1 || got[0].Older {
		t.Errorf("the new generation's words: %+v", got)
	}
	if got, _ := grep(t, r, "OLD-WORDS", nil, Options{}); len(got) != 1 || !got[0].Older {
		t.Errorf("without a cache, the old generation's words: %+v", got)
	}

	// Retention removes the old generation: a day on, the session is
	// listed again, and its words are gone.
	s := repo.Stream{SessionID: id, Machine: "desk", Name: repo.SessionStream}
	h, _, err := History(context.Background(), r, id, Options{})
	if err != nil || len(h.Copies) != 2 || h.Copies[0].Current {
		t.Fatalf("history: %+v, %v", h, err)
	}
	ctx := context.Background()
	for obj, err := range r.Client().List(ctx, s.GenPrefix(h.Copies[0].Generation), remote.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Client().Delete(ctx, obj.Key); err != nil {
			t.Fatal(err)
		}
	}
	m2, _ := search.Compile(search.Pattern{Text: "OLD-WORDS"})
	for _, tc := range []struct {
		later time.Duration
		want  int
	}{{time.Hour, 1}, {25 * time.Hour, 0}} {
		var got []GrepMatch
		_, err := Grep(ctx, r, nil, GrepOptions{Pattern: m2, Cache: cache, Options: Options{Now: func() time.Time { return time.Now().Add(tc.later) }}}, func(gm GrepMatch) error {
			got = append(got, gm)
			return nil
		})
		if err != nil || len(got) != tc.want {
			t.Errorf("%v after retention removed the old generation: %d matches (%v), want %d", tc.later, len(got), err, tc.want)
		}
	}
}

// A pattern that matches more of a session than its matches may hold in
// memory: only a hash a line is kept, the copies are searched again as
// the session is printed, and what is printed is the same, line for line,
// machines and all. Past the bound on lines a session may match, the
// search fails naming the session and what to do.
func TestGrepManyMatches(t *testing.T) {
	r := fileRemote(t)
	desk, laptop := newMachine(t, r, "desk"), newMachine(t, r, "laptop")
	shared := "019a3000-0000-7000-8000-000000000001"
	for i := range 3 {
		id := fmt.Sprintf("019a3000-0000-7000-8000-%012d", i)
		rel := sessionPath("-w", id, i)
		data := synthSession(id, "/home/u/w", fmt.Sprintf("session %d", i), 40)
		desk.write(rel, data, base.Add(time.Duration(i)*time.Hour))
		if id == shared {
			// The laptop went on: its copy holds the desk's lines and one more.
			laptop.write(rel, append(data, messageLine("0000beef", "00000028", "user", "2026-10-07T02:00:00.000Z", "line 40 of session 1, on the laptop")...), base.Add(5*time.Hour))
		}
	}
	desk.backup()
	laptop.backup()
	m, err := search.Compile(search.Pattern{Text: "line"})
	if err != nil {
		t.Fatal(err)
	}
	run := func(maxHeld, maxLines int) ([]GrepMatch, error) {
		var out []GrepMatch
		_, err := Grep(context.Background(), r, nil, GrepOptions{Pattern: m, maxHeld: maxHeld, maxLines: maxLines}, func(gm GrepMatch) error {
			out = append(out, gm)
			return nil
		})
		return out, err
	}
	held, err := run(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 3*40+1 {
		t.Fatalf("%d matches, want %d", len(held), 3*40+1)
	}
	machines := map[string]int{}
	for _, gm := range held {
		if gm.Session == shared {
			machines[strings.Join(gm.Machines, ",")]++
		}
	}
	if machines["desk,laptop"] != 40 || machines["laptop"] != 1 || len(machines) != 2 {
		t.Errorf("the shared session's lines by machines: %v, want 40 on both and 1 on the laptop alone", machines)
	}
	spilled, err := run(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(spilled, held) {
		t.Errorf("searched again as printed, the matches differ:\n%+v\nwant\n%+v", spilled, held)
	}
	_, err = run(0, 30)
	if err == nil || !strings.Contains(err.Error(), "more than 30 lines match") || !strings.Contains(err.Error(), "narrow the pattern") {
		t.Errorf("past the bound on lines: %v", err)
	}
}

// An older generation that fails its check is named in every search, not
// only the first, until a read of it succeeds: the cache never takes a copy
// it could not read for one it has searched.
func TestGrepOlderCopyDamaged(t *testing.T) {
	ctx := context.Background()
	r := fileRemote(t)
	id := "019a3000-0000-7000-8000-000000000002"
	old := olderAndNewer(t, r, id)
	s := repo.Stream{SessionID: id, Machine: "desk", Name: repo.SessionStream}
	invs, err := r.Inventory(ctx, id, "desk")
	if err != nil {
		t.Fatal(err)
	}
	var g *repo.Generation
	for _, inv := range invs {
		if inv.Stream == s {
			g = inv.Find(old)
		}
	}
	if g == nil || len(g.Chunks) == 0 {
		t.Fatalf("no chunks listed for generation %s", old)
	}
	c := g.Chunks[len(g.Chunks)-1]
	hdr, data, err := r.GetChunk(ctx, s, old, c.Start, c.End)
	if err != nil {
		t.Fatal(err)
	}
	damaged := []byte(strings.Replace(string(data), "OLD-WORDS", "OLD-WORDZ", 1))
	if _, err := r.PutChunk(ctx, s, old, hdr, damaged, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	cache, err := search.OpenCache(filepath.Join(t.TempDir(), "search"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	for _, run := range []string{"first", "second"} {
		got, rep := grepAll(t, r, "WORD", GrepOptions{Cache: cache})
		if strings.Join(got, "|") != "00000009:NEW-WORDS" {
			t.Errorf("%s search with the older copy damaged: matches %q", run, got)
		}
		if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], id) {
			t.Errorf("%s search with the older copy damaged: problems %q, want the copy named", run, rep.Problems)
		}
	}
	if _, err := r.PutChunk(ctx, s, old, hdr, data, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	got, rep := grepAll(t, r, "WORD", GrepOptions{Cache: cache})
	if len(got) != 2 || len(rep.Problems) > 0 {
		t.Errorf("once the older copy is sound again: matches %q, problems %q", got, rep.Problems)
	}
}

// retentionMidSearch is the remote as a search meets it while retention
// runs: the first read of a generation's object finds it, and every other
// object of that generation, deleted.
type retentionMidSearch struct {
	remote.Client
	gen  string
	mu   sync.Mutex
	done bool
}

func (r *retentionMidSearch) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done && strings.Contains(key, r.gen) {
		r.done = true
		for obj, err := range r.Client.List(ctx, "", remote.ListOptions{}) {
			if err != nil {
				return nil, err
			}
			if strings.Contains(obj.Key, r.gen) {
				if err := r.Client.Delete(ctx, obj.Key); err != nil {
					return nil, err
				}
			}
		}
		return nil, remote.ErrNotFound
	}
	return r.Client.Get(ctx, key, off, n)
}

// An older copy that retention removes while a search without a cache
// reads it is forgotten: the search lists the session again and finds the
// current copy's match, with no problem said.
func TestGrepOlderCopyRemovedWithoutCache(t *testing.T) {
	r := fileRemote(t)
	rc := &retentionMidSearch{Client: r.Client(), gen: olderAndNewer(t, r, "019a3000-0000-7000-8000-000000000003")}
	got, rep := grepAll(t, repo.New(rc, r.Codec()), "WORD", GrepOptions{})
	if !rc.done {
		t.Fatal("the search never read the older copy")
	}
	if strings.Join(got, "|") != "00000009:NEW-WORDS" || len(rep.Problems) > 0 {
		t.Errorf("older copy removed mid-search: matches %q, problems %q", got, rep.Problems)
	}
}

// olderAndNewer backs up session id twice on machine desk, its line
// 00000009 saying OLD-WORDS, then NEW-WORDS, and returns the older
// generation.
func olderAndNewer(t *testing.T, r *repo.Repo, id string) string {
	t.Helper()
	m := newMachine(t, r, "desk")
	rel := sessionPath("-w", id, 1)
	m.write(rel, append(synthSession(id, "/w", "t", 2), messageLine("00000009", "00000002", "user", "2026-10-07T02:00:00.000Z", "OLD-WORDS")...), base)
	m.backup()
	m.replace(rel, append(synthSession(id, "/w", "t", 2), messageLine("00000009", "00000002", "user", "2026-10-07T02:00:00.000Z", "NEW-WORDS")...), base)
	m.backup()
	h, _, err := History(context.Background(), r, id, Options{})
	if err != nil || len(h.Copies) != 2 || h.Copies[0].Current {
		t.Fatalf("history: %+v, %v", h, err)
	}
	return h.Copies[0].Generation
}
