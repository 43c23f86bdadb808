package agent

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// A copy the remote did not serve (not fetched: the remote down as the
// pull read it) is pulled again at the next pull, as one that failed its
// checks is; an action the agent does not know is never taken for a merge
// done (it was once taken for a create, and the session marked seen).
func TestPullRetriesWhatWasNotFetched(t *testing.T) {
	c := newFileClient(t)
	z := repo.NewZstd()
	cat := `{"v":1,"machine":"desk","sessions":[`
	for i, id := range []string{"019e19b4-0000-7000-8000-000000000001", "019e19b4-0000-7000-8000-000000000002", "019e19b4-0000-7000-8000-000000000003"} {
		if i > 0 {
			cat += ","
		}
		cat += fmt.Sprintf(`{"id":%q,"path":"sessions/-w/2026-10-07T00-00-00-000Z_%s.jsonl","generation":"18ecbc17b1295105","size":10,"state":"present"}`, id, id)
	}
	sealed, _ := z.Seal([]byte(cat + "]}"))
	if err := c.Put(context.Background(), repo.CatalogKey("desk"), sealed, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	answer := map[string]string{
		"019e19b4-0000-7000-8000-000000000001": MergeNotFetched,
		"019e19b4-0000-7000-8000-000000000002": MergeRefused,
		"019e19b4-0000-7000-8000-000000000003": "some-new-action",
	}
	e := newEnv(t, c)
	e.opts.Pull = true
	var mu sync.Mutex
	asked := map[string]int{}
	e.opts.Merger = mergerFunc(func(ctx context.Context, req MergeRequest) (Merged, error) {
		mu.Lock()
		defer mu.Unlock()
		asked[req.SessionID]++
		return Merged{Action: answer[req.SessionID], Problem: "get: connection refused"}, nil
	})
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		a.pull(t.Context()) // what it could not merge is its error; asked counts
	}
	for id, want := range map[string]int{"019e19b4-0000-7000-8000-000000000001": 3, "019e19b4-0000-7000-8000-000000000002": 3, "019e19b4-0000-7000-8000-000000000003": 3} {
		if asked[id] != want {
			t.Errorf("session %s (%s): merged %d times in 3 pulls, want %d", id, answer[id], asked[id], want)
		}
	}
}
