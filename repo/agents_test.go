package repo

import (
	"context"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
)

// Another agent's sessions lie under v1/agents/<name>/, laid out as v1/ is:
// what omp's repository (and every reader before other agents) lists never
// shows them, and they read back through the agent's repository alone.
func TestAgentRepository(t *testing.T) {
	dir := t.TempDir()
	c, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := New(c, NewZstd())
	if err := r.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if same, err := r.Agent("omp"); err != nil || same != r {
		t.Fatalf("Agent(omp) = %p, %v; want the repository itself", same, err)
	}
	pi, err := r.Agent("pi")
	if err != nil {
		t.Fatal(err)
	}
	if pi.ID() == "" || pi.ID() != r.ID() {
		t.Errorf("the agent's repository has id %q, the remote's is %q", pi.ID(), r.ID())
	}
	s := Stream{SessionID: "01a2-pi", Machine: "laptop", Name: SessionStream}
	data := []byte(`{"type":"session","id":"01a2-pi"}` + "\n" + `{"type":"message","id":"a1"}` + "\n")
	writeGen(t, pi, s, "0000000000000001", data, 10)
	if _, err := pi.PutCatalog(ctx, Catalog{Machine: "laptop", Updated: time.Now(), Sessions: []CatalogEntry{
		{ID: s.SessionID, Path: "sessions/--w--/t_01a2-pi.jsonl", Generation: "0000000000000001", Size: int64(len(data)), State: StatePresent},
	}}); err != nil {
		t.Fatal(err)
	}

	for _, key := range []string{"v1/agents/pi/machines/laptop/catalog", "v1/agents/pi/sessions/01a2-pi/laptop/session/0000000000000001/meta"} {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(key))); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
	if got, err := read(t, pi, s); err != nil || string(got) != string(data) {
		t.Errorf("read back %q, %v", got, err)
	}
	if cat, err := pi.GetCatalog(ctx, "laptop"); err != nil || len(cat.Sessions) != 1 {
		t.Errorf("the agent's catalog: %+v, %v", cat, err)
	}
	// omp's repository sees nothing of it.
	if ms, err := r.Machines(ctx); err != nil || len(ms) != 0 {
		t.Errorf("omp's machines: %v, %v", ms, err)
	}
	if invs, err := r.Inventory(ctx, s.SessionID, ""); err != nil || len(invs) != 0 {
		t.Errorf("omp's inventory of the pi session: %d streams, %v", len(invs), err)
	}
	if agents, err := r.Agents(ctx); err != nil || len(agents) != 1 || agents[0] != "pi" {
		t.Errorf("Agents = %v, %v", agents, err)
	}
	for _, bad := range []string{"", "Pi", "p/i", "..", "1pi", strings.Repeat("a", 33)} {
		if _, err := r.Agent(bad); err == nil {
			t.Errorf("Agent(%q) accepted", bad)
		}
	}
}

// A listing that yields keys outside the agent's folder (a damaged or
// hostile remote) is refused, not read as the agent's.
func TestAgentListingOutsideFolder(t *testing.T) {
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := New(c, NewZstd())
	s := Stream{SessionID: "x", Machine: "m", Name: SessionStream}
	writeGen(t, r, s, "0000000000000001", []byte("{}\n"))
	pi, _ := r.Agent("pi")
	lying := &Repo{client: agentClient{c: liar{c}, prefix: "v1/agents/pi/"}, codec: pi.codec}
	if _, err := lying.Inventory(ctx, "x", ""); err == nil {
		t.Fatal("an inventory of keys outside the agent's folder was accepted")
	}
}

// liar answers every listing with the listing of v1/, whatever was asked.
type liar struct{ remote.Client }

func (l liar) List(ctx context.Context, _ string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	return l.Client.List(ctx, "v1/sessions/x/", opts)
}
