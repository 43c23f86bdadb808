package restore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/session"
)

// putSession uploads data as one generation of a machine's session stream,
// cut into chunks at the given offsets, exactly as the agent would. It is
// how the hostile remotes below start before they are damaged.
func putSession(t *testing.T, r *repo.Repo, machine, id, rel string, data []byte, cuts ...int64) (repo.Stream, string) {
	t.Helper()
	ctx := context.Background()
	s := repo.Stream{SessionID: id, Machine: machine, Name: repo.SessionStream}
	gen := repo.NewGeneration(base.UnixNano())
	hashFrom := int64(session.SlotLen(data))
	h := sha256.New()
	bounds := append(append([]int64{0}, cuts...), int64(len(data)))
	for i := 0; i+1 < len(bounds); i++ {
		a, b := bounds[i], bounds[i+1]
		chunk := data[a:b]
		if from := hashFrom - a; from < int64(len(chunk)) {
			h.Write(chunk[max(from, 0):])
		}
		hdr := repo.ChunkHeader{Start: a, End: b, HashFrom: hashFrom, SHA256: repo.HashHex(chunk), StreamSHA256: hex.EncodeToString(h.Sum(nil))}
		if _, err := r.PutChunk(ctx, s, gen, hdr, chunk, remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	m := repo.Meta{SessionID: id, Machine: machine, Stream: repo.SessionStream, Generation: gen, Path: rel, HashFrom: hashFrom, Created: base}
	if err := r.PutMeta(ctx, s, m); err != nil {
		t.Fatal(err)
	}
	return s, gen
}

func putCatalog(t *testing.T, r *repo.Repo, machine string, entries ...repo.CatalogEntry) {
	t.Helper()
	if _, err := r.PutCatalog(context.Background(), repo.Catalog{Machine: machine, Sessions: entries}); err != nil {
		t.Fatal(err)
	}
}

func putRaw(t *testing.T, r *repo.Repo, key string, plain []byte) {
	t.Helper()
	sealed, err := repo.NewZstd().Seal(plain)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Client().Put(context.Background(), key, sealed, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// smallSession is a valid session file of three lines; cut are the offsets
// of its line boundaries.
func smallSession(id string, extra string) ([]byte, []int64) {
	lines := []string{
		`{"type":"session","version":3,"id":"` + id + `","timestamp":"2026-10-07T00:45:40.000Z","cwd":"/home/u/w"}` + "\n",
		entry("aaaa0001", "", base, "first"),
		entry("aaaa0002", "aaaa0001", base.Add(1), "second"+extra),
	}
	var cuts []int64
	n := 0
	for _, l := range lines[:len(lines)-1] {
		n += len(l)
		cuts = append(cuts, int64(n))
	}
	return []byte(strings.Join(lines, "")), cuts
}

// Each kind of damage the issue lists: that session is refused with a clear
// error and nothing is written for it; the good session beside it is
// restored; the restore reports failure.
func TestRestoreRefusesHostileRemote(t *testing.T) {
	f := corpus(t)[4]
	goodRel := sessionPath("-w", f.id, 1)
	blobBytes := []byte("the real blob")
	blobName := repo.HashHex(blobBytes)

	type env struct {
		r    *repo.Repo
		s    repo.Stream
		gen  string
		data []byte
		cuts []int64
	}
	chunkKey := func(e env, i int) string {
		bounds := append(append([]int64{0}, e.cuts...), int64(len(e.data)))
		return e.s.ChunkKey(e.gen, bounds[i], bounds[i+1])
	}
	for _, tc := range []struct {
		name    string
		extra   string // added to the session's last line
		path    string // the catalog's path, when not the usual one
		size    int64  // the catalog's size, when not the real one
		damage  func(t *testing.T, e env)
		wantErr string
	}{
		{name: "chunk hash", wantErr: "sha256 mismatch", damage: func(t *testing.T, e env) {
			a, b := e.cuts[0], e.cuts[1]
			bad := []byte(strings.Replace(string(e.data[a:b]), "first", "FIRST", 1))
			putRaw(t, e.r, chunkKey(e, 1), repo.EncodeChunk(repo.ChunkHeader{Start: a, End: b, HashFrom: 0, SHA256: repo.HashHex(e.data[a:b]), StreamSHA256: "x"}, bad))
		}},
		{name: "stream hash", wantErr: "stream hash mismatch", damage: func(t *testing.T, e env) {
			a, b := e.cuts[0], e.cuts[1]
			bad := []byte(strings.Replace(string(e.data[a:b]), "first", "FIRST", 1))
			putRaw(t, e.r, chunkKey(e, 1), repo.EncodeChunk(repo.ChunkHeader{Start: a, End: b, SHA256: repo.HashHex(bad), StreamSHA256: strings.Repeat("0", 64)}, bad))
		}},
		{name: "gap", wantErr: "gap in stream", damage: func(t *testing.T, e env) {
			if err := e.r.Client().Delete(context.Background(), chunkKey(e, 1)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "decompression bomb", wantErr: "decompression bomb", damage: func(t *testing.T, e env) {
			putRaw(t, e.r, chunkKey(e, 1), make([]byte, 32<<20))
		}},
		{name: "far larger than recorded", wantErr: "allowed (what its catalog records, with slack)", damage: func(t *testing.T, e env) {
			n := int64(len(e.data))
			putRaw(t, e.r, e.s.ChunkKey(e.gen, n, n+64<<20), []byte("never read"))
		}},
		{name: "catalog claims 1 TiB", size: 1 << 40, wantErr: "of the 1099511627776 its catalog records"},
		{name: "catalog and listing claim 1 TiB", size: 1 << 40, wantErr: "more than the 1073741824 allowed (the local limit of a stream)", damage: func(t *testing.T, e env) {
			n := int64(len(e.data))
			putRaw(t, e.r, e.s.ChunkKey(e.gen, n, 1<<40), []byte("never read"))
		}},
		{name: "chunk key past the chunk limit", size: 100 << 20, wantErr: "a chunk may hold", damage: func(t *testing.T, e env) {
			n := int64(len(e.data))
			putRaw(t, e.r, e.s.ChunkKey(e.gen, n, n+80<<20), make([]byte, 80<<20))
		}},
		{name: "reference past the chunk limit", size: 100 << 20, wantErr: "a chunk may hold", damage: func(t *testing.T, e env) {
			n := int64(len(e.data))
			putRaw(t, e.r, e.s.ChunkKey(e.gen, n, n+80<<20), repo.EncodeChunk(repo.ChunkHeader{Start: n, End: n + 80<<20, SHA256: strings.Repeat("0", 64), Ref: &repo.ChunkSource{Machine: "evil", Generation: e.gen}}, nil))
		}},
		{name: "object larger than its range", wantErr: "larger than", damage: func(t *testing.T, e env) {
			junk := make([]byte, 4<<20)
			rand.Read(junk)
			if err := e.r.Client().Put(context.Background(), chunkKey(e, 1), junk, remote.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "catalog path outside sessions", path: "auth.json", wantErr: "not a session file"},
		{name: "catalog path hidden", path: "sessions/-w/.x.jsonl", wantErr: "not a session file"},
		{name: "artifact key escapes", wantErr: "unsafe artifact path", damage: func(t *testing.T, e env) {
			putRaw(t, e.r, "v1/sessions/"+e.s.SessionID+"/evil/artifacts/..%2F..%2F..%2Fetc%2Fcron.d%2Fx/"+e.gen+"/meta", []byte("{}"))
		}},
		{name: "artifact key with backslashes", wantErr: "unsafe artifact path", damage: func(t *testing.T, e env) {
			putRaw(t, e.r, "v1/sessions/"+e.s.SessionID+"/evil/artifacts/..%5C..%5Cx/"+e.gen+"/meta", []byte("{}"))
		}},
		{name: "header names another session", wantErr: "header names session", damage: func(t *testing.T, e env) {
			other := []byte(strings.Replace(string(e.data), e.s.SessionID, f.id, 1))
			e.r.Client().Delete(context.Background(), chunkKey(e, 0))
			e.r.Client().Delete(context.Background(), chunkKey(e, 1))
			e.r.Client().Delete(context.Background(), chunkKey(e, 2))
			putSession(t, e.r, "evil", e.s.SessionID, "sessions/-w/x.jsonl", other)
		}},
		{name: "blob content", extra: " blob:sha256:" + blobName, wantErr: "does not match its sha256", damage: func(t *testing.T, e env) {
			putRaw(t, e.r, repo.BlobKey(blobName), []byte("not the real blob"))
		}},
		{name: "reference loop", wantErr: "reference chain", damage: func(t *testing.T, e env) {
			a, b := e.cuts[0], e.cuts[1]
			putRaw(t, e.r, chunkKey(e, 1), repo.EncodeChunk(repo.ChunkHeader{Start: a, End: b, SHA256: repo.HashHex(e.data[a:b]), Ref: &repo.ChunkSource{Machine: "evil", Generation: e.gen}}, nil))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fileRemote(t)
			good := newMachine(t, r, "laptop")
			good.write(goodRel, f.data, base)
			good.backup()

			id := fmt.Sprintf("0bad0000-0000-7000-8000-%012d", len(tc.name))
			rel := sessionPath("-w", id, 2)
			data, cuts := smallSession(id, tc.extra)
			s, gen := putSession(t, r, "evil", id, rel, data, cuts...)
			path, size := rel, int64(len(data))
			if tc.path != "" {
				path = tc.path
			}
			if tc.size != 0 {
				size = tc.size
			}
			putCatalog(t, r, "evil", repo.CatalogEntry{ID: id, Path: path, Generation: gen, Size: size, Mtime: base, State: repo.StatePresent, Changed: base})
			if tc.damage != nil {
				tc.damage(t, env{r: r, s: s, gen: gen, data: data, cuts: cuts})
			}

			to := t.TempDir()
			rep, err := Run(context.Background(), r, nil, Options{All: true, AgentDir: to})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() {
				t.Fatalf("hostile remote restored OK: %+v", rep)
			}
			byID := map[string]Result{}
			for _, res := range rep.Results {
				byID[res.ID] = res
			}
			if res := byID[f.id]; res.Action != Created {
				t.Errorf("good session: %+v", res)
			}
			res := byID[id]
			if res.Action != Refused || !strings.Contains(res.Error, tc.wantErr) {
				t.Fatalf("hostile session: %s %q, want refused with %q", res.Action, res.Error, tc.wantErr)
			}
			if !strings.Contains(res.Error, id) {
				t.Errorf("error does not name the session: %q", res.Error)
			}
			holdsOnly(t, to, "sessions sessions/-w "+goodRel)
		})
	}
}

// holdsOnly checks that dir holds exactly the paths in want (sorted,
// space-separated).
func holdsOnly(t *testing.T, dir, want string) {
	t.Helper()
	var files []string
	for p := range snapshot(t, dir) {
		files = append(files, p)
	}
	sort.Strings(files)
	if strings.Join(files, " ") != want {
		t.Errorf("agent dir holds %q, want only %q", files, want)
	}
}

// A meta object naming a path outside the agent dir: restore does not read
// meta (the catalog names where a session goes, and is checked), so it
// restores the session where the catalog says and writes nothing else;
// verify, which reads every object, reports the meta as damage.
func TestHostileMetaPath(t *testing.T) {
	r := fileRemote(t)
	id := "0bad0000-0000-7000-8000-00000000beef"
	rel := sessionPath("-w", id, 2)
	data, cuts := smallSession(id, "")
	s, gen := putSession(t, r, "evil", id, rel, data, cuts...)
	putCatalog(t, r, "evil", repo.CatalogEntry{ID: id, Path: rel, Generation: gen, Size: int64(len(data)), Mtime: base, State: repo.StatePresent, Changed: base})
	m := repo.Meta{SessionID: id, Machine: "evil", Stream: repo.SessionStream, Generation: gen, Path: "../../../../tmp/x.jsonl"}
	if err := r.PutMeta(context.Background(), s, m); err != nil {
		t.Fatal(err)
	}
	to := t.TempDir()
	rep, err := Run(context.Background(), r, nil, Options{All: true, AgentDir: to})
	if err != nil || !rep.OK() || rep.Results[0].Path != rel {
		t.Fatalf("restore: %+v, %v", rep, err)
	}
	holdsOnly(t, to, "sessions sessions/-w "+rel)
	checks, _, err := Verify(context.Background(), r, nil, Options{AgentDir: to})
	if err != nil || len(checks) != 1 || checks[0].OK() || !strings.Contains(strings.Join(checks[0].Problems, " "), "unsafe path") {
		t.Fatalf("verify: %+v, %v; want the unsafe meta path reported", checks, err)
	}
}

// A catalog entry with an unsafe session id or path is refused (the rest of
// that catalog and the other machines' sessions go on) and the restore
// reports failure.
func TestRestoreRefusesUnsafeCatalog(t *testing.T) {
	for _, e := range []repo.CatalogEntry{
		{ID: "../../etc", Path: "sessions/-w/x.jsonl", State: repo.StatePresent},
		{ID: "ok-id", Path: "sessions/../../x.jsonl", State: repo.StatePresent},
		{ID: "ok-id", Path: "/etc/passwd", State: repo.StatePresent},
		{ID: "ok-id", Path: "sessions/-w\\..\\x.jsonl", State: repo.StatePresent},
		{ID: "ok\x00id", Path: "sessions/-w/x.jsonl", State: repo.StatePresent},
	} {
		t.Run(fmt.Sprintf("%q %q", e.ID, e.Path), func(t *testing.T) {
			r := fileRemote(t)
			f := corpus(t)[4]
			good := newMachine(t, r, "laptop")
			good.write(sessionPath("-w", f.id, 1), f.data, base)
			good.backup()
			// Written raw: EncodeCatalog would not produce it, a hostile
			// remote would.
			putRaw(t, r, repo.CatalogKey("evil"), []byte(fmt.Sprintf(`{"v":1,"machine":"evil","sessions":[{"id":%q,"path":%q,"generation":"","size":1,"state":"present"}]}`, e.ID, e.Path)))
			to := t.TempDir()
			rep, err := Run(context.Background(), r, nil, Options{All: true, AgentDir: to})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "evil") {
				t.Fatalf("report %+v", rep)
			}
			if len(rep.Results) != 1 || rep.Results[0].Action != Created {
				t.Fatalf("good session: %+v", rep.Results)
			}
			if n := len(snapshot(t, to)); n != 3 {
				t.Errorf("%d files and folders written, want the good session's 3", n)
			}
		})
	}
}

// Nothing in the agent dir is ever replaced by a file it did not read: a
// hostile catalog that gives a session the path of another local file
// cannot overwrite it.
func TestRestoreNeverReplacesAnotherFile(t *testing.T) {
	r := fileRemote(t)
	id := "0bad0000-0000-7000-8000-000000000042"
	data, cuts := smallSession(id, "")
	victim := "sessions/-w/victim.jsonl"
	_, gen := putSession(t, r, "evil", id, victim, data, cuts...)
	putCatalog(t, r, "evil", repo.CatalogEntry{ID: id, Path: victim, Generation: gen, Size: int64(len(data)), Mtime: base, State: repo.StatePresent})
	m := newMachine(t, r, "laptop")
	mine := []byte("not an omp session, but the user's\n")
	m.write(victim, mine, base)
	rep, err := m.restore([]string{id}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || !strings.Contains(rep.Results[0].Error, "not replacing") {
		t.Fatalf("%+v", rep.Results)
	}
	if got := m.read(victim); string(got) != string(mine) {
		t.Fatalf("victim file overwritten")
	}
	if _, err := os.Stat(m.path(victim)); err != nil {
		t.Fatal(err)
	}
}

// verify reports what restore refuses: a copy shorter than its catalog
// records (the tail is lost), and a blob whose bytes are not its name, on a
// line that names the session.
func TestVerifyReportsWhatRestoreRefuses(t *testing.T) {
	r := fileRemote(t)
	id := "0bad0000-0000-7000-8000-00000000c0de"
	rel := sessionPath("-w", id, 2)
	blob := repo.HashHex([]byte("the real blob"))
	data, cuts := smallSession(id, " blob:sha256:"+blob)
	_, gen := putSession(t, r, "evil", id, rel, data, cuts...)
	putCatalog(t, r, "evil", repo.CatalogEntry{ID: id, Path: rel, Generation: gen, Size: int64(len(data)) + 1000, Mtime: base, State: repo.StatePresent, Changed: base})
	putRaw(t, r, repo.BlobKey(blob), []byte("not the real blob"))
	checks, _, err := Verify(context.Background(), r, nil, Options{AgentDir: t.TempDir()})
	if err != nil || len(checks) != 1 {
		t.Fatalf("verify: %+v, %v", checks, err)
	}
	var short, wrongBlob bool
	for _, p := range checks[0].Problems {
		short = short || strings.Contains(p, id) && strings.Contains(p, fmt.Sprintf("holds %d bytes of the %d its catalog records", len(data), len(data)+1000))
		wrongBlob = wrongBlob || strings.Contains(p, id) && strings.Contains(p, "blob "+blob+": content does not match its sha256")
	}
	if !short || !wrongBlob {
		t.Fatalf("problems %q: want the short copy and the wrong blob, each naming the session", checks[0].Problems)
	}
}

// Asking for a session that a catalog names unsafely (so it was dropped)
// says why it is not found.
func TestRestoreNamesWhyASessionIsNotFound(t *testing.T) {
	r := fileRemote(t)
	id := "0bad0000-0000-7000-8000-0000000000aa"
	putRaw(t, r, repo.CatalogKey("evil"), []byte(fmt.Sprintf(`{"v":1,"machine":"evil","sessions":[{"id":%q,"path":"sessions/../../x.jsonl","generation":"","size":1,"state":"present"}]}`, id)))
	_, err := Run(context.Background(), r, []string{id}, Options{AgentDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "no session id starts with") || !strings.Contains(err.Error(), id+" has unsafe path") {
		t.Fatalf("restore of a session its catalog names unsafely: %v", err)
	}
}
