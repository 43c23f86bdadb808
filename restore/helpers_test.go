package restore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/session"
	"github.com/ompsync/ompsync/store"
)

func TestMain(m *testing.M) { remotetest.Main(m) }

const corpusDir = "../testdata/corpus"

// corpusFile is a real session file and its id.
type corpusFile struct {
	name string
	id   string
	data []byte
}

func corpus(t *testing.T) []corpusFile {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files in %s", corpusDir)
	}
	var out []corpusFile
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := session.ReadHeader(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, corpusFile{name: filepath.Base(f), id: h.ID, data: b})
	}
	return out
}

func fileRemote(t *testing.T) *repo.Repo {
	t.Helper()
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return repo.New(c, repo.NewZstd())
}

// eachRemote runs f on a file remote and, when an S3 server is around, on
// both S3 clients.
func eachRemote(t *testing.T, f func(t *testing.T, r *repo.Repo)) {
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		f(t, repo.New(b.Client, repo.NewZstd()))
	})
}

// machine is one computer running omp and the ompsync agent.
type machine struct {
	t        *testing.T
	name     string
	agentDir string
	stateDir string
	r        *repo.Repo
}

func newMachine(t *testing.T, r *repo.Repo, name string) *machine {
	return &machine{t: t, name: name, agentDir: t.TempDir(), stateDir: t.TempDir(), r: r}
}

func (m *machine) path(rel string) string { return filepath.Join(m.agentDir, filepath.FromSlash(rel)) }

// write puts a file in the agent dir with the given mtime.
func (m *machine) write(rel string, data []byte, mtime time.Time) {
	m.t.Helper()
	p := m.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		m.t.Fatal(err)
	}
}

