package agent

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// A machine's catalog that cannot be read, or that names a session with an
// unsafe path, is said once at WARN, naming the machine and the session,
// not at every pull for as long as the remote holds it.
func TestPullWarnsOfRefusedCatalogsOnce(t *testing.T) {
	c := newFileClient(t)
	z := repo.NewZstd()
	put := func(key, plain string) {
		sealed, _ := z.Seal([]byte(plain))
		if err := c.Put(context.Background(), key, sealed, remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put(repo.CatalogKey("evil"), `{"v":1,"machine":"evil","sessions":[{"id":"0bad0000-0000-7000-8000-000000000001","path":"sessions/../../x.jsonl","generation":"","size":1,"state":"present"}]}`)
	put(repo.CatalogKey("broken"), `not a catalog`)

	e := newEnv(t, c)
	var log bytes.Buffer
	e.opts.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	e.opts.Pull = true
	e.opts.Merger = mergerFunc(func(ctx context.Context, req MergeRequest) (Merged, error) {
		t.Errorf("merged %s of %s from a refused catalog", req.SessionID, req.Machine)
		return Merged{}, nil
	})
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := t.Context()
	if err := a.start(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := a.pull(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var unsafe, unread int
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "machine=evil") && strings.Contains(l, "0bad0000-0000-7000-8000-000000000001") && strings.Contains(l, "unsafe path") {
			unsafe++
		}
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "machine=broken") && strings.Contains(l, "cannot read") {
			unread++
		}
	}
	if unsafe != 1 || unread != 1 {
		t.Errorf("3 pulls warned %d times of the unsafe entry and %d times of the unreadable catalog, want once each:\n%s", unsafe, unread, log.String())
	}
}
