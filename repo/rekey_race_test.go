package repo_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// racing is the remote as rekey sees it while an agent writes: before (or
// after) rekey's read or put of key, the agent's write lands.
type racing struct {
	remote.Client
	key string
	// beforePut, afterPut and afterGet run at each of rekey's puts and
	// reads of key.
	beforePut, afterPut, afterGet func()
	noETag                        bool // a remote without conditional replacement
}

func (r *racing) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	if key == r.key && r.beforePut != nil {
		r.beforePut()
	}
	if r.noETag && opts.IfMatch != "" {
		return errors.New("this remote has no conditional replacement")
	}
	err := r.Client.Put(ctx, key, data, opts)
	if err == nil && key == r.key && r.afterPut != nil {
		r.afterPut()
	}
	return err
}

func (r *racing) PutReader(ctx context.Context, key string, src io.ReaderAt, size int64, opts remote.PutOptions) error {
	if key == r.key && r.beforePut != nil {
		r.beforePut()
	}
	if r.noETag && opts.IfMatch != "" {
		return errors.New("this remote has no conditional replacement")
	}
	return r.Client.PutReader(ctx, key, src, size, opts)
}

func (r *racing) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := r.Client.Get(ctx, key, off, n)
	if err == nil && key == r.key && r.afterGet != nil {
		// Read whole first, so the write lands after this read.
		b, rerr := io.ReadAll(rc)
		rc.Close()
		r.afterGet()
		return io.NopCloser(strings.NewReader(string(b))), rerr
	}
	return rc, err
}

func (r *racing) Stat(ctx context.Context, key string) (remote.ObjectInfo, error) {
	info, err := r.Client.Stat(ctx, key)
	if r.noETag {
		info.ETag = ""
	}
	return info, err
}

func TestMain(m *testing.M) { remotetest.Main(m) }

// agentCatalog is the agent's catalog after n sessions were uploaded.
func agentCatalog(n int) repo.Catalog {
	c := repo.Catalog{Machine: "laptop", Updated: time.Date(2026, 12, 1, 0, 0, n, 0, time.UTC)}
	for i := range n {
		c.Sessions = append(c.Sessions, repo.CatalogEntry{ID: fmt.Sprintf("0190aaaa-0000-7000-8000-%012d", i), Path: "sessions/-w/s.jsonl", Generation: "0000000000000001", Size: 10, State: repo.StatePresent})
	}
	return c
}

// rekey never replaces an object with what it re-encrypted from an older
// version: the agent's catalog put between rekey's read and its put stays,
// and rekey re-encrypts that one; a catalog that changes at every read is
// left as its writer put it, with an error naming it. On every backend:
// conditional puts where the remote has them, a second read otherwise.
func TestRekeyNeverRollsBack(t *testing.T) {
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		ctx := context.Background()
		a := newKey(t)
		c := b.Client
		agent := repo.New(c, codec(t, crypt.Options{IdentityFile: a.file}))
		writeSession(t, agent, 3)
		n := 1
		if _, err := agent.PutCatalog(ctx, agentCatalog(n)); err != nil {
			t.Fatal(err)
		}
		agentWrites := func() {
			n++
			if _, err := agent.PutCatalog(ctx, agentCatalog(n)); err != nil {
				t.Error(err)
			}
		}
		once := func(f func()) func() {
			done := false
			return func() {
				if !done {
					done = true
					f()
				}
			}
		}
		for _, noETag := range []bool{false, true} {
			name := "conditional put"
			if noETag {
				name = "second read"
			}
			t.Run(name, func(t *testing.T) {
				rc := &racing{Client: c, key: repo.CatalogKey("laptop"), noETag: noETag}
				// With conditional puts any write before the put is
				// caught; without, a write between rekey's two reads.
				if noETag {
					rc.afterGet = once(agentWrites)
				} else {
					rc.beforePut = once(agentWrites)
				}
				if _, err := repo.New(rc, codec(t, crypt.Options{IdentityFile: a.file})).Rekey(ctx, repo.RekeyOptions{Force: true}); err != nil {
					t.Fatalf("rekey: %v", err)
				}
				got, err := agent.GetCatalog(ctx, "laptop")
				if err != nil {
					t.Fatal(err)
				}
				if len(got.Sessions) != n || !got.Updated.Equal(agentCatalog(n).Updated) {
					t.Fatalf("after rekey the catalog lists %d sessions (updated %s): the agent's newer one with %d was rolled back", len(got.Sessions), got.Updated, n)
				}

				if b.Name != "file" {
					return // the refusal waits 2.5 s: once is enough
				}
				// A catalog that changes at every read.
				rc.afterGet, rc.beforePut = nil, agentWrites
				if noETag {
					rc.afterGet, rc.beforePut = agentWrites, nil
				}
				_, err = repo.New(rc, codec(t, crypt.Options{IdentityFile: a.file})).Rekey(ctx, repo.RekeyOptions{Force: true})
				if err == nil || !strings.Contains(err.Error(), repo.CatalogKey("laptop")) || !strings.Contains(err.Error(), "run 'ompsync rekey' again") {
					t.Fatalf("rekey over a catalog changing at every read: %v", err)
				}
				if got, err := agent.GetCatalog(ctx, "laptop"); err != nil || len(got.Sessions) != n {
					t.Fatalf("the changing catalog: %d sessions, %v; want the writer's last, %d", len(got.Sessions), err, n)
				}
			})
		}
	})
}