func (m *machine) appendTo(rel string, data string, mtime time.Time) {
	m.t.Helper()
	f, err := os.OpenFile(m.path(rel), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		m.t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		m.t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(m.path(rel), mtime, mtime); err != nil {
		m.t.Fatal(err)
	}
}

func (m *machine) read(rel string) []byte {
	m.t.Helper()
	b, err := os.ReadFile(m.path(rel))
	if err != nil {
		m.t.Fatal(err)
	}
	return b
}

// backup runs one agent pass, as `ompsync agent --once` does.
func (m *machine) backup() { m.t.Helper(); m.backupWith(false) }

// backupConfirmingDeletions is `ompsync agent --once --confirm-deletions`:
// sessions deleted all at once are recorded as deleted.
func (m *machine) backupConfirmingDeletions() { m.t.Helper(); m.backupWith(true) }

func (m *machine) backupWith(confirmDeletions bool) {
	m.t.Helper()
	a, err := agent.New(m.r, agent.Options{AgentDir: m.agentDir, StateDir: m.stateDir, Machine: m.name, ConfirmDeletions: confirmDeletions})
	if err != nil {
		m.t.Fatal(err)
	}
	defer a.Close()
	if err := a.Once(context.Background()); err != nil {
		m.t.Fatalf("agent pass on %s: %v", m.name, err)
	}
}

// restore runs Run into the machine's agent dir.
func (m *machine) restore(prefixes []string, opts Options) (*Report, error) {
	m.t.Helper()
	if opts.AgentDir == "" {
		opts.AgentDir = m.agentDir
	}
	return Run(context.Background(), m.r, prefixes, opts)
}

// restoreOK restores and fails the test unless every session was restored.
func (m *machine) restoreOK(prefixes []string, opts Options) *Report {
	m.t.Helper()
	rep, err := m.restore(prefixes, opts)
	if err != nil {
		m.t.Fatalf("restore %v: %v", prefixes, err)
	}
	if !rep.OK() {
		m.t.Fatalf("restore %v not OK: %+v", prefixes, rep)
	}
	return rep
}

func sessionPath(dir, id string, n int) string {
	return "sessions/" + dir + "/2026-10-07T00-45-40-" + strings.Repeat("0", 3-len(itoa(n))) + itoa(n) + "Z_" + id + ".jsonl"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// fileState is what a user would compare of a file.
type fileState struct {
	data  []byte
	mode  fs.FileMode
	mtime time.Time
}

// snapshot reads every file and folder under dir (hidden ones too).
func snapshot(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fileState{mode: fi.Mode(), mtime: fi.ModTime()}
		if d.Type().IsRegular() {
			if st.data, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		out[filepath.ToSlash(rel)] = st
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// sameTree compares two snapshots' files (bytes, and mtimes when asked)
// under the given top folders.
func sameTree(t *testing.T, want, got map[string]fileState, mtimes func(rel string) bool, tops ...string) {
	t.Helper()
	under := func(rel string) bool {
		for _, top := range tops {
			if rel == top || strings.HasPrefix(rel, top+"/") {
				return true
			}
		}
		return false
	}
	var names []string
	for rel := range want {
		if under(rel) {
			names = append(names, rel)
		}
	}
	for rel := range got {
		if _, ok := want[rel]; !ok && under(rel) {
			t.Errorf("restore made %s, which the source does not have", rel)
		}
	}
	sort.Strings(names)
	for _, rel := range names {
		w, g := want[rel], got[rel]
		gs, ok := got[rel]
		if !ok {
			t.Errorf("%s not restored", rel)
			continue
		}
		if w.mode.IsDir() != gs.mode.IsDir() {
			t.Errorf("%s: folder %v, want %v", rel, gs.mode.IsDir(), w.mode.IsDir())
			continue
		}
		if !bytes.Equal(w.data, g.data) {
			t.Errorf("%s: restored %d bytes, differ from the source's %d", rel, len(g.data), len(w.data))
		}
		if mtimes != nil && mtimes(rel) && !w.mode.IsDir() && !w.mtime.Equal(g.mtime) {
			t.Errorf("%s: mtime %v, want %v", rel, g.mtime, w.mtime)
		}
	}
}

// flaky fails Gets of chunks: every other one at first with a transient
// error, or with a body cut off half way.
type flaky struct {
	remote.Client
	mu    sync.Mutex
	fails int
	gets  int
}

func (f *flaky) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	f.mu.Lock()
	f.gets++
	fail := f.fails > 0 && strings.Contains(key, "/session/")
	if fail {
		f.fails--
	}
	n := f.fails
	f.mu.Unlock()
	if fail && n%2 == 0 {
		return nil, &remote.Error{Op: "get", Key: key, Transient: true, Err: errors.New("503 Slow Down")}
	}
	rc, err := f.Client.Get(ctx, key, off, length)
	if err != nil || !fail {
		return rc, err
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, err
	}
	return io.NopCloser(io.MultiReader(bytes.NewReader(b[:len(b)/2]), errReader{io.ErrUnexpectedEOF})), nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// countingClient counts requests.
type countingClient struct {
	remote.Client
	mu          sync.Mutex
	gets, lists int
}

func (c *countingClient) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Client.Get(ctx, key, off, length)
}

func (c *countingClient) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
	return c.Client.List(ctx, prefix, opts)
}

// putLargeSession puts a session of 64 MiB (smallSession, then one long
// entry again and again) from machine desk, in chunks of about 4 MiB as the
// agent uploads a backlog, with its catalog entry, and returns its bytes.
func putLargeSession(t *testing.T, r *repo.Repo, id, rel string) []byte {
	t.Helper()
	data, _ := smallSession(id, "")
	line := []byte(entry("aaaa0003", "aaaa0002", base, strings.Repeat("a long answer ", 60)))
	var cuts []int64
	for len(data) < 64<<20 {
		if len(data)%(4<<20) < len(line) {
			cuts = append(cuts, int64(len(data)))
		}
		data = append(data, line...)
	}
	putDesk(t, r, id, rel, data, cuts[1:]...)
	return data
}

// putDesk puts data as session id at rel from machine desk (cut at cuts),
// and its catalog entry: present, changed at base.
func putDesk(t *testing.T, r *repo.Repo, id, rel string, data []byte, cuts ...int64) {
	t.Helper()
	_, gen := putSession(t, r, "desk", id, rel, data, cuts...)
	putCatalog(t, r, "desk", repo.CatalogEntry{ID: id, Path: rel, Generation: gen, Size: int64(len(data)), Mtime: base, State: repo.StatePresent, Changed: base})
}

// diverged is common gone on apart on two machines: mine with a line of
// work here, theirs with a newer one there, each after common's last entry.
func diverged(t *testing.T, common []byte) (mine, theirs []byte) {
	t.Helper()
	last := lastEntryID(t, common)
	mine = append(bytes.Clone(common), entry("aaaa9001", last, base.Add(time.Hour), "work here")...)
	theirs = append(bytes.Clone(common), entry("bbbb9001", last, base.Add(2*time.Hour), "work there")...)
	return mine, theirs
}

// OK reports whether everything asked for was restored.
func (r *Report) OK() bool {
	if len(r.Problems) > 0 {
		return false
	}
	for _, res := range r.Results {
		if !res.OK() {
			return false
		}
	}
	return true
}

// List is ListAll over omp's sessions alone.
func List(ctx context.Context, r *repo.Repo, machine string) ([]Listing, []string, error) {
	return ListAll(ctx, []Place{{Store: store.OMP(), Repo: r}}, machine)
}
