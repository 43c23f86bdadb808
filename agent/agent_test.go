package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/repotest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/session"
	"github.com/ompsync/ompsync/store"
)

const (
	ompFile = "omp-v18-title-slot-skill-toolcalls_01a113d2.jsonl"
	ompID   = "01a113d2-be76-73c7-986b-d3ac6e3fbb83"
	ompRel  = "sessions/-.omp-work/2026-10-07T00-45-40-854Z_" + ompID + ".jsonl"
)

func entryLine(id, parent, text string) []byte {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	return []byte(fmt.Sprintf(`{"type":"message","id":%q,"parentId":%s,"timestamp":"2026-10-07T01:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":%q}]}}`+"\n", id, p, text))
}

// titleSlot builds a 256-byte title slot as omp writes it.
func titleSlot(title string) []byte {
	s := fmt.Sprintf(`{"type":"title","v":1,"title":%q,"updatedAt":"2026-10-07T02:00:00.000Z","pad":"`, title)
	s += strings.Repeat(" ", session.TitleSlotSize-len(s)-3) + "\"}\n"
	return []byte(s)
}

// 1 and 2: the first write appears whole; appends upload only the new range.
func TestFirstWriteThenAppends(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		e.writeRename(ompRel, corpus(t, ompFile))
		e.once()
		e.assertRemoteEquals(ompRel, ompID)
		first := len(e.read(ompRel))
		e.client.takePuts()

		e.appendTo(ompRel, entryLine("aaaa0001", "", "more work"))
		e.once()
		e.assertRemoteEquals(ompRel, ompID)
		chunks := chunkPuts(e.client.takePuts())
		if len(chunks) != 1 {
			t.Fatalf("append uploaded %d chunks, want 1: %v", len(chunks), chunks)
		}
		if want := repo.ChunkName(int64(first), int64(len(e.read(ompRel)))); path.Base(chunks[0]) != want {
			t.Fatalf("append uploaded %s, want only the new range %s", path.Base(chunks[0]), want)
		}

		// Nothing changed: nothing but nothing is uploaded.
		e.once()
		if p := e.client.takePuts(); len(p) != 0 {
			t.Fatalf("an unchanged tree uploaded %v", p)
		}
	})
}

func chunkPuts(keys []string) []string {
	var out []string
	for _, k := range keys {
		if _, _, ok := repo.ParseChunkName(path.Base(k)); ok {
			out = append(out, k)
		}
	}
	return out
}

// A half-written last line waits for its newline.
func TestPartialLineWaits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		e.writeRename(ompRel, corpus(t, ompFile))
		line := entryLine("aaaa0002", "", "half")
		e.appendTo(ompRel, line[:20])
		e.once()
		got, _ := e.remoteStream(ompID, repo.SessionStream)
		if !bytes.Equal(got, corpus(t, ompFile)) {
			t.Fatalf("remote has %d bytes, want only the %d settled ones", len(got), len(corpus(t, ompFile)))
		}
		e.appendTo(ompRel, line[20:])
		e.once()
		e.assertRemoteEquals(ompRel, ompID)
	})
}

// 3: the title slot is rewritten in place and a title_change appended: the
// slot travels as a head object; the file is not uploaded again.
func TestTitleSlotRewrittenInPlace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		e.writeRename(ompRel, corpus(t, ompFile))
		e.once()
		size := len(e.read(ompRel))
		e.client.takePuts()

		f, err := os.OpenFile(e.path(ompRel), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(titleSlot("Fix the flaky test"), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		e.appendTo(ompRel, []byte(`{"type":"title_change","id":"bbbb0001","parentId":null,"timestamp":"2026-10-07T02:00:00.000Z","title":"Fix the flaky test"}`+"\n"))
		e.once()
		e.assertRemoteEquals(ompRel, ompID)
		var head bool
		for _, k := range e.client.takePuts() {
			if path.Base(k) == "head" {
				head = true
			}
			if s, _, ok := repo.ParseChunkName(path.Base(k)); ok && s != int64(size) {
				t.Fatalf("title change re-uploaded %s", k)
			}
		}
		if !head {
			t.Fatal("no head object uploaded for the new title slot")
		}
		if got := e.catalogEntry(ompID).Title; got != "Fix the flaky test" {
			t.Fatalf("catalog title %q", got)
		}
		if n := len(e.generations(ompID, repo.SessionStream)); n != 1 {
			t.Fatalf("title change made %d generations, want 1", n)
		}
	})
}

