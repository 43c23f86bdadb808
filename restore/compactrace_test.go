package restore

import (
	"context"
	"io"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ompsync/ompsync/compact"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/search"
)

// compactsBeforeRead is a remote on which another machine's compaction
// runs between a reader's listing and its first read of a chunk: the
// chunks it listed are merged into one and deleted.
type compactsBeforeRead struct {
	remote.Client
	t     *testing.T
	under *repo.Repo
	id    string
	once  sync.Once
	ran   bool
}

func (c *compactsBeforeRead) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if _, _, ok := repo.ParseChunkName(path.Base(key)); ok {
		c.once.Do(func() { c.ran = compactAll(c.t, c.under, c.id) > 0 })
	}
	return c.Client.Get(ctx, key, off, length)
}

// compactAll merges the chunks of every generation of session id, and
// says how many it merged.
func compactAll(t *testing.T, r *repo.Repo, id string) int {
	ctx := context.Background()
	invs, err := r.Inventory(ctx, id, "")
	if err != nil {
		t.Error(err)
		return 0
	}
	merged := 0
	for _, inv := range invs {
		for _, g := range inv.Generations {
			res, err := compact.Stream(ctx, r, inv.Stream, g.Name, true, compact.Policy{})
			if err != nil {
				t.Error(err)
			}
			merged += res.Merged
		}
	}
	return merged
}

// A compaction that deletes the chunks a reader has just listed is no
// damage: restore, verify and grep each list again and read the merged
// chunk, and report nothing wrong.
func TestReadersListAgainAfterACompaction(t *testing.T) {
	id := "019a0006-0000-7000-8000-000000000001"
	rel := sessionPath("-w", id, 1)
	for _, reader := range []string{"restore", "verify", "grep"} {
		t.Run(reader, func(t *testing.T) {
			under := fileRemote(t)
			m := newMachine(t, under, "laptop")
			m.write(rel, synthSession(id, "/w", "raced", 2), base)
			m.backup()
			// Each append larger than all before it, so that compaction
			// merges them all.
			for i, text := range []string{"second chunk", "third chunk"} {
				text += strings.Repeat(" and more", 200*(i+1))
				m.appendTo(rel, messageLine("0000f00"+itoa(i), "", "user", "2026-10-07T02:00:00.000Z", text), base.Add(time.Duration(i+1)*time.Minute))
				m.backup()
			}
			c := &compactsBeforeRead{Client: under.Client(), t: t, under: under, id: id}
			r := repo.New(c, repo.NewZstd())
			switch reader {
			case "restore":
				to := t.TempDir()
				rep, err := Run(context.Background(), r, []string{id}, Options{AgentDir: to})
				if err != nil || !rep.OK() {
					t.Fatalf("restore: %v %+v", err, rep)
				}
				if got := readFile(t, to, rel); string(got) != string(m.read(rel)) {
					t.Errorf("restored %d bytes, want the %d backed up", len(got), len(m.read(rel)))
				}
			case "verify":
				checks, problems, err := Verify(context.Background(), r, []string{id}, Options{AgentDir: m.agentDir})
				if err != nil || len(problems) > 0 || len(checks) != 1 || !checks[0].OK() {
					t.Fatalf("verify: %v %v %+v", err, problems, checks)
				}
			case "grep":
				got, _ := grep(t, r, "third chunk", (*search.Cache)(nil), Options{})
				if len(got) != 1 {
					t.Fatalf("grep found %d matches, want 1: %+v", len(got), got)
				}
			}
			if !c.ran {
				t.Fatal("no compaction ran between the listing and the reads: the test proves nothing")
			}
		})
	}
}

// readFile reads rel under dir.
func readFile(t *testing.T, dir, rel string) []byte {
	t.Helper()
	return (&machine{t: t, agentDir: dir}).read(rel)
}
