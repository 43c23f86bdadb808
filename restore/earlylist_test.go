package restore

import (
	"context"
	"fmt"
	"io"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// staleListing makes restore --all's listing of every session as old as a
// listing can be: taken whole before between runs, which uploads more,
// while the catalogs are read only after it.
type staleListing struct {
	remote.Client
	between func()
	once    sync.Once
	ran     chan struct{}
}

func (c *staleListing) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	if strings.HasPrefix(prefix, "v1/machines/") {
		<-c.ran // the machines and their catalogs are newer than the listing
	}
	if prefix != repo.SessionsPrefix() {
		return c.Client.List(ctx, prefix, opts)
	}
	type item struct {
		obj remote.ObjectInfo
		err error
	}
	var got []item
	for obj, err := range c.Client.List(ctx, prefix, opts) {
		got = append(got, item{obj, err})
	}
	c.once.Do(func() { c.between(); close(c.ran) })
	return func(yield func(remote.ObjectInfo, error) bool) {
		for _, it := range got {
			if !yield(it.obj, it.err) {
				return
			}
		}
	}
}

func (c *staleListing) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if strings.HasPrefix(key, "v1/machines/") {
		<-c.ran
	}
	return c.Client.Get(ctx, key, off, length)
}

// restore --all lists every session while it reads the catalogs: what was
// uploaded in between (bytes appended to a session, another machine's
// first copy of one, a new session) is restored as the catalogs record it,
// not as the older listing had it.
func TestRestoreAllListingOlderThanCatalogs(t *testing.T) {
	r := fileRemote(t)
	laptop := newMachine(t, r, "laptop")
	desk := newMachine(t, r, "desktop")
	files := corpus(t)
	if len(files) < 3 {
		t.Fatalf("want 3 corpus files, have %d", len(files))
	}
	rels := make([]string, 3)
	for i, f := range files[:3] {
		rels[i] = sessionPath("-w", f.id, i)
	}
	laptop.write(rels[0], files[0].data, base)
	laptop.write(rels[1], files[1].data, base)
	laptop.backup()

	c := &staleListing{Client: r.Client(), ran: make(chan struct{})}
	c.between = func() {
		later := base.Add(time.Hour)
		laptop.appendTo(rels[0], messageLine("0000e001", "", "user", "2026-10-07T02:00:00.000Z", "appended after the listing"), later)
		laptop.write(rels[2], files[2].data, later)
		laptop.backup()
		desk.write(rels[1], files[1].data, base)
		desk.appendTo(rels[1], messageLine("0000e002", "", "user", "2026-10-07T02:00:00.000Z", "the desktop's own line"), later)
		desk.backup()
	}
	to := t.TempDir()
	rep, err := Run(context.Background(), repo.New(c, repo.NewZstd()), nil, Options{All: true, AgentDir: to})
	if err != nil || !rep.OK() {
		t.Fatalf("%v %+v", err, rep)
	}
	if len(rep.Results) != 3 {
		t.Fatalf("restored %d sessions, want 3: %+v", len(rep.Results), rep.Results)
	}
	got := snapshot(t, to)
	for i, rel := range rels {
		want := laptop.read(rel)
		if i == 1 {
			want = desk.read(rel) // the laptop's copy is a prefix of it
		}
		if g, ok := got[rel]; !ok || string(g.data) != string(want) {
			t.Errorf("session %d, %s: restored %d bytes, want the %d the catalogs record", i, rel, len(g.data), len(want))
		}
	}
}

// More sessions than the early listing holds ahead of the work: every one
// is restored, from the one listing.
func TestRestoreAllMoreSessionsThanListedAhead(t *testing.T) {
	r := fileRemote(t)
	m := newMachine(t, r, "laptop")
	n := 2*earlyAhead + 7
	for i := range n {
		id := fmt.Sprintf("019a0005-0000-7000-8000-%012d", i)
		m.write(sessionPath("-w", id, i), synthSession(id, "/w", "s"+itoa(i), 2), base)
	}
	m.backup()
	rec := &listRecorder{Client: r.Client()}
	to := t.TempDir()
	rep, err := Run(context.Background(), repo.New(rec, repo.NewZstd()), nil, Options{All: true, AgentDir: to})
	if err != nil || !rep.OK() || len(rep.Results) != n {
		t.Fatalf("%v: %d results, want %d", err, len(rep.Results), n)
	}
	if all, one := rec.count(); all != 1 || one != 0 {
		t.Errorf("listed every session %d times and single sessions %d times, want once and never", all, one)
	}
	sameTree(t, snapshot(t, m.agentDir), snapshot(t, to), nil, "sessions")
}