// 4: a whole-file rewrite (temp file + rename), smaller and larger, starts a
// new generation and keeps the old one.
func TestWholeFileRewrite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		orig := corpus(t, ompFile)
		e.writeRename(ompRel, orig)
		e.once()

		lines := bytes.SplitAfter(orig, []byte("\n"))
		smaller := bytes.Join(append(lines[:3:3], lines[5:]...), nil) // drop two entries
		e.writeRename(ompRel, smaller)
		e.once()
		e.assertRemoteEquals(ompRel, ompID)
		gens := e.generations(ompID, repo.SessionStream)
		if len(gens) != 2 {
			t.Fatalf("%d generations after a rewrite, want 2", len(gens))
		}
		// The old generation still reassembles to the original bytes.
		old, err := repotest.ReadGeneration(t.Context(), e.repo, repo.Stream{SessionID: ompID, Machine: e.machine, Name: repo.SessionStream}, gens[0], 1<<30)
		if err != nil || !bytes.Equal(old.Data, orig) {
			t.Fatalf("old generation lost: %v", err)
		}

		larger := append(append([]byte{}, smaller...), entryLine("cccc0001", "", strings.Repeat("x", 5000))...)
		larger = bytes.Replace(larger, []byte(`"thinking_level_change"`), []byte(`"thinking_level_CHANGE"`), 1)
		e.writeRename(ompRel, larger)
		e.once()
		e.assertRemoteEquals(ompRel, ompID)
		if n := len(e.generations(ompID, repo.SessionStream)); n != 3 {
			t.Fatalf("%d generations after a second rewrite, want 3", n)
		}
	})
}

// A rename that only extends the file (same prefix, new inode) continues the
// generation instead of uploading everything again.
func TestRenameWithSamePrefixContinues(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		orig := corpus(t, ompFile)
		e.writeRename(ompRel, orig)
		e.once()
		e.client.takePuts()
		e.writeRename(ompRel, append(append([]byte{}, orig...), entryLine("dddd0001", "", "x")...))
		e.once()
		e.assertRemoteEquals(ompRel, ompID)
		if n := len(e.generations(ompID, repo.SessionStream)); n != 1 {
			t.Fatalf("%d generations, want 1", n)
		}
		if ch := chunkPuts(e.client.takePuts()); len(ch) != 1 {
			t.Fatalf("uploaded %v, want one chunk with the new line", ch)
		}
	})
}

// 5: bytes already uploaded change in place (same inode, same size): detected
// by checking, and uploaded as a new generation.
func TestInPlaceChangeDetected(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		big := corpus(t, "pi-v1-large-session_pi-mono-fixture.jsonl")
		rel := "sessions/--Users-badlogic-workspaces-pi-mono--/2025-11-20T23-33-50-805Z_d703a1a9-1b7b-4fb1-b512-c9738b1fe617.jsonl"
		id := "d703a1a9-1b7b-4fb1-b512-c9738b1fe617"
		e.writeRename(rel, big)
		e.once()

		// Change a byte far from the end (outside the tail window), same size.
		f, err := os.OpenFile(e.path(rel), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		i := len(big) / 2
		if _, err := f.WriteAt([]byte("R"), int64(i)); err != nil {
			t.Fatal(err)
		}
		f.Close()
		e.once()
		e.assertRemoteEquals(rel, id)
		if n := len(e.generations(id, repo.SessionStream)); n != 2 {
			t.Fatalf("%d generations after an in-place change, want 2", n)
		}

		// Changed in place far from the end AND appended: the tail matches,
		// so only the periodic audit catches it.
		f, _ = os.OpenFile(e.path(rel), os.O_WRONLY, 0)
		f.WriteAt([]byte("Q"), int64(i))
		f.Close()
		e.appendTo(rel, entryLine("eeee0001", "", "x"))
		e.opts.AuditInterval = 1 // every pass audits
		e.once()
		e.assertRemoteEquals(rel, id)
		if n := len(e.generations(id, repo.SessionStream)); n != 3 {
			t.Fatalf("%d generations after an audited change, want 3", n)
		}
	})
}

