package compact

import (
	"context"
	"errors"
	"io"
	"iter"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// hookClient runs a test's hook at one point of one operation: before
// (with the operation's error, if the hook returns one) or after it.
type hookClient struct {
	remote.Client
	before func(op, key string) error
	after  func(op, key string)
}

func (h *hookClient) run(op, key string, do func() error) error {
	if h.before != nil {
		if err := h.before(op, key); err != nil {
			return err
		}
	}
	err := do()
	if err == nil && h.after != nil {
		h.after(op, key)
	}
	return err
}

func (h *hookClient) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	return h.run("put", key, func() error { return h.Client.Put(ctx, key, data, opts) })
}

func (h *hookClient) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := h.run("get", key, func() (err error) { rc, err = h.Client.Get(ctx, key, off, n); return err })
	return rc, err
}

func (h *hookClient) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	if h.before != nil {
		if err := h.before("list", prefix); err != nil {
			return func(yield func(remote.ObjectInfo, error) bool) { yield(remote.ObjectInfo{}, err) }
		}
	}
	return h.Client.List(ctx, prefix, opts)
}

func (h *hookClient) Delete(ctx context.Context, key string) error {
	return h.run("delete", key, func() error { return h.Client.Delete(ctx, key) })
}

// Two compactions of one stream at once (the agent's and one from cron
// with no lock between them) at the worst interleaving: A writes the
// merged chunk; B finds it, checks it and is about to delete the chunks
// it replaces; A's read-back fails. A must not delete the merged chunk B
// now relies on: every byte still reads after both.
func TestTwoCompactionsAtOnce(t *testing.T) {
	eachRepo(t, func(t *testing.T, base *repo.Repo) {
		ctx := context.Background()
		if err := base.Init(ctx); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 8))
		w := newWriter(base, session("both", "laptop"), "00000000000000a1", 0)
		for range 8 {
			if err := w.append(ctx, lines(rng, 2)); err != nil {
				t.Fatal(err)
			}
		}
		merged := w.s.ChunkKey(w.gen, 0, int64(len(w.data)))
		aPut, bReady, resumeA, resumeB := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
		a := repo.New(&hookClient{Client: base.Client(),
			after: func(op, key string) {
				if op == "put" && key == merged {
					close(aPut)
					<-resumeA
				}
			},
			before: func(op, key string) error {
				if op == "get" && key == merged {
					return &remote.Error{Op: "get", Key: key, Err: errors.New("connection reset"), Transient: true}
				}
				return nil
			}}, repo.NewZstd())
		readB := false
		b := repo.New(&hookClient{Client: base.Client(),
			after: func(op, key string) { readB = readB || op == "get" && key == merged },
			before: func(op, key string) error {
				if op == "delete" && readB {
					readB = false
					close(bReady)
					<-resumeB
				}
				return nil
			}}, repo.NewZstd())
		for _, c := range []*repo.Repo{a, b} {
			if _, err := c.ReadMarker(ctx); err != nil {
				t.Fatal(err)
			}
		}
		errA, errB := make(chan error, 1), make(chan error, 1)
		go func() { _, err := Stream(ctx, a, w.s, w.gen, true, Policy{}); errA <- err }()
		<-aPut
		go func() { _, err := Stream(ctx, b, w.s, w.gen, true, Policy{}); errB <- err }()
		select {
		case <-bReady:
		case err := <-errB:
			t.Fatalf("B ended before deleting what it merged: %v", err)
		}
		close(resumeA)
		if err := <-errA; err == nil || !strings.Contains(err.Error(), "connection reset") {
			t.Fatalf("A: %v, want its read-back's error", err)
		}
		close(resumeB)
		if err := <-errB; err != nil {
			t.Fatalf("B: %v", err)
		}
		checkStream(t, base, w, "after two compactions at once")
		if got := chunksOf(t, base, w.s, w.gen); len(got) != 1 {
			t.Fatalf("chunks %v, want the merged one", got)
		}
	})
}

// Prune plans from other machines' references and deletes later: a
// machine that pulls the session in between, and refers to a generation
// planned for deletion, keeps it.
func TestPruneRereadsReferences(t *testing.T) {
	eachRepo(t, func(t *testing.T, base *repo.Repo) {
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		rng := rand.New(rand.NewPCG(9, 10))
		gen := func(age time.Duration) string { return repo.NewGeneration(now.Add(-age).UnixNano()) }
		s := session("pulled", "laptop")
		old := newWriter(base, s, gen(100*day), 0)
		for range 3 {
			if err := old.append(ctx, lines(rng, 2)); err != nil {
				t.Fatal(err)
			}
		}
		cur := newWriter(base, s, gen(50*day), 0)
		if err := cur.append(ctx, old.data); err != nil {
			t.Fatal(err)
		}
		if err := cur.append(ctx, lines(rng, 2)); err != nil {
			t.Fatal(err)
		}
		putCatalog(t, base, "laptop", entry("pulled", cur.gen, repo.StatePresent, now.Add(-50*day)))

		// desk pulls once prune planned: before its first delete, or before
		// it looks at the session again, whichever comes first.
		desk := newWriter(base, session("pulled", "desk"), gen(0), 0)
		pulled, lists := false, 0
		r := repo.New(&hookClient{Client: base.Client(), before: func(op, key string) error {
			if op == "list" && strings.Contains(key, "/pulled/") {
				lists++
			}
			if !pulled && (op == "delete" || lists == 2) {
				pulled = true
				return desk.appendRef(ctx, old.data, old)
			}
			return nil
		}}, repo.NewZstd())
		rep, err := Prune(ctx, r, store.OMP(), "laptop", Retention{Generations: 30 * day}, now, false)
		if err != nil {
			t.Fatal(err)
		}
		if !pulled {
			t.Fatal("prune deleted nothing: the test's interleaving never happened")
		}
		if len(rep.Items) != 0 || rep.Objects != 0 || len(rep.Kept) != 1 || rep.Kept[0].Why != "referenced by machine desk" {
			t.Fatalf("report %+v, want the old generation kept for desk", rep)
		}
		checkStream(t, base, old, "the generation desk refers to")
		checkStream(t, base, desk, "desk's copy")
	})
}
