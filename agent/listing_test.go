package agent

import (
	"context"
	"fmt"
	"iter"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// listCounter counts LIST calls by prefix.
type listCounter struct {
	remote.Client
	mu    sync.Mutex
	lists []string
}

func (c *listCounter) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	c.mu.Lock()
	c.lists = append(c.lists, prefix)
	c.mu.Unlock()
	return c.Client.List(ctx, prefix, opts)
}

// take returns the session LISTs since the last take: the listings of
// every session, and the LISTs of one session or generation.
func (c *listCounter) take() (all, one int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.lists {
		switch {
		case p == repo.SessionsPrefix():
			all++
		case strings.HasPrefix(p, repo.SessionsPrefix()):
			one++
		}
	}
	c.lists = nil
	return all, one
}

func sessionRel(i int) (rel, id string) {
	id = fmt.Sprintf("019e19b4-0000-7000-8000-%012d", i)
	return "sessions/-w/2026-10-07T00-00-00-000Z_" + id + ".jsonl", id
}

func sessionBytes(id string, entries int) []byte {
	b := []byte(`{"type":"session","version":3,"id":"` + id + `","timestamp":"2026-10-07T00:00:00.000Z","cwd":"/w"}` + "\n")
	parent := ""
	for i := range entries {
		eid := fmt.Sprintf("%08x", i+1)
		b = append(b, entryLine(eid, parent, "entry "+eid)...)
		parent = eid
	}
	return b
}

// A first backup of many sessions confirms them with one listing of every
// session, not one LIST each; a new process's pass after appends to many of
// them checks them against the remote the same way.
func TestManySessionsOneListing(t *testing.T) {
	lc := &listCounter{Client: newFileClient(t)}
	e := newEnv(t, lc)
	const n = 20
	for i := range n {
		rel, id := sessionRel(i)
		e.writeRename(rel, sessionBytes(id, 3))
	}
	e.once()
	if all, one := lc.take(); all != 1 || one != 0 {
		t.Errorf("first backup of %d sessions: %d listings of every session and %d of one; want 1 and 0", n, all, one)
	}
	for i := range n {
		rel, _ := sessionRel(i)
		e.appendTo(rel, entryLine("abcd0001", "00000003", "more work"))
	}
	e.once()
	if all, one := lc.take(); all != 2 || one != 0 {
		t.Errorf("pass after appends to %d sessions: %d listings of every session and %d of one; want 2 (check, confirm) and 0", n, all, one)
	}
	for i := range n {
		rel, id := sessionRel(i)
		e.assertRemoteEquals(rel, id)
	}
	lc.take() // the checks' own
	// A few sessions changed among many are listed one by one, by the
	// running agent's full pass.
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	lc.take()
	rel, _ := sessionRel(3)
	e.appendTo(rel, entryLine("abcd0002", "abcd0001", "a little more"))
	if err := a.pass(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	if all, one := lc.take(); all != 0 || one != 2 {
		t.Errorf("pass after appends to 1 session of %d: %d listings of every session and %d of one; want 0 and 2", n, all, one)
	}
	a.Close()
	// agent --once checks everything it uploaded: one listing of every
	// session, beside the LIST of the one that changed.
	e.appendTo(rel, entryLine("abcd0003", "abcd0002", "and more"))
	e.once()
	if all, one := lc.take(); all != 1 || one != 1 {
		t.Errorf("agent --once after appends to 1 session of %d: %d listings of every session and %d of one; want 1 and 1", n, all, one)
	}
}

// Objects the remote acknowledged and lost are found by the listing of
// every session as by a LIST of one, and uploaded again in the same run.
func TestLostObjectsFoundByOneListing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		var mu sync.Mutex
		dropped := map[string]bool{}
		e := newEnv(t, dropClient{c, func(key string) bool {
			ref, err := repo.ParseSessionKey(key)
			if err != nil {
				return false
			}
			mu.Lock()
			defer mu.Unlock()
			// The first put of the meta of every third session, and of the
			// chunk of every fifth.
			var i int
			fmt.Sscanf(ref.Stream.SessionID[len(ref.Stream.SessionID)-12:], "%d", &i)
			k := ref.Stream.SessionID + "/" + path.Base(key)
			if dropped[k] || !(ref.Object == "meta" && i%3 == 0 || ref.Object != "meta" && ref.Object != "head" && i%5 == 0) {
				return false
			}
			dropped[k] = true
			return true
		}})
		const n = 16
		for i := range n {
			rel, id := sessionRel(i)
			e.writeRename(rel, sessionBytes(id, 4))
		}
		e.once() // the same run notices what was lost and puts it again
		if len(dropped) == 0 {
			t.Fatal("nothing dropped")
		}
		for i := range n {
			rel, id := sessionRel(i)
			e.assertRemoteEquals(rel, id)
		}
	})
}