// 6: a move to another cwd-dir (with the header's cwd rewritten): the session
// keeps its stream and the remote records the new path.
func TestMoveToAnotherCwdDir(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		e.writeRename(ompRel, corpus(t, ompFile))
		e.once()
		moved := "sessions/-src-api/" + path.Base(ompRel)
		data := bytes.Replace(e.read(ompRel), []byte(`"cwd":"/home/ubuntu/.omp/work"`), []byte(`"cwd":"/home/ubuntu/src/api"`), 1)
		e.writeRename(moved, data)
		if err := os.Remove(e.path(ompRel)); err != nil {
			t.Fatal(err)
		}
		e.once()
		e.assertRemoteEquals(moved, ompID)
		ent := e.catalogEntry(ompID)
		if ent.Path != moved || ent.State != repo.StatePresent || ent.Cwd != "/home/ubuntu/src/api" {
			t.Fatalf("catalog after move: %+v", ent)
		}
		_, meta := e.remoteStream(ompID, repo.SessionStream)
		if meta.Path != moved {
			t.Fatalf("meta path %q, want %q", meta.Path, moved)
		}
	})
}

// 7: archive gzips the session away; recorded as archived, nothing lost.
func TestArchive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		orig := corpus(t, ompFile)
		e.writeRename(ompRel, orig)
		e.once()
		e.write("archive/"+ompRel+".gz", gzipped(orig))
		os.Remove(e.path(ompRel))
		e.once()
		if st := e.catalogEntry(ompID).State; st != repo.StateArchived {
			t.Fatalf("state %q, want archived", st)
		}
		got, _ := e.remoteStream(ompID, repo.SessionStream)
		if !bytes.Equal(got, orig) {
			t.Fatal("archived session's bytes changed on the remote")
		}
	})
}

// A session brought back from its archive to where it lived (and
// continued there) is live again: present in the catalog, its new lines
// uploaded; by the agent that saw it archived, as by a new one.
func TestArchivedSessionBackLive(t *testing.T) {
	t.Run("new agent", func(t *testing.T) { archivedBackLive(t, nil) })
	t.Run("same agent", func(t *testing.T) {
		var a *Agent
		archivedBackLive(t, func(e *env) {
			if a == nil {
				var err error
				if a, err = New(e.repo, e.opts); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { a.Close() })
			}
			if err := a.Once(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func archivedBackLive(t *testing.T, pass func(e *env)) {
	e := newEnv(t, newFileClient(t))
	if pass == nil {
		pass = func(e *env) { e.once() }
	}
	orig := corpus(t, ompFile)
	e.writeRename(ompRel, orig)
	pass(e)
	e.write("archive/"+ompRel+".gz", gzipped(orig))
	os.Remove(e.path(ompRel))
	pass(e)
	if st := e.catalogEntry(ompID).State; st != repo.StateArchived {
		t.Fatalf("state %q, want archived", st)
	}
	more := append(bytes.Clone(orig), []byte(`{"type":"message","id":"back0001","parentId":null,"timestamp":"2026-10-08T00:00:00.000Z","message":{"role":"user","content":"back"}}`+"\n")...)
	e.writeRename(ompRel, more)
	os.Remove(e.path("archive/" + ompRel + ".gz"))
	pass(e)
	if st := e.catalogEntry(ompID).State; st != repo.StatePresent {
		t.Errorf("state %q after the session came back, want present", st)
	}
	if got, _ := e.remoteStream(ompID, repo.SessionStream); !bytes.Equal(got, more) {
		t.Errorf("the remote holds %d bytes, want the %d the session has now", len(got), len(more))
	}
}

// An archive the agent never saw live is backed up from the gzip file.
func TestArchiveNeverSeenLive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		orig := corpus(t, ompFile)
		e.write("archive/"+ompRel+".gz", gzipped(orig))
		e.once()
		got, meta := e.remoteStream(ompID, repo.SessionStream)
		if !bytes.Equal(got, orig) || meta.Path != ompRel {
			t.Fatalf("archived session not backed up whole (path %q)", meta.Path)
		}
		if st := e.catalogEntry(ompID).State; st != repo.StateArchived {
			t.Fatalf("state %q, want archived", st)
		}
	})
}

// 8: delete is recorded; the remote keeps every byte.
func TestDelete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		orig := corpus(t, ompFile)
		e.writeRename(ompRel, orig)
		e.once()
		os.Remove(e.path(ompRel))
		e.once()
		if st := e.catalogEntry(ompID).State; st != repo.StateDeleted {
			t.Fatalf("state %q, want deleted", st)
		}
		got, _ := e.remoteStream(ompID, repo.SessionStream)
		if !bytes.Equal(got, orig) {
			t.Fatal("deleted session's bytes changed on the remote")
		}
	})
}

