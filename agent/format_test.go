package agent

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// newSessions writes n small omp sessions (a header and two entries each)
// and returns their ids and paths.
func newSessions(e *env, n int) (ids, rels []string) {
	for i := range n {
		id := fmt.Sprintf("0191f2f2-0000-7000-8000-%012d", i)
		rel := fmt.Sprintf("sessions/-w/2026-10-07T00-45-40-%03dZ_%s.jsonl", i%1000, id)
		data := []byte(`{"type":"session","version":3,"id":"` + id + `","timestamp":"2026-10-07T00:45:40.000Z","cwd":"/home/u/w"}` + "\n")
		data = append(data, entryLine(fmt.Sprintf("aaaa%04d", i), "", "first")...)
		data = append(data, entryLine(fmt.Sprintf("bbbb%04d", i), fmt.Sprintf("aaaa%04d", i), "second")...)
		e.writeRename(rel, data)
		ids, rels = append(ids, id), append(rels, rel)
	}
	return ids, rels
}

// putKinds sorts put keys into session chunks, meta objects and the rest.
func putKinds(keys []string) (chunks, metas, other []string) {
	for _, k := range keys {
		switch {
		case !strings.HasPrefix(k, repo.SessionsPrefix()):
			other = append(other, k)
		case path.Base(k) == "meta":
			metas = append(metas, k)
		default:
			if _, _, ok := repo.ParseChunkName(path.Base(k)); ok {
				chunks = append(chunks, k)
			} else {
				other = append(other, k)
			}
		}
	}
	return chunks, metas, other
}

// remoteKeys lists every object under v1/sessions/.
func remoteKeys(t *testing.T, c remote.Client) []string {
	t.Helper()
	var keys []string
	for obj, err := range c.List(context.Background(), repo.SessionsPrefix(), remote.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

// Issue 17: a first backup into a fresh repository (format 2) costs one PUT
// per new session, its first chunk carrying its meta, plus the marker and
// the catalog and recent objects; no meta object is written, and every
// session reads back whole with its path.
func TestFirstBackupOnePutPerSession(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		const n = 20
		ids, rels := newSessions(e, n)
		e.once()
		puts := e.client.takePuts()
		chunks, metas, other := putKinds(puts)
		t.Logf("first backup of %d new sessions: %d PUTs (%d chunks, %d meta objects, %d others: %v)", n, len(puts), len(chunks), len(metas), len(other), other)
		if len(chunks) != n || len(metas) != 0 {
			t.Fatalf("first backup of %d sessions put %d chunks and %d meta objects, want %d and 0", n, len(chunks), len(metas), n)
		}
		for _, k := range other {
			if k != repo.MarkerKey && k != repo.CatalogKey(e.machine) && k != repo.RecentKey(e.machine) {
				t.Errorf("first backup put %s", k)
			}
		}
		if len(other) > 3 {
			t.Errorf("first backup put %d objects besides the chunks: %v", len(other), other)
		}
		m, err := e.repo.ReadMarker(context.Background())
		if err != nil || m == nil || m.Format != 2 {
			t.Fatalf("marker %+v, %v: want format 2", m, err)
		}
		if keys := remoteKeys(t, c); len(keys) != n {
			t.Fatalf("the remote holds %d session objects, want %d (one chunk each): %v", len(keys), n, keys)
		}
		for i, id := range ids {
			e.assertRemoteEquals(rels[i], id)
			if _, meta := e.remoteStream(id, repo.SessionStream); meta.Path != rels[i] || meta.SessionID != id || meta.Machine != e.machine {
				t.Fatalf("session %s: meta %+v, want path %s", id, meta, rels[i])
			}
		}
	})
}

// A session that moves after its first chunk gets a meta
// object, and its path wins over the one in the chunk.
func TestFormat2MovedSessionMetaObject(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		ctx := context.Background()
		e := newEnv(t, c)
		ids, rels := newSessions(e, 1)
		e.once()
		if _, metas, _ := putKinds(e.client.takePuts()); len(metas) != 0 {
			t.Fatalf("first backup put meta objects: %v", metas)
		}
		moved := "sessions/-src-api/" + path.Base(rels[0])
		e.writeRename(moved, e.read(rels[0]))
		if err := os.Remove(e.path(rels[0])); err != nil {
			t.Fatal(err)
		}
		e.once()
		chunks, metas, _ := putKinds(e.client.takePuts())
		if len(chunks) != 0 || len(metas) != 1 {
			t.Fatalf("the move put %d chunks and meta objects %v, want none and one", len(chunks), metas)
		}
		e.assertRemoteEquals(moved, ids[0])
		gens := e.generations(ids[0], repo.SessionStream)
		if len(gens) != 1 || !gens[0].HasMeta || gens[0].MetaInChunk {
			t.Fatalf("generations after the move: %+v", gens)
		}
		s := repo.Stream{SessionID: ids[0], Machine: e.machine, Name: repo.SessionStream}
		m, err := e.repo.GenerationMeta(ctx, s, gens[0])
		if err != nil || m.Path != moved {
			t.Fatalf("meta after the move: %+v, %v; want path %s", m, err, moved)
		}
		h, _, err := e.repo.GetChunk(ctx, s, gens[0].Name, 0, gens[0].Chunks[0].End)
		if err != nil || h.Meta == nil || h.Meta.Path != rels[0] {
			t.Fatalf("first chunk's meta %+v, %v: want the path before the move", h.Meta, err)
		}

		// The remote loses the meta object: the first chunk still makes
		// the generation complete, under the old path, so the audit's
		// listing must notice and put it again.
		if err := c.Delete(ctx, s.MetaKey(gens[0].Name)); err != nil {
			t.Fatal(err)
		}
		e.opts.AuditInterval = time.Nanosecond
		e.once()
		e.once()
		gens = e.generations(ids[0], repo.SessionStream)
		if m, err := e.repo.GenerationMeta(ctx, s, gens[0]); err != nil || gens[0].MetaInChunk || m.Path != moved {
			t.Fatalf("meta after the remote lost it: %+v, %v (%+v); want path %s", m, err, gens[0], moved)
		}
	})
}

// A session moved twice: the second meta object is put over the first,
// and a lost put of it leaves the first in place, which a listing cannot
// tell from the new one. The agent reads it back and puts it again.
func TestMovedTwiceMetaLostOverTheFirst(t *testing.T) {
	ctx := context.Background()
	c := newFileClient(t)
	drop := false
	e := newEnv(t, dropClient{c, func(key string) bool {
		if drop && path.Base(key) == "meta" {
			drop = false
			return true
		}
		return false
	}})
	ids, rels := newSessions(e, 1)
	e.once()
	from := rels[0]
	for _, dir := range []string{"-src-api", "-src-web"} {
		moved := "sessions/" + dir + "/" + path.Base(rels[0])
		e.writeRename(moved, e.read(from))
		if err := os.Remove(e.path(from)); err != nil {
			t.Fatal(err)
		}
		drop = dir == "-src-web"
		e.once()
		from = moved
	}
	if drop {
		t.Fatal("no meta put was dropped; the test did not test")
	}
	e.once()
	s := repo.Stream{SessionID: ids[0], Machine: e.machine, Name: repo.SessionStream}
	gens := e.generations(ids[0], repo.SessionStream)
	if len(gens) != 1 {
		t.Fatalf("generations: %+v, want one", gens)
	}
	if m, err := e.repo.GenerationMeta(ctx, s, gens[0]); err != nil || m.Path != from {
		t.Fatalf("meta after the lost put: path %q, %v; want %s", m.Path, err, from)
	}
}