// A writer that read the marker before a rotation from {K1, K2} to
// {K1, K3} keeps putting to {K1, K2} until it reads the marker again (up to
// MarkerTTL, which the settle wait covers). Its objects have as many
// recipient stanzas as the new ones, and no stanza says whose it is, so
// rekey must list the objects only after that writer's last put: after it,
// a machine holding only K2 reads nothing, though rekey held only K1. A
// rekey stopped in its wait and run again at once waits again.
func TestRekeyOutlastsAStaleWriterOfAsManyRecipients(t *testing.T) {
	for _, stopped := range []bool{false, true} {
		t.Run(map[bool]string{false: "one run", true: "stopped and run again"}[stopped], func(t *testing.T) {
			remotetest.Each(t, func(t *testing.T, b remotetest.Backend) { rekeyBesideStaleWriter(t, b.Client, stopped) })
		})
	}
}

func rekeyBesideStaleWriter(t *testing.T, c remote.Client, stopped bool) {
	ctx := context.Background()
	k1, k2, k3 := newKey(t), newKey(t), newKey(t)
	stale := repo.New(c, codec(t, crypt.Options{Recipients: []string{k1.recipient, k2.recipient}, IdentityFile: k1.file}))
	writeSession(t, stale, 3)
	n := 1
	if _, err := stale.PutCatalog(ctx, agentCatalog(n)); err != nil {
		t.Fatal(err)
	}

	// From the marker's change, the stale writer puts its catalog again
	// and again, for half the settle wait.
	const settle = time.Second
	done := make(chan struct{})
	rctx, stop := context.WithCancel(ctx)
	rc := &racing{Client: c, key: repo.MarkerKey}
	rc.afterPut = func() {
		rc.afterPut = nil
		go func() {
			defer close(done)
			for start := time.Now(); time.Since(start) < settle/2; {
				if _, err := stale.PutCatalog(ctx, agentCatalog(n+1)); err != nil {
					t.Errorf("the stale writer: %v", err)
					return
				}
				n++
			}
		}()
		if stopped {
			stop()
		}
	}
	rot := repo.New(rc, codec(t, crypt.Options{Recipients: []string{k1.recipient, k3.recipient}, IdentityFile: k1.file}))
	_, err := rot.Rekey(rctx, repo.RekeyOptions{Settle: settle})
	if stopped {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("rekey stopped in its wait: %v", err)
		}
		_, err = rot.Rekey(ctx, repo.RekeyOptions{Settle: settle})
	}
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if n == 1 {
		t.Fatal("the stale writer put nothing after the marker changed")
	}

	only := repo.New(c, codec(t, crypt.Options{IdentityFile: k2.file}))
	if _, err := only.GetCatalog(ctx, "laptop"); !errors.Is(err, repo.ErrNoKey) {
		t.Errorf("a machine holding only the revoked K2 read the stale writer's catalog after the rekey: %v", err)
	}
	got, err := repo.New(c, codec(t, crypt.Options{IdentityFile: k3.file})).GetCatalog(ctx, "laptop")
	if err != nil || len(got.Sessions) != n {
		t.Errorf("the catalog for K3: %d sessions, %v; want the stale writer's last, %d", len(got.Sessions), err, n)
	}
}