// 9: blobs go up once, by hash; artifacts are backed up append-aware.
func TestBlobsAndArtifacts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		e.writeRename(ompRel, corpus(t, ompFile))
		blob := bytes.Repeat([]byte("PNG\x00\x01"), 1000)
		sum := sha256.Sum256(blob)
		name := hex.EncodeToString(sum[:])
		e.write("blobs/"+name, blob)
		art := strings.TrimSuffix(ompRel, ".jsonl") + "/subagents/0-Explore.jsonl"
		e.write(art, corpus(t, "pi-v3-small-compactions_agent-sessions-fixture.jsonl"))
		e.write(strings.TrimSuffix(ompRel, ".jsonl")+"/bash-1.log", []byte("no newline at the end"))
		e.once()

		got, err := e.repo.GetBlob(t.Context(), name, 1<<20)
		if err != nil || !bytes.Equal(got, blob) {
			t.Fatalf("blob: %v", err)
		}
		stream := repo.ArtifactStream("subagents/0-Explore.jsonl")
		ab, meta := e.remoteStream(ompID, stream)
		if !bytes.Equal(ab, e.read(art)) || meta.Path != art {
			t.Fatalf("artifact not backed up (path %q)", meta.Path)
		}
		logb, _ := e.remoteStream(ompID, repo.ArtifactStream("bash-1.log"))
		if string(logb) != "no newline at the end" {
			t.Fatalf("tool log %q", logb)
		}
		e.client.takePuts()

		e.appendTo(art, entryLine("ffff0001", "", "subagent goes on"))
		e.once()
		puts := e.client.takePuts()
		for _, k := range puts {
			if strings.HasPrefix(k, "v1/blobs/") {
				t.Fatalf("blob uploaded twice: %v", puts)
			}
		}
		if ch := chunkPuts(puts); len(ch) != 1 {
			t.Fatalf("artifact append uploaded %v, want one chunk", ch)
		}
		ab, _ = e.remoteStream(ompID, stream)
		if !bytes.Equal(ab, e.read(art)) {
			t.Fatal("artifact append not on the remote")
		}
	})
}

