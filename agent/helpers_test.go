package agent

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/repotest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
	"github.com/ompsync/ompsync/store"
)

const corpusDir = "../testdata/corpus"

// env is one machine: an agent dir, a state dir and a remote.
type env struct {
	t        *testing.T
	agentDir string
	stateDir string
	machine  string
	client   *countingClient
	repo     *repo.Repo
	opts     Options
}

func newEnv(t *testing.T, c remote.Client) *env {
	t.Helper()
	e := &env{
		t:        t,
		agentDir: t.TempDir(),
		stateDir: t.TempDir(),
		machine:  "laptop",
		client:   &countingClient{Client: c},
	}
	e.repo = repo.New(e.client, repo.NewZstd())
	e.opts = Options{AgentDir: e.agentDir, StateDir: e.stateDir, Machine: e.machine, Logger: testLogger(t)}
	// The agent dir of a store in use: one with no sessions folder and
	// nothing else to back up is a wrong agent_dir (Once fails).
	if err := os.Mkdir(e.path("sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	return e
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// once runs one full pass with a fresh agent, as `ompsync agent --once` does.
func (e *env) once() {
	e.t.Helper()
	if err := e.tryOnce(); err != nil {
		e.t.Fatalf("agent --once: %v", err)
	}
}

func (e *env) tryOnce() error {
	a, err := New(e.repo, e.opts)
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Once(context.Background())
}

func (e *env) path(rel string) string { return filepath.Join(e.agentDir, filepath.FromSlash(rel)) }

func (e *env) write(rel string, data []byte) {
	e.t.Helper()
	p := e.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// writeRename writes like omp's first write and whole-file rewrites: a temp
// file renamed into place (a new inode).
func (e *env) writeRename(rel string, data []byte) {
	e.t.Helper()
	p := e.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		e.t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".1.tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) appendTo(rel string, data []byte) {
	e.t.Helper()
	f, err := os.OpenFile(e.path(rel), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) read(rel string) []byte {
	e.t.Helper()
	b, err := os.ReadFile(e.path(rel))
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// remoteStream reassembles the newest generation of a stream from the remote.
func (e *env) remoteStream(id, stream string) ([]byte, repo.Meta) {
	e.t.Helper()
	ctx := context.Background()
	r := repo.New(e.client.Client, repo.NewZstd())
	invs, err := r.Inventory(ctx, id, e.machine)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, inv := range invs {
		if inv.Stream.Name != stream {
			continue
		}
		g := inv.Newest()
		if g == nil {
			e.t.Fatalf("session %s stream %s: no generation with meta", id, stream)
		}
		as, err := repotest.ReadGeneration(ctx, r, inv.Stream, g, 1<<40)
		if err != nil {
			e.t.Fatalf("reassemble %s %s: %v", id, stream, err)
		}
		return as.Data, as.Meta
	}
	e.t.Fatalf("session %s stream %s: nothing on the remote", id, stream)
	return nil, repo.Meta{}
}

// generations lists a stream's generations on the remote.
func (e *env) generations(id, stream string) []*repo.Generation {
	e.t.Helper()
	invs, err := e.repo.Inventory(context.Background(), id, e.machine)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, inv := range invs {
		if inv.Stream.Name == stream {
			return inv.Generations
		}
	}
	return nil
}

func (e *env) assertRemoteEquals(rel, id string) {
	e.t.Helper()
	got, _ := e.remoteStream(id, repo.SessionStream)
	want := e.read(rel)
	want = want[:bytes.LastIndexByte(want, '\n')+1]
	if !bytes.Equal(got, want) {
		e.t.Fatalf("%s: remote holds %d bytes, file has %d settled bytes; differ at %d", rel, len(got), len(want), firstDiff(got, want))
	}
}

// assertGenerationsRead checks that every generation of the session's
// stream on this machine reassembles: none mixes bytes of two versions.
func (e *env) assertGenerationsRead(id string) {
	e.t.Helper()
	s := repo.Stream{SessionID: id, Machine: e.machine, Name: repo.SessionStream}
	for _, g := range e.generations(id, repo.SessionStream) {
		if _, err := repotest.ReadGeneration(context.Background(), e.repo, s, g, 1<<30); err != nil {
			e.t.Errorf("generation %s: %v", g.Name, err)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func (e *env) catalogEntry(id string) repo.CatalogEntry {
	e.t.Helper()
	c, err := e.repo.GetCatalog(context.Background(), e.machine)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range c.Sessions {
		if s.ID == id {
			return s
		}
	}
	e.t.Fatalf("catalog has no session %s", id)
	return repo.CatalogEntry{}
}

func corpus(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(corpusDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// countingClient counts puts by key, to assert what was (not) uploaded.
type countingClient struct {
	remote.Client
	mu   sync.Mutex
	puts []string
}

func (c *countingClient) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	err := c.Client.Put(ctx, key, data, opts)
	if err == nil {
		c.mu.Lock()
		c.puts = append(c.puts, key)
		c.mu.Unlock()
	}
	return err
}

func (c *countingClient) PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts remote.PutOptions) error {
	err := c.Client.PutReader(ctx, key, r, size, opts)
	if err == nil {
		c.mu.Lock()
		c.puts = append(c.puts, key)
		c.mu.Unlock()
	}
	return err
}

func (c *countingClient) takePuts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.puts
	c.puts = nil
	return p
}

// takePutsKeep returns the puts so far without forgetting them.
func (c *countingClient) takePutsKeep() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.puts...)
}

func (c *countingClient) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	return c.Client.Get(ctx, key, off, n)
}

var _ = time.Second

// listOMP lists omp's sessions in r, as restore lists them.
func listOMP(ctx context.Context, r *repo.Repo) ([]restore.Listing, []string, error) {
	return restore.ListAll(ctx, []restore.Place{{Store: store.OMP(), Repo: r}}, "")
}

// restoredAll reports whether rep restored everything asked for.
func restoredAll(rep *restore.Report) bool {
	return len(rep.Problems) == 0 && !slices.ContainsFunc(rep.Results, func(r restore.Result) bool { return !r.OK() })
}

// gzipped is b as omp archives a session: gzip.
func gzipped(b []byte) []byte {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(b)
	zw.Close()
	return gz.Bytes()
}
