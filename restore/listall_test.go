package restore

import (
	"context"
	"errors"
	"iter"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// listRecorder records the prefixes listed; with failAll, a listing of
// every session fails (the restore then lists each session alone).
type listRecorder struct {
	remote.Client
	failAll bool
	mu      sync.Mutex
	lists   []string
}

func (c *listRecorder) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	if opts.Delimiter == "" { // a listing of objects, not of names (verify's of the session ids)
		c.mu.Lock()
		c.lists = append(c.lists, prefix)
		c.mu.Unlock()
	}
	if c.failAll && prefix == repo.SessionsPrefix() {
		return func(yield func(remote.ObjectInfo, error) bool) {
			yield(remote.ObjectInfo{}, &remote.Error{Op: "list", Key: prefix, Err: errors.New("500 Internal Error")})
		}
	}
	return c.Client.List(ctx, prefix, opts)
}

// count is how many listings were of every session, and of one session.
func (c *listRecorder) count() (all, one int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.lists {
		switch {
		case p == repo.SessionsPrefix():
			all++
		case strings.HasPrefix(p, repo.SessionsPrefix()):
			one++
		}
	}
	return all, one
}

// restore --all plans from one listing of every session, and restores
// exactly what planning from one listing per session restores (which it
// falls back to when that listing fails).
func TestRestoreAllListsSessionsOnce(t *testing.T) {
	r := fileRemote(t)
	src := newMachine(t, r, "laptop")
	other := newMachine(t, r, "desktop")
	files := corpus(t)
	for i, f := range files {
		rel := sessionPath("-w", f.id, i)
		src.write(rel, f.data, base)
		if i%2 == 0 {
			// The other machine has an older copy of some.
			other.write(rel, f.data[:len(f.data)/2+strings.IndexByte(string(f.data[len(f.data)/2:]), '\n')+1], base)
		}
		if i == 1 {
			src.write(strings.TrimSuffix(rel, ".jsonl")+"/tool-1.log", []byte("a log"), base)
		}
	}
	src.backup()
	other.backup()

	run := func(failAll bool) (*Report, map[string]fileState, *listRecorder) {
		t.Helper()
		rec := &listRecorder{Client: r.Client(), failAll: failAll}
		to := t.TempDir()
		rep, err := Run(context.Background(), repo.New(rec, repo.NewZstd()), nil, Options{All: true, AgentDir: to})
		if err != nil || !rep.OK() {
			t.Fatalf("failAll %v: %v %+v", failAll, err, rep)
		}
		return rep, snapshot(t, to), rec
	}
	repAll, treeAll, rec := run(false)
	if all, one := rec.count(); all != 1 || one != 0 {
		t.Errorf("--all listed every session %d times and single sessions %d times, want once and never", all, one)
	}
	repOne, treeOne, rec := run(true)
	if all, one := rec.count(); all != 1 || one != len(files) {
		t.Errorf("after a failed listing of every session: %d listings of one session, want %d", one, len(files))
	}
	if !reflect.DeepEqual(repAll, repOne) {
		t.Errorf("one listing and a listing per session restore differently:\n%+v\n%+v", repAll, repOne)
	}
	isSession := func(rel string) bool { return store.OMP().Classify(rel) == store.KindSession }
	sameTree(t, treeOne, treeAll, isSession, "sessions", "blobs")
	sameTree(t, snapshot(t, src.agentDir), treeAll, nil, "sessions")

	// verify plans the same way.
	rec = &listRecorder{Client: r.Client()}
	checks, problems, err := Verify(context.Background(), repo.New(rec, repo.NewZstd()), nil, Options{AgentDir: src.agentDir})
	if err != nil || len(problems) > 0 || len(checks) != len(files) {
		t.Fatalf("verify: %v %v %d checks", err, problems, len(checks))
	}
	for _, c := range checks {
		if !c.OK() {
			t.Errorf("verify %s: %v", c.ID, c.Problems)
		}
	}
	if all, one := rec.count(); all != 1 || one != 0 {
		t.Errorf("verify listed every session %d times and single sessions %d times", all, one)
	}

	// A few sessions among many are listed one by one.
	rec = &listRecorder{Client: r.Client()}
	rep, err := Run(context.Background(), repo.New(rec, repo.NewZstd()), []string{files[0].id}, Options{AgentDir: t.TempDir()})
	if err != nil || !rep.OK() {
		t.Fatalf("%v %+v", err, rep)
	}
	if all, one := rec.count(); all != 0 || one != 1 {
		t.Errorf("one session: %d listings of every session, %d of one, want 0 and 1", all, one)
	}
}

// A damaged chunk is refused on the path that lists every session at once
// and reads each byte hashed once: the bytes of a generation's only chunk,
// whose stream hash is not checked, and of a later chunk, whose own hash is
// not checked unless the stream hash fails.
func TestRestoreAllRefusesDamagedChunks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks int // 1: the only chunk; 3: the second of three
	}{{"only chunk", 1}, {"later chunk", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			r := fileRemote(t)
			f := corpus(t)[4]
			good := newMachine(t, r, "laptop")
			goodRel := sessionPath("-w", f.id, 1)
			good.write(goodRel, f.data, base)
			good.backup()

			id := "0bad0000-0000-7000-8000-00000000000" + string(rune('0'+tc.chunks))
			rel := sessionPath("-w", id, 2)
			data, cuts := smallSession(id, "")
			bounds := []int64{0, int64(len(data))}
			if tc.chunks == 3 {
				bounds = append(append([]int64{0}, cuts...), int64(len(data)))
			} else {
				cuts = nil
			}
			s, gen := putSession(t, r, "evil", id, rel, data, cuts...)
			putCatalog(t, r, "evil", repo.CatalogEntry{ID: id, Path: rel, Generation: gen, Size: int64(len(data)), Mtime: base, State: repo.StatePresent, Changed: base})
			// The chunk's bytes change; its header is the sound one.
			i := len(bounds) - 2
			if tc.chunks == 3 {
				i = 1
			}
			a, b := bounds[i], bounds[i+1]
			hdr, _, err := r.GetChunk(context.Background(), s, gen, a, b)
			if err != nil {
				t.Fatal(err)
			}
			bad := []byte(strings.Replace(string(data[a:b]), "second", "SECOND", 1))
			if tc.chunks == 3 {
				bad = []byte(strings.Replace(string(data[a:b]), "first", "FIRST", 1))
			}
			if string(bad) == string(data[a:b]) {
				t.Fatal("damage changed nothing")
			}
			putRaw(t, r, s.ChunkKey(gen, a, b), repo.EncodeChunk(hdr, bad))

			to := t.TempDir()
			rep, err := Run(context.Background(), r, nil, Options{All: true, AgentDir: to})
			if err != nil {
				t.Fatal(err)
			}
			byID := map[string]Result{}
			for _, res := range rep.Results {
				byID[res.ID] = res
			}
			if res := byID[f.id]; res.Action != Created {
				t.Errorf("good session: %+v", res)
			}
			if res := byID[id]; rep.OK() || res.Action != Refused || !strings.Contains(res.Error, "sha256 mismatch") || !strings.Contains(res.Error, id) {
				t.Fatalf("damaged session: %+v", res)
			}
			for p := range snapshot(t, to) {
				if strings.Contains(p, id) {
					t.Errorf("%s written for the damaged session", p)
				}
			}
		})
	}
}