// 10: bytes are bytes: malformed lines, unknown types, invalid UTF-8, a
// line five chunks long, an empty file, a file with only a title slot.
func TestOddFiles(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		// The line is five chunks long, as 20 MB is of the default 4 MiB
		// chunk; both scaled down (20 MB took two minutes under -race).
		e.opts.ChunkSize = 64 << 10
		malformed := corpus(t, "pi-v3-SYNTHETIC-malformed-and-unknown-lines_agentsview.jsonl")
		malformed = append(malformed, []byte("\xff\xfe not utf-8 {{{\n")...)
		files := map[string][]byte{
			"sessions/--Users-alice-code-my-project--/2025-01-01T10-00-00-000Z_pi-test-session-uuid.jsonl": malformed,
			"sessions/-big/2026-01-01T00-00-00-000Z_0000big0-0000-0000-0000-000000000000.jsonl": append(
				[]byte(`{"type":"session","version":3,"id":"0000big0-0000-0000-0000-000000000000","timestamp":"x","cwd":"/x"}`+"\n"),
				append(append([]byte(`{"type":"message","id":"a","text":"`), bytes.Repeat([]byte("y"), 5*64<<10)...), '"', '}', '\n')...),
			"sessions/-empty/2026-01-01T00-00-00-000Z_empty000-0000-0000-0000-000000000000.jsonl": {},
			"sessions/-slot/2026-01-01T00-00-00-000Z_slot0000-0000-0000-0000-000000000000.jsonl":  titleSlot(""),
		}
		for rel, data := range files {
			e.writeRename(rel, data)
		}
		e.once()
		for rel, data := range files {
			id, _ := store.OMP().IDFromName(rel)
			if len(data) == 0 {
				if len(e.generations(id, repo.SessionStream)) != 0 {
					t.Fatalf("empty file made objects")
				}
				continue
			}
			got, _ := e.remoteStream(id, repo.SessionStream)
			if !bytes.Equal(got, data) {
				t.Fatalf("%s: remote has %d bytes, want %d", rel, len(got), len(data))
			}
		}
	})
}

// Every corpus file survives a round trip.
func TestCorpusRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		ents, err := os.ReadDir(corpusDir)
		if err != nil {
			t.Fatal(err)
		}
		var rels []string
		for _, d := range ents {
			if !strings.HasSuffix(d.Name(), ".jsonl") {
				continue
			}
			data := corpus(t, d.Name())
			h, _, err := session.ReadHeader(data)
			if err != nil {
				t.Fatalf("%s: %v", d.Name(), err)
			}
			rel := "sessions/-corpus/2026-01-01T00-00-00-000Z_" + h.ID + ".jsonl"
			e.writeRename(rel, data)
			rels = append(rels, rel)
		}
		e.once()
		for _, rel := range rels {
			id, _ := store.OMP().IDFromName(rel)
			e.assertRemoteEquals(rel, id)
		}
	})
}

// Never: credentials, local databases, locks, temp files.
func TestIgnoredFiles(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		e.write("auth.json", []byte(`{"token":"SECRET"}`))
		e.write("agent.db", []byte("SQLite"))
		e.write("sessions/-x/.2026_x.jsonl.lock", []byte("1"))
		e.write("sessions/-x/a.jsonl.tmp", []byte("1\n"))
		e.write("sessions/-x/a.jsonl.bak", []byte("1\n"))
		e.once()
		for _, k := range e.client.takePuts() {
			if !strings.HasPrefix(k, "v1/machines/") && k != repo.MarkerKey {
				t.Fatalf("uploaded %s", k)
			}
		}
	})
}

// A second agent on the same state dir refuses to start.
func TestSecondAgentRefused(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_, err = New(e.repo, e.opts)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), e.stateDir) {
		t.Fatalf("second agent: %v", err)
	}
}

// dropClient acknowledges puts of keys that match drop without storing them,
// as a faulty server or a lifecycle rule racing the upload would.
type dropClient struct {
	remote.Client
	drop func(key string) bool
}

func (d dropClient) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	if d.drop(key) {
		return nil
	}
	return d.Client.Put(ctx, key, data, opts)
}

func (d dropClient) PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts remote.PutOptions) error {
	if d.drop(key) {
		return nil
	}
	return d.Client.PutReader(ctx, key, r, size, opts)
}

