package agent

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// A pull of many sessions reads the local session files once, not once a
// session, and merges sessions at once; one session's copies (two machines
// hold it) are merged one after the other, the second seeing the first.
func TestPullMergesSessionsAtOnceWithOneLocalScan(t *testing.T) {
	c := newFileClient(t)
	z := repo.NewZstd()
	const n = 12
	for _, m := range []string{"desk", "tower"} {
		cat := fmt.Sprintf(`{"v":1,"machine":%q,"sessions":[`, m)
		for i := range n {
			if m == "tower" && i > 0 {
				break // tower holds session 0 only
			}
			if i > 0 {
				cat += ","
			}
			cat += fmt.Sprintf(`{"id":"019e19b4-0000-7000-8000-%012d","path":"sessions/-w/2026-10-07T00-00-00-000Z_019e19b4-0000-7000-8000-%012d.jsonl","generation":"18ecbc17b1295105","size":10,"state":"present"}`, i, i)
		}
		sealed, _ := z.Seal([]byte(cat + "]}"))
		if err := c.Put(context.Background(), repo.CatalogKey(m), sealed, remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	e := newEnv(t, c)
	e.opts.Pull = true
	e.opts.Parallel = 4
	var (
		mu             sync.Mutex
		locals         = map[*store.Local]bool{}
		inFlight, most int
		busy           = map[string]bool{}
		both           = make(chan struct{}) // two merges were in flight together
		once           sync.Once
	)
	e.opts.Merger = mergerFunc(func(ctx context.Context, req MergeRequest) (Merged, error) {
		mu.Lock()
		locals[req.Local] = true
		if busy[req.SessionID] {
			t.Errorf("two copies of session %s merged at once", req.SessionID)
		}
		busy[req.SessionID] = true
		inFlight++
		most = max(most, inFlight)
		if inFlight >= 2 {
			once.Do(func() { close(both) })
		}
		mu.Unlock()
		select { // wait (a little) for another merge to overlap this one
		case <-both:
		case <-time.After(2 * time.Second):
		}
		mu.Lock()
		inFlight--
		busy[req.SessionID] = false
		mu.Unlock()
		return Merged{Action: MergeUnchanged}, nil
	})
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := a.pull(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(locals) != 1 || locals[nil] {
		t.Errorf("the merges were given %d local indexes (nil among them: %v), want one shared", len(locals), locals[nil])
	}
	if most < 2 {
		t.Errorf("at most %d merges at once, want several", most)
	}
	for i := range n {
		id := fmt.Sprintf("019e19b4-0000-7000-8000-%012d", i)
		if a.state.Seen["desk/"+id] == "" {
			t.Errorf("session %s from desk not recorded as merged", id)
		}
	}
	if a.state.Seen["tower/019e19b4-0000-7000-8000-000000000000"] == "" {
		t.Error("session 0 from tower not recorded as merged")
	}
}
