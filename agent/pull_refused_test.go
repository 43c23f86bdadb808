package agent

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// A catalog that stays unreadable is said again now and then with how
// often it failed, as other lasting problems are, not once at start only;
// the running agent's pull carries on (nil), and says when it reads again.
func TestPullUnreadableCatalogSaidAgain(t *testing.T) {
	c := newFileClient(t)
	put := func(plain string) {
		sealed, _ := repo.NewZstd().Seal([]byte(plain))
		if err := c.Put(context.Background(), repo.CatalogKey("broken"), sealed, remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put(`not a catalog`)
	e := newEnv(t, c)
	var log bytes.Buffer
	e.opts.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	e.opts.Pull = true
	e.opts.Merger = mergerFunc(func(ctx context.Context, req MergeRequest) (Merged, error) {
		return Merged{Action: MergeUnchanged}, nil
	})
	var skew time.Duration
	e.opts.Now = func() time.Time { return time.Now().Add(skew) }
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := t.Context()
	if err := a.start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []time.Duration{0, time.Minute, problemRelog + time.Minute} {
		skew = s
		if err := a.pull(ctx); err != nil {
			t.Fatalf("pull at +%s: %v", s, err)
		}
	}
	put(`{"v":1,"machine":"broken","sessions":[]}`)
	if err := a.pull(ctx); err != nil {
		t.Fatal(err)
	}
	var first, again, back int
	for _, l := range strings.Split(log.String(), "\n") {
		switch {
		case strings.Contains(l, `level=WARN msg="pull: cannot read a machine's catalog; its sessions are not pulled"`) && strings.Contains(l, "machine=broken"):
			first++
		case strings.Contains(l, `level=WARN msg="still: pull: cannot read a machine's catalog`) && strings.Contains(l, "machine=broken failures=2"):
			again++
		case strings.Contains(l, `level=INFO msg="works again" what="pull of broken"`):
			back++
		}
	}
	if first != 1 || again != 1 || back != 1 {
		t.Errorf("said the unreadable catalog %d times, again %d times, readable again %d times; want once each:\n%s", first, again, back, log.String())
	}
}

// A refusal an earlier run recorded is lifted once the repository takes
// this machine's writes again, even in a pass that fails for a path of its
// own (a session folder that became a file): status must not go on
// blaming encryption.
func TestRefusalLiftedDespiteAPathProblem(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	e.write("sessions/-w/a.jsonl", []byte(`{"type":"session","id":"a"}`+"\n"))
	e.write("sessions/-x/b.jsonl", []byte(`{"type":"session","id":"b"}`+"\n"))
	e.once()
	writeNote(filepath.Join(e.stateDir, refusedName), "uploads refused by an earlier run")
	if err := os.RemoveAll(e.path("sessions/-x")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.path("sessions/-x"), []byte("not a folder"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.appendTo("sessions/-w/a.jsonl", []byte(`{"type":"message","id":"m1"}`+"\n"))
	if err := e.tryOnce(); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("pass with a session folder replaced by a file: %v, want it to fail naming it", err)
	}
	if msg := Refused(e.stateDir); msg != "" {
		t.Errorf("after uploads were accepted again, the refusal %q is still recorded", msg)
	}
}