// A remote that acknowledged an upload and lost the object: the reconcile
// notices with one LIST and uploads it again.
func TestLostObjectUploadedAgain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		dropped := 0
		e := newEnv(t, dropClient{c, func(key string) bool {
			if _, _, ok := repo.ParseChunkName(path.Base(key)); ok && dropped == 0 && !strings.Contains(key, "/0000000000000000-") {
				dropped++
				return true
			}
			return false
		}})
		e.writeRename(ompRel, corpus(t, ompFile))
		e.once()
		e.appendTo(ompRel, entryLine("abcd0001", "", "work that must not be lost"))
		e.once() // the chunk is dropped; the same pass's reconcile notices
		if dropped != 1 {
			t.Fatal("nothing dropped")
		}
		e.once() // and uploads it again
		e.assertRemoteEquals(ompRel, ompID)

		// An object lost after it was confirmed, the file unchanged since:
		// one agent --once finds it and puts it again, though the daily
		// audit is not due (a one-shot run answers for the remote as it
		// is now).
		gen := e.generations(ompID, repo.SessionStream)[0].Name
		s := repo.Stream{SessionID: ompID, Machine: e.machine, Name: repo.SessionStream}
		if err := c.Delete(t.Context(), s.ChunkKey(gen, 0, int64(len(corpus(t, ompFile))))); err != nil {
			t.Fatal(err)
		}
		e.opts.AuditInterval = 24 * time.Hour
		e.once()
		e.assertRemoteEquals(ompRel, ompID)
	})
}

// Archiving keeps the mtime the session had while live in the catalog, so a
// restored session sorts where it was.
func TestArchiveKeepsLiveMtime(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	orig := corpus(t, ompFile)
	e.writeRename(ompRel, orig)
	live := time.Date(2026, 10, 7, 1, 2, 3, 0, time.UTC)
	if err := os.Chtimes(e.path(ompRel), live, live); err != nil {
		t.Fatal(err)
	}
	e.once()
	e.write("archive/"+ompRel+".gz", gzipped(orig))
	os.Remove(e.path(ompRel))
	e.once()
	if got := e.catalogEntry(ompID); got.State != repo.StateArchived || !got.Mtime.Equal(live) {
		t.Fatalf("archived entry: state %s mtime %v, want archived %v", got.State, got.Mtime, live)
	}
}

// include and exclude narrow what is backed up.
func TestIncludeExclude(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	e.opts.Include = []string{"sessions/-keep*"}
	e.opts.Exclude = []string{"sessions/-keep-secret"}
	data := corpus(t, "pi-v3-small-compactions_agent-sessions-fixture.jsonl")
	e.writeRename("sessions/-keep/2026-01-01T00-00-00-000Z_a.jsonl", data)
	e.writeRename("sessions/-keep-secret/2026-01-01T00-00-00-000Z_b.jsonl", bytes.Replace(data, []byte("019e19b4"), []byte("029e19b4"), 1))
	e.writeRename("sessions/-other/2026-01-01T00-00-00-000Z_c.jsonl", bytes.Replace(data, []byte("019e19b4"), []byte("039e19b4"), 1))
	e.once()
	// Each backed-up session's first chunk (which, in format 2, carries
	// its meta).
	var sessions []string
	for _, k := range chunkPuts(e.client.takePuts()) {
		if ref, err := repo.ParseSessionKey(k); err == nil && ref.Start == 0 && ref.Stream.Name == repo.SessionStream {
			sessions = append(sessions, ref.Stream.SessionID[:8])
		}
	}
	if strings.Join(sessions, ",") != "019e19b4" {
		t.Fatalf("backed up sessions %v, want only the included one", sessions)
	}
}

// A plain rename into another cwd-dir (same bytes, same inode) updates the
// recorded path without uploading the file again.
func TestPlainMove(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		e := newEnv(t, c)
		e.writeRename(ompRel, corpus(t, ompFile))
		e.once()
		e.client.takePuts()
		moved := "sessions/-elsewhere/" + path.Base(ompRel)
		os.MkdirAll(path.Dir(e.path(moved)), 0o700)
		if err := os.Rename(e.path(ompRel), e.path(moved)); err != nil {
			t.Fatal(err)
		}
		e.once()
		if ch := chunkPuts(e.client.takePuts()); len(ch) != 0 {
			t.Fatalf("a rename uploaded %v", ch)
		}
		_, meta := e.remoteStream(ompID, repo.SessionStream)
		if meta.Path != moved || e.catalogEntry(ompID).Path != moved {
			t.Fatalf("meta path %q, catalog path %q, want %q", meta.Path, e.catalogEntry(ompID).Path, moved)
		}
	})
}

