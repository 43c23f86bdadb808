package restore

import (
	"context"
	"errors"
	"fmt"

	"github.com/ompsync/ompsync/repo"
)

// Printed is a session's bytes as Cat read them.
type Printed struct {
	ID   string
	Data []byte
	// Sources are the copies Data holds, by machine and generation.
	Sources []Source
}

// Cat reads the session prefix names and returns its verified bytes: what
// a restore into an empty agent dir would write, every machine's copy
// (opts.Machine's alone, when set; opts.Generation, when set) combined by
// the merge rule. Its artifacts and blobs are not read, and nothing is
// written anywhere.
func Cat(ctx context.Context, r *repo.Repo, prefix string, opts Options) (*Printed, []string, error) {
	opts.setDefaults()
	if opts.Generation != "" && !repo.ValidGeneration(opts.Generation) {
		return nil, nil, fmt.Errorf("--generation %q: want 16 hex digits, as 'ompsync history' shows", opts.Generation)
	}
	opts.sessionOnly = true
	p, err := newPlanner(ctx, r, opts)
	if err != nil {
		return nil, nil, err
	}
	targets, err := p.targets([]string{prefix})
	if err != nil {
		return nil, p.problems, err
	}
	t := targets[0]
	f, err := fetch(ctx, r, t, opts, nil)
	if err != nil {
		return nil, p.problems, err
	}
	copies := make([][]byte, len(f.session))
	for i, c := range f.session {
		copies[i] = c.data
	}
	out, err := combine(nil, false, copies, format{opts.Store, true, true})
	if err != nil {
		return nil, p.problems, fmt.Errorf("session %s: %w", t.id, err)
	}
	if out.diverged {
		return nil, p.problems, errors.New("the copies diverged and cannot be merged") // not for session files
	}
	pr := &Printed{ID: t.id, Data: out.data}
	for _, i := range out.from {
		pr.Sources = append(pr.Sources, Source{Machine: f.session[i].machine, Generation: f.session[i].generation})
	}
	return pr, p.problems, nil
}
