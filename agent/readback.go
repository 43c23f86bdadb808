package agent

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/ompsync/ompsync/notify"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// readBackEvery is how often the agent reads back a sample of its objects.
const readBackEvery = 24 * time.Hour

// readBackFix says what to do about a damaged copy the read-back found.
const readBackFix = "a copy this machine backed up is damaged on the remote: run 'ompsync verify' to see what, and 'ompsync verify --repair' to put it back from the local file"

// readBack reads back, once a day, about Options.ReadBackBytes of what this
// machine uploaded: the current generation of each of its streams, every
// hash checked as verify checks it, in the order of their keys from where
// the last day's sample stopped, so every stream is read again within
// (bytes backed up / ReadBackBytes) days. A stream is read whole, so a
// day's sample may pass the budget by one stream (at most
// repo.MaxStreamSize). Damage is said at WARN once per copy, with what to
// do, and sent as a damaged alert; a remote that does not answer ends the
// day's sample, and the next tick goes on from where it stopped.
func (a *Agent) readBack(ctx context.Context) {
	if a.opts.ReadBackBytes <= 0 {
		return
	}
	now := a.now()
	if !a.due(&a.state.ReadBackAt, now, readBackEvery) {
		return
	}
	var keys []string
	for k, f := range a.state.Streams {
		if f.Generation != "" && f.Offset > 0 && (f.State == repo.StatePresent || f.State == repo.StateArchived) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	// From the first key after where the last sample stopped.
	start := sort.Search(len(keys), func(i int) bool { return keys[i] > a.state.ReadBackAfter })
	left := a.opts.ReadBackBytes
	for i := 0; i < len(keys) && left > 0 && ctx.Err() == nil; i++ {
		k := keys[(start+i)%len(keys)]
		f := a.state.Streams[k]
		n, err := a.readBackStream(ctx, f)
		if err != nil && (remote.IsTransient(err) || ctx.Err() != nil) {
			a.state.changed.all = true
			return // the rest at a later tick
		}
		a.state.ReadBackAfter, left = k, left-n
		what := "copy of " + f.Path
		if err != nil {
			a.problems.warn(a.log, now, what, readBackFix, err)
			if r, ok := a.opts.Notifier.(reporter); ok {
				r.Report(notify.Damaged, fmt.Sprintf("the backed-up copy of %s is damaged on the remote; run 'ompsync verify --repair'", f.Path))
			}
			continue
		}
		a.problems.clear(a.log, what)
	}
	a.state.ReadBackAt = now
	a.state.changed.all = true
}

// reporter is a Notifier that can send an alert of its own.
type reporter interface {
	Report(ev notify.Event, msg string)
}

// readBackStream reads f's current generation from the remote, every hash
// checked, and returns how many bytes it read. A generation the remote
// does not list is not read: the audit puts what the remote lost back.
func (a *Agent) readBackStream(ctx context.Context, f *FileState) (int64, error) {
	s := f.stream(a.opts.Machine)
	invs, err := a.repo.Inventory(ctx, s.SessionID, s.Machine)
	if err != nil {
		return 0, err
	}
	g := listedGeneration(invs, f)
	if !g.HasMeta {
		return 0, nil
	}
	st, err := a.repo.StreamGeneration(ctx, s, &g, repo.MaxStreamSize, io.Discard, true)
	if err != nil {
		return st.Size, fmt.Errorf("%s generation %s: %w", s.Prefix(), g.Name, err)
	}
	if st.Size < f.Offset {
		return st.Size, fmt.Errorf("%s generation %s: %w: the remote holds %d bytes of the %d uploaded", s.Prefix(), g.Name, repo.ErrGap, st.Size, f.Offset)
	}
	return st.Size, nil
}