// The remote loses a chunk, and by the time the reconcile notices, the file
// no longer holds what was uploaded (edited in place meanwhile): the lost
// range cannot be filled from it, so a new generation takes the whole file,
// and no generation ever mixes bytes of two versions of the file.
func TestLostObjectFileChangedSince(t *testing.T) {
	c := newFileClient(t)
	var e *env
	drop := false
	e = newEnv(t, dropClient{c, func(key string) bool {
		if _, _, ok := repo.ParseChunkName(path.Base(key)); !ok || !drop {
			return false
		}
		drop = false
		// While the put is lost, a byte of the uploaded part changes in
		// place, size and mtime kept.
		fi, err := os.Stat(e.path(ompRel))
		if err != nil {
			t.Error(err)
			return true
		}
		f, err := os.OpenFile(e.path(ompRel), os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return true
		}
		f.WriteAt([]byte("X"), 300)
		f.Close()
		os.Chtimes(e.path(ompRel), fi.ModTime(), fi.ModTime())
		return true
	}})
	e.writeRename(ompRel, corpus(t, ompFile))
	e.once()
	e.appendTo(ompRel, entryLine("abcd0001", "", "appended, then lost"))
	drop = true
	e.once() // the put is lost; the same pass's reconcile notices
	e.once()
	e.assertRemoteEquals(ompRel, ompID)
	e.assertGenerationsRead(ompID)
}

// The agent is killed (or its disk is full) after uploading and before
// saving its state, with the file rewritten meanwhile: the next run starts
// from an older state. It must not continue the old generation beside
// bytes it no longer knows of, nor leave the newer generation, which
// readers take, short.
func TestStaleStateAfterUnsavedUploads(t *testing.T) {
	c := newFileClient(t)
	e := newEnv(t, c)
	e.writeRename(ompRel, corpus(t, ompFile))
	e.once()
	saved := t.TempDir()
	if err := os.CopyFS(saved, os.DirFS(e.stateDir)); err != nil {
		t.Fatal(err)
	}
	// A run the state forgets: an append, then a rewrite that keeps the
	// bytes the old state knew and changes the appended line.
	e.appendTo(ompRel, entryLine("abcd0001", "", "first version"))
	e.once()
	data := e.read(ompRel)
	rewritten := append(data[:len(corpus(t, ompFile))], entryLine("abcd0001", "", "second version, longer")...)
	e.writeRename(ompRel, rewritten)
	e.once()
	if err := os.RemoveAll(e.stateDir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(e.stateDir, os.DirFS(saved)); err != nil {
		t.Fatal(err)
	}
	e.appendTo(ompRel, entryLine("abcd0002", "abcd0001", "after the restart"))
	e.once()
	e.assertRemoteEquals(ompRel, ompID)
	e.assertGenerationsRead(ompID)
}

// The remote cannot be listed when a stream loaded from the state is
// checked before its first upload: the sync fails and is tried again, it
// does not guess (no upload, no new generation); once the remote answers,
// the same generation goes on.
func TestStaleCheckWaitsForTheRemote(t *testing.T) {
	c := newFileClient(t)
	down := false
	e := newEnv(t, junkLister{c, func(string) []remote.ObjectInfo {
		if down {
			return []remote.ObjectInfo{{Key: "\x00"}}
		}
		return nil
	}})
	e.writeRename(ompRel, corpus(t, ompFile))
	e.once()
	gen := e.generations(ompID, repo.SessionStream)[0].Name
	e.appendTo(ompRel, entryLine("abcd0001", "", "after the restart"))
	down = true
	e.client.takePuts()
	if err := e.tryOnce(); err == nil {
		t.Fatal("a pass that could not check the remote copy succeeded")
	}
	if puts := chunkPuts(e.client.takePuts()); len(puts) > 0 {
		t.Fatalf("uploaded %q without checking the remote copy", puts)
	}
	down = false
	e.once()
	e.assertRemoteEquals(ompRel, ompID)
	if gens := e.generations(ompID, repo.SessionStream); len(gens) != 1 || gens[0].Name != gen {
		t.Fatalf("generations %v, want only %s", gens, gen)
	}
}
