package agent

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
)

// listDenier refuses every listing while denied is set, as a bucket policy
// that grants put and get but not s3:ListBucket does.
type listDenier struct {
	remote.Client
	denied atomic.Bool
}

func (d *listDenier) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	if !d.denied.Load() {
		return d.Client.List(ctx, prefix, opts)
	}
	return func(yield func(remote.ObjectInfo, error) bool) {
		yield(remote.ObjectInfo{}, &remote.Error{Op: "list", Key: prefix, Err: errors.New("AccessDenied: Access Denied")})
	}
}

// A remote that takes uploads but refuses to be listed: the agent uploads,
// but cannot check that the remote holds what it acknowledged, and a
// restore, which lists the remote, could not bring anything back. agent
// --once fails with one line saying so and what to check (never "all
// uploaded" and exit 0), the WARN is said once however many passes fail,
// and once the listing works again the agent says so and --once succeeds.
func TestUncheckedWhileListingRefused(t *testing.T) {
	deny := &listDenier{Client: newFileClient(t)}
	e := newEnv(t, deny)
	e.opts.AuditInterval = time.Nanosecond // every full pass checks
	ids := e.writeSessions(2)
	logs := e.logTo()
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Once(context.Background()); err != nil {
		t.Fatalf("first backup: %v", err)
	}

	// The listing fails from now on, as it would for a running agent
	// whose key lost the permission.
	deny.denied.Store(true)
	for rel, id := range e.writeSessionsFrom(2, 1) {
		ids[rel] = id
	}
	for i := range 3 {
		err := a.Once(context.Background())
		if err == nil {
			t.Fatalf("run %d: agent --once succeeded with a remote it could not list", i)
		}
		for _, want := range []string{"could not list the remote", "s3:ListBucket", "AccessDenied"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("run %d: error %q does not say %q", i, err, want)
			}
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("run %d: error is more than one line: %q", i, err)
		}
	}
	if tot := a.Totals(); !strings.Contains(tot, "uploads not checked against the remote") || !strings.Contains(tot, "3 uploaded") {
		t.Errorf("totals line %q: want all three uploaded (the tally is of the agent's life) and the check said missing", tot)
	}
	if n := strings.Count(logs.String(), "cannot list the remote to check"); n != 1 {
		t.Errorf("%d WARN lines about the listing over 3 runs, want 1:\n%s", n, logs)
	}
	// The uploads themselves went through.
	deny.denied.Store(false)
	for rel, id := range ids {
		e.assertRemoteEquals(rel, id)
	}

	if err := a.Once(context.Background()); err != nil {
		t.Fatalf("with the listing back: %v", err)
	}
	if !strings.Contains(logs.String(), "the remote can be listed again") {
		t.Errorf("no line says the listing works again:\n%s", logs)
	}
	if tot := a.Totals(); strings.Contains(tot, "not checked") {
		t.Errorf("totals line %q still says the uploads are not checked", tot)
	}
}
