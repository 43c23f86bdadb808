package restore

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// unreachable answers listings and catalogs but no object of a session's
// copies and no blob, as a remote that went down after the catalogs were
// read: the connection refused, as the S3 driver reports it.
type unreachable struct{ remote.Client }

func (u unreachable) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if strings.Contains(key, "/session/") || strings.HasPrefix(key, "blobs/") {
		return nil, &remote.Error{Op: "get", Key: key, Transient: true, Err: syscall.ECONNREFUSED}
	}
	return u.Client.Get(ctx, key, off, length)
}

// A remote that does not answer says nothing of what it holds: verify
// reports the sessions unchecked, not damaged, and restore reports them not
// fetched, not refused, writing nothing; once it answers, both succeed.
func TestUnansweredIsNotDamage(t *testing.T) {
	r := fileRemote(t)
	m := newMachine(t, r, "laptop")
	f := corpus(t)[2]
	rel := sessionPath("-w", f.id, 0)
	m.write(rel, f.data, base)
	m.backup()
	if err := os.Remove(m.path(rel)); err != nil {
		t.Fatal(err)
	}
	down := repo.New(unreachable{r.Client()}, repo.NewZstd())

	checks, problems, err := Verify(context.Background(), down, nil, Options{AgentDir: m.agentDir})
	if err != nil || len(problems) > 0 || len(checks) != 1 {
		t.Fatalf("verify: %v %v %d checks", err, problems, len(checks))
	}
	c := checks[0]
	if c.OK() || c.Damaged() || len(c.Problems) > 0 {
		t.Errorf("verify with the remote down: ok %v, damaged %v, problems %q; want unchecked only", c.OK(), c.Damaged(), c.Problems)
	}
	if len(c.Unchecked) == 0 || !strings.Contains(strings.Join(c.Unchecked, "; "), "connection refused") {
		t.Errorf("unchecked %q, want the refused connection", c.Unchecked)
	}

	rep, err := Run(context.Background(), down, []string{f.id[:8]}, Options{AgentDir: m.agentDir})
	if err != nil {
		t.Fatal(err)
	}
	if res := rep.Results[0]; res.Action != NotFetched || res.OK() || !strings.Contains(res.Error, "connection refused") {
		t.Errorf("restore with the remote down: %s (%s), want %s", res.Action, res.Error, NotFetched)
	}
	if _, err := os.Lstat(m.path(rel)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("restore with the remote down left a file: %v", err)
	}

	checks, _, err = Verify(context.Background(), r, nil, Options{AgentDir: m.agentDir})
	if err != nil || !checks[0].OK() {
		t.Fatalf("verify once the remote answers: %v %+v", err, checks)
	}
	m.restoreOK([]string{f.id[:8]}, Options{})
	if got, _ := os.ReadFile(m.path(rel)); string(got) != string(f.data) {
		t.Error("restore once the remote answers: wrong bytes")
	}
}
