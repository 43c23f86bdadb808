package restore

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
	"github.com/ompsync/ompsync/transcript"
)

// Printed is a session's bytes as Cat read them.
type Printed struct {
	ID   string
	Data []byte
	// Sources are the copies Data holds, by machine and generation.
	Sources []Source
	// Store is the agent that wrote the session.
	Store store.Store
}

// describeBytes is how much of a session Transcript reads for its title
// and cwd, as the agent does when a generation begins.
const describeBytes = 64 << 10

// Transcript writes the session as a readable transcript (cat --text),
// its lines read as its agent writes them, the heading naming the
// session's id, title and cwd.
func (p *Printed) Transcript(w io.Writer, opts transcript.RenderOptions) error {
	st := p.Store
	if st == nil {
		st = store.OMP()
	}
	info, _ := st.Describe(p.Data[:min(len(p.Data), describeBytes)])
	opts.Format, opts.Heading = st, transcript.Heading(p.ID, info.Title, info.Cwd)
	return transcript.Render(w, p.Data, opts)
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
	pr := &Printed{ID: t.id, Data: out.data, Store: opts.Store}
	for _, i := range out.from {
		pr.Sources = append(pr.Sources, Source{Machine: f.session[i].machine, Generation: f.session[i].generation})
	}
	return pr, p.problems, nil
}
