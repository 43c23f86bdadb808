package agent

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/faultproxy"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/internal/testkit/repotest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
)

// Bad input at the agent's doors: hostile listings, answers cut short,
// symlinks out of the agent dir, names that are not UTF-8. Each ends in a
// clear error or a clean skip, and nothing local is ever written.

// snapshot records every file under dir: bytes and modification time.
type fileSnap struct {
	data  []byte
	mtime time.Time
}

func snapshot(t *testing.T, dir string) map[string]fileSnap {
	t.Helper()
	out := map[string]fileSnap{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fileSnap{b, fi.ModTime()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSnapshot(t *testing.T, what string, before, after map[string]fileSnap) {
	t.Helper()
	for p, s := range before {
		a, ok := after[p]
		switch {
		case !ok:
			t.Errorf("%s: %s disappeared", what, p)
		case !bytes.Equal(a.data, s.data) || !a.mtime.Equal(s.mtime):
			t.Errorf("%s: %s was written", what, p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s: %s appeared", what, p)
		}
	}
}

// junkLister adds entries to every listing of the real remote, as a
// damaged or hostile server would.
type junkLister struct {
	remote.Client
	junk func(prefix string) []remote.ObjectInfo
}

func (j junkLister) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	return func(yield func(remote.ObjectInfo, error) bool) {
		for _, e := range j.junk(prefix) {
			if !yield(e, nil) {
				return
			}
		}
		for info, err := range j.Client.List(ctx, prefix, opts) {
			if !yield(info, err) {
				return
			}
		}
	}
}

// A remote whose listings hold junk under the prefix asked for (names that
// are no objects of the format, other sessions' keys, bytes that are not
// UTF-8): the agent backs up on, never crashes and never writes a local
// file; with the remote healthy again the newest copy is whole.
func TestAgentJunkListings(t *testing.T) {
	for name, junk := range map[string]func(string) []remote.ObjectInfo{
		"names of no object": func(p string) []remote.ObjectInfo {
			return []remote.ObjectInfo{{Key: p + "zzzz"}, {Key: p + "0000000000000000-ffffffffffffffff/x"}, {Key: p + "meta.bak"}}
		},
		"not UTF-8": func(p string) []remote.ObjectInfo { return []remote.ObjectInfo{{Key: p + "\xff\xfe"}} },
		"another session": func(p string) []remote.ObjectInfo {
			other := repo.Stream{SessionID: "other", Machine: "laptop", Name: repo.SessionStream}
			return []remote.ObjectInfo{{Key: p + other.ChunkKey("0000000000000001", 0, 1<<40)}}
		},
		"chunk covering everything": func(p string) []remote.ObjectInfo {
			if strings.HasSuffix(p, "/") && strings.Count(p, "/") == 7 { // a generation's prefix
				return []remote.ObjectInfo{{Key: p + repo.ChunkName(0, 1<<40), Size: 1}, {Key: p + "meta"}}
			}
			return nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := newFileClient(t)
			e := newEnv(t, junkLister{c, junk})
			e.writeRename(ompRel, corpus(t, ompFile))
			before := snapshot(t, e.agentDir)
			for range 3 {
				if err := e.tryOnce(); err != nil && strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				e.appendTo(ompRel, entryLine("j0000001", "", name))
				before = snapshot(t, e.agentDir)
			}
			if err := e.tryOnce(); err != nil {
				t.Logf("agent --once against junk listings: %v", err)
			}
			sameSnapshot(t, "agent run", before, snapshot(t, e.agentDir))

			// What the healthy remote holds is whole and verified. A
			// listing that claims more than was uploaded may leave the
			// newest bytes pending, never a damaged copy.
			healthy := newEnv(t, c)
			healthy.agentDir, healthy.opts.AgentDir = e.agentDir, e.agentDir
			healthy.stateDir, healthy.opts.StateDir = e.stateDir, e.stateDir
			healthy.once()
			healthy.assertRemoteEquals(ompRel, ompID)
		})
	}
}

// Listing entries that are not even under the prefix asked for.
func TestAgentListingOutsidePrefix(t *testing.T) {
	e := newEnv(t, junkLister{newFileClient(t), func(string) []remote.ObjectInfo { return []remote.ObjectInfo{{Key: "v1/"}} }})
	e.writeRename(ompRel, corpus(t, ompFile))
	before := snapshot(t, e.agentDir)
	_ = e.tryOnce()
	_ = e.tryOnce()
	sameSnapshot(t, "agent run", before, snapshot(t, e.agentDir))
}

// cutBodies cuts the body of the next n Gets short, as a connection that
// breaks mid-answer does.
type cutBodies struct {
	remote.Client
	mu sync.Mutex
	n  int
}

func (c *cutBodies) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	rc, err := c.Client.Get(ctx, key, off, length)
	if err != nil {
		return rc, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		return rc, nil
	}
	c.n--
	b, _ := io.ReadAll(rc)
	rc.Close()
	return io.NopCloser(io.MultiReader(bytes.NewReader(b[:len(b)/2]), errReader{io.ErrUnexpectedEOF})), nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// An answer cut short while the agent starts (reading the marker or its
// catalog) is a network failure like any other: the agent retries and
// backs up, it does not exit.
func TestAgentStartSurvivesCutAnswer(t *testing.T) {
	c := newFileClient(t)
	seed := newEnv(t, c)
	seed.writeRename(ompRel, corpus(t, ompFile))
	seed.once() // a marker and a catalog to read at start

	// The same state dir, its state lost: rebuilt from the remote.
	e := newEnv(t, &cutBodies{Client: c, n: 1})
	e.agentDir, e.opts.AgentDir = seed.agentDir, seed.agentDir
	if err := os.RemoveAll(seed.stateDir); err != nil {
		t.Fatal(err)
	}
	e.stateDir, e.opts.StateDir = seed.stateDir, seed.stateDir
	e.opts.Interval = 50 * time.Millisecond
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	seed.appendTo(ompRel, entryLine("cut00001", "", "after a broken answer"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-done:
			cancel()
			t.Fatalf("agent stopped after an answer was cut short: %v", err)
		default:
		}
		got, _ := e.remoteStreamQuiet(ompID)
		if bytes.Equal(got, seed.read(ompRel)) {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("the append never reached the remote")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

// remoteStreamQuiet is remoteStream without failing the test.
func (e *env) remoteStreamQuiet(id string) ([]byte, error) {
	r := repo.New(e.client.Client, repo.NewZstd())
	invs, err := r.Inventory(context.Background(), id, e.machine)
	if err != nil {
		return nil, err
	}
	for _, inv := range invs {
		if inv.Stream.Name == repo.SessionStream && inv.Newest() != nil {
			as, err := repotest.ReadGeneration(context.Background(), r, inv.Stream, inv.Newest(), 1<<40)
			if err != nil {
				return nil, err
			}
			return as.Data, nil
		}
	}
	return nil, errors.New("not on the remote")
}

// remoteHolds reports whether any object on the remote, opened or as
// stored, contains needle: a check that some bytes never left the machine.
func remoteHolds(t *testing.T, c remote.Client, needle []byte) bool {
	t.Helper()
	for info, err := range c.List(t.Context(), "", remote.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		rc, err := c.Get(t.Context(), info.Key, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		sealed, _ := io.ReadAll(rc)
		rc.Close()
		plain := sealed
		if info.Key != repo.MarkerKey {
			if p, err := repo.NewZstd().Open(sealed, 1<<30); err == nil {
				plain = p
			}
		}
		if bytes.Contains(plain, needle) || bytes.Contains(sealed, needle) {
			return true
		}
	}
	return false
}

// Symlinks are never followed out of the agent dir: a session file, a cwd
// folder, an artifact and a blob that are symlinks to files elsewhere are
// not backed up, and nothing they point to changes. The agent dir itself
// may be reached through a symlink.
func TestAgentSymlinksOutside(t *testing.T) {
	outside := t.TempDir()
	secret := []byte("PRIVATE-BYTES-OUTSIDE-THE-AGENT-DIR")
	outSession := filepath.Join(outside, "2026-01-01T00-00-00-000Z_0utside0-0000-0000-0000-000000000000.jsonl")
	body := append([]byte(`{"type":"session","version":3,"id":"0utside0-0000-0000-0000-000000000000","timestamp":"x","cwd":"/x"}`+"\n"), append(secret, '\n')...)
	if err := os.WriteFile(outSession, body, 0o600); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(outside, "-elsewhere")
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outDir, filepath.Base(outSession)), body, 0o600); err != nil {
		t.Fatal(err)
	}
	outBefore := snapshot(t, outside)

	c := newFileClient(t)
	e := newEnv(t, c)
	// The agent dir is a symlink to the real folder: that is followed.
	real := e.agentDir
	link := filepath.Join(t.TempDir(), "agent")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	e.agentDir, e.opts.AgentDir = link, link
	e.writeRename(ompRel, corpus(t, ompFile))
	for rel, target := range map[string]string{
		"sessions/-w/2026-01-01T00-00-00-000Z_0utside0-0000-0000-0000-000000000000.jsonl": outSession,
		"sessions/-linked-cwd": outDir,
		"sessions/-.omp-work/2026-10-07T00-45-40-854Z_" + ompID + "/linked.jsonl":                    outSession,
		"blobs/" + strings.Repeat("ab", 32):                                                          outSession,
		"archive/sessions/-w/2026-01-01T00-00-00-000Z_0utside0-0000-0000-0000-000000000000.jsonl.gz": outSession,
	} {
		p := e.path(rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	e.once()
	e.once()
	e.assertRemoteEquals(ompRel, ompID)
	if remoteHolds(t, c, secret) {
		t.Error("bytes of a file outside the agent dir reached the remote through a symlink")
	}
	sameSnapshot(t, "outside folder", outBefore, snapshot(t, outside))
}

// Names that are not UTF-8 (a cwd folder, a session file, an artifact): a
// session is known by the id in its header, so its bytes are backed up
// whole; a name that cannot be a session or blob is skipped with a warning.
func TestAgentNamesNotUTF8(t *testing.T) {
	c := newFileClient(t)
	e := newEnv(t, c)
	var logs lockedBuffer
	e.opts.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testWriter{t}), nil))
	id := "0bad0utf-8000-0000-0000-000000000000"
	sessRel := "sessions/-caf\xe9/2026-01-01T00-00-00-000Z_\xff\xfe" + id + ".jsonl"
	data := append([]byte(`{"type":"session","version":3,"id":"`+id+`","timestamp":"x","cwd":"/caf`+"\xe9"+`"}`+"\n"), entryLine("a0000001", "", "bytes \xff\xfe kept")...)
	e.writeRename(sessRel, data)
	artRel := "sessions/-.omp-work/2026-10-07T00-45-40-854Z_" + ompID + "/sub\xffagent.jsonl"
	e.writeRename(ompRel, corpus(t, ompFile))
	e.write(artRel, []byte("artifact line\n"))
	e.write("blobs/\xff\xfe", []byte("not a blob name"))
	e.once()

	got, meta := e.remoteStream(id, repo.SessionStream)
	if !bytes.Equal(got, data) {
		t.Errorf("session with a non-UTF-8 name: remote holds %d bytes, want %d", len(got), len(data))
	}
	art, _ := e.remoteStream(ompID, repo.ArtifactStream("sub\xffagent.jsonl"))
	if string(art) != "artifact line\n" {
		t.Errorf("artifact with a non-UTF-8 name: remote holds %q", art)
	}
	if !strings.Contains(logs.String(), "blob name is not a safe object name") {
		t.Errorf("blob with a non-UTF-8 name: no warning in\n%s", logs.String())
	}
	if meta.Path != sessRel {
		t.Errorf("meta records the path as %q, want %q", meta.Path, sessRel)
	}
	if c := e.catalogEntry(id); c.Path != sessRel {
		t.Errorf("the catalog records the path as %q, want %q", c.Path, sessRel)
	}
	// The saved state keeps the name too: the next run finds the file it
	// knows and uploads nothing.
	e.client.takePuts()
	e.once()
	if puts := e.client.takePuts(); len(puts) > 0 {
		t.Errorf("a second run uploaded %q", puts)
	}
}

// omp moves a session to another cwd folder and archives it before the
// agent scans again: the catalog records where the session last lived (the
// archive's folder), so restore brings it back there.
func TestAgentMovedThenArchived(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	e.writeRename(ompRel, corpus(t, ompFile))
	e.once()
	moved := "sessions/-elsewhere/" + path.Base(ompRel)
	if err := os.MkdirAll(filepath.Dir(e.path(moved)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(e.path(ompRel), e.path(moved)); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(corpus(t, ompFile))
	zw.Close()
	e.write("archive/"+moved+".gz", gz.Bytes())
	if err := os.Remove(e.path(moved)); err != nil {
		t.Fatal(err)
	}
	e.once()
	c := e.catalogEntry(ompID)
	if c.State != repo.StateArchived || c.Path != moved {
		t.Fatalf("catalog: %s at %s, want archived at %s", c.State, c.Path, moved)
	}
}

// A remote that acknowledges a put and loses the object (a lifecycle rule,
// a careless hand, a faulty server) loses nothing for good: the reconcile
// notices within a few passes and uploads it again. Chunks and meta are
// covered by TestLostObjectUploadedAgain; these are the other objects.
func TestAgentLostAcknowledgedObjects(t *testing.T) {
	blob := repo.HashHex([]byte("blob bytes"))
	t.Run("blob", func(t *testing.T) {
		c := newFileClient(t)
		drop := true
		e := newEnv(t, dropClient{c, func(key string) bool {
			if key == repo.BlobKey(blob) && drop {
				drop = false
				return true
			}
			return false
		}})
		e.write("blobs/"+blob, []byte("blob bytes"))
		for range 3 {
			e.once()
		}
		if got, err := repo.New(c, repo.NewZstd()).GetBlob(t.Context(), blob, 1<<20); err != nil || string(got) != "blob bytes" {
			t.Fatalf("blob after three passes: %q, %v", got, err)
		}
	})
	// A retitle's head put lost: the first one, or one after another
	// retitle, which leaves the head before it in place (a listing that
	// shows a head says nothing of its bytes).
	for _, tc := range []struct {
		name   string
		titles []string // the last one's put is lost
	}{
		{"head", []string{"a title the remote lost"}},
		{"head replaced", []string{"the first title", "a second title the remote lost"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFileClient(t)
			drop := false
			e := newEnv(t, dropClient{c, func(key string) bool {
				if drop && strings.HasSuffix(key, "/head") {
					drop = false
					return true
				}
				return false
			}})
			e.writeRename(ompRel, corpus(t, ompFile))
			e.once()
			for i, title := range tc.titles {
				f, err := os.OpenFile(e.path(ompRel), os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteAt(titleSlot(title), 0)
				f.Close()
				drop = i == len(tc.titles)-1
				e.once()
			}
			if drop {
				t.Fatal("no head put was dropped; the test did not test")
			}
			for range 2 {
				e.once()
			}
			e.assertRemoteEquals(ompRel, ompID)
		})
	}
	t.Run("archived session", func(t *testing.T) {
		c := newFileClient(t)
		drop := true
		e := newEnv(t, dropClient{c, func(key string) bool {
			if _, _, ok := repo.ParseChunkName(path.Base(key)); ok && drop {
				drop = false
				return true
			}
			return false
		}})
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(corpus(t, ompFile))
		zw.Close()
		e.write("archive/"+ompRel+".gz", gz.Bytes())
		for range 3 {
			e.once()
		}
		got, err := e.remoteStreamQuiet(ompID)
		if err != nil || !bytes.Equal(got, corpus(t, ompFile)) {
			t.Fatalf("archived session after three passes: %d bytes, %v; want %d", len(got), err, len(corpus(t, ompFile)))
		}
	})
	// The catalog (and the small object of its recent changes) lost after
	// the put was acknowledged: without a check, a quiet machine would stay
	// out of 'ompsync ls' and 'restore --all' elsewhere until it restarts.
	// A lost put over an older object is the same loss, though the key
	// still exists: other machines see the sessions as they were (and a
	// pull never converges).
	for _, tc := range []struct {
		name, lost string
		nth        int // which put of it is lost
	}{
		{"catalog", "catalog", 1}, {"recent", "recent", 1},
		{"catalog replaced", "catalog", 2}, {"recent replaced", "recent", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFileClient(t)
			var mu sync.Mutex
			puts := 0
			e := newEnv(t, dropClient{c, func(key string) bool {
				mu.Lock()
				defer mu.Unlock()
				if path.Base(key) != tc.lost {
					return false
				}
				puts++
				return puts == tc.nth
			}})
			e.opts.Interval = 20 * time.Millisecond
			e.opts.ReconcileInterval = 50 * time.Millisecond
			// Appends to more than 256 sessions rewrite the catalog whole.
			ids, rels := newSessions(e, 300)
			e.runAgent()
			waitFor(t, "the first catalog", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return puts >= 1
			})
			// Appends to every session rewrite the catalog whole; to one,
			// they go in the recent object.
			grown := rels
			if tc.lost == "recent" {
				grown = rels[:1]
			}
			want := map[string]int64{}
			for i, rel := range rels {
				if i < len(grown) {
					e.appendTo(rel, entryLine(fmt.Sprintf("c%07d", i), "", "in a catalog put that is lost"))
				}
				want[ids[i]] = int64(len(e.read(rel)))
			}
			waitFor(t, "the catalog to list the appends", func() bool {
				cat, err := repo.New(c, repo.NewZstd()).GetCatalog(t.Context(), "laptop")
				if err != nil || len(cat.Sessions) != len(want) {
					return false
				}
				for _, s := range cat.Sessions {
					if s.Size != want[s.ID] {
						return false
					}
				}
				return true
			})
			mu.Lock()
			defer mu.Unlock()
			if puts < tc.nth {
				t.Fatalf("%d %s puts, none dropped; the test did not test", puts, tc.lost)
			}
		})
	}
}

// An S3 server that acknowledges a chunk and drops it: the reconcile of
// the next full pass notices with one LIST of the stream's generation and
// the pass after uploads it again; a pass with nothing new costs a few
// requests, not one per object.
func TestAgentDroppedPutReconciled(t *testing.T) {
	srv := remotetest.SharedServer(t)
	for _, client := range backend.Clients("s3") {
		t.Run(client, func(t *testing.T) {
			p, err := faultproxy.Start(srv.Endpoint, faultproxy.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			c, err := backend.Open(t.Context(), "s3://"+srv.NewBucket(t), backend.S3Options{
				Client: client, Endpoint: p.URL, Region: "us-east-1", PathStyle: true,
				AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey,
			})
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, c)
			e.writeRename(ompRel, corpus(t, ompFile))
			e.once()
			var n atomic.Int64
			p.SetConfig(faultproxy.Config{DropPut: 1, Match: func(r *http.Request) bool {
				_, _, chunk := repo.ParseChunkName(path.Base(r.URL.Path))
				return r.Method == http.MethodPut && chunk && n.Add(1) == 1
			}})
			e.appendTo(ompRel, entryLine("d0000001", "", "acknowledged, then dropped"))
			e.once()
			if len(p.Dropped()) != 1 {
				t.Fatalf("dropped %q, want one chunk", p.Dropped())
			}
			passes := 0
			for ; passes < 3; passes++ {
				got, err := e.remoteStreamQuiet(ompID)
				if err == nil && bytes.Equal(got, e.read(ompRel)) {
					break
				}
				e.once()
			}
			e.assertRemoteEquals(ompRel, ompID)
			t.Logf("uploaded again after %d more passes", passes)

			before := p.Counts()
			e.once()
			after := p.Counts()
			for _, k := range []string{"list", "get", "put", "head"} {
				t.Logf("an idle pass: %d %s requests", after.ByKind[k]-before.ByKind[k], k)
			}
			if d := after.Requests - before.Requests; d > 6 {
				t.Errorf("a pass with nothing to do made %d requests (%v then %v)", d, before.ByKind, after.ByKind)
			}
		})
	}
}

// Retitles of many sessions at once, every head put lost over the head
// before it: the pass confirms them from one listing of every session,
// and still reads each head back.
func TestRetitlesLostOverHeadsOfManySessions(t *testing.T) {
	c := newFileClient(t)
	drop := false
	var mu sync.Mutex
	e := newEnv(t, dropClient{c, func(key string) bool {
		mu.Lock()
		defer mu.Unlock()
		return drop && strings.HasSuffix(key, "/head")
	}})
	var rels, ids []string
	for i := range 12 {
		rel, id := sessionRel(i)
		e.writeRename(rel, append(titleSlot(""), sessionBytes(id, 3)...))
		rels, ids = append(rels, rel), append(ids, id)
	}
	e.once()
	for _, title := range []string{"the first title", "a second title the remote lost"} {
		for _, rel := range rels {
			f, err := os.OpenFile(e.path(rel), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt(titleSlot(title), 0)
			f.Close()
		}
		mu.Lock()
		drop = title != "the first title"
		mu.Unlock()
		e.once()
	}
	mu.Lock()
	drop = false
	mu.Unlock()
	for range 2 {
		e.once()
	}
	for i, rel := range rels {
		e.assertRemoteEquals(rel, ids[i])
	}
}
