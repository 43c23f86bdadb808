package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
	"github.com/ompsync/ompsync/transcript"
)

// Printed is a session's bytes as Cat read them, every one verified: in
// memory, or past their first MiB in a temp file, which Close removes.
type Printed struct {
	ID string
	// Size is how many bytes it holds.
	Size int64
	// Sources are the copies it holds, by machine and generation.
	Sources []Source
	// Store is the agent that wrote the session.
	Store *store.Store
	out   content
	m     *merger
	f     *fetched
}

// describeBytes is how much of a session Transcript reads for its title
// and cwd, as the agent does when a generation begins.
const describeBytes = 64 << 10

// WriteTo writes the session's bytes to w, a buffer at a time.
func (p *Printed) WriteTo(w io.Writer) (int64, error) {
	return io.CopyBuffer(onlyWriter{w}, p.out.section(0), make([]byte, compareBuf))
}

// Transcript writes the session as a readable transcript (cat --text),
// its lines read as its agent writes them, one at a time, the heading
// naming the session's id, title and cwd.
func (p *Printed) Transcript(w io.Writer, opts transcript.RenderOptions) error {
	st := p.Store
	start := make([]byte, min(p.Size, describeBytes))
	if _, err := p.out.ReadAt(start, 0); err != nil {
		return err
	}
	info, _ := st.Describe(start)
	opts.Format, opts.Heading = st, transcript.Heading(p.ID, info.Title, info.Cwd)
	return transcript.RenderFrom(w, p.out.section(0), opts)
}

// Close removes the temp files Cat left.
func (p *Printed) Close() {
	p.m.done()
	p.f.discard()
}

// Cat reads the session prefix names and returns its verified bytes: what
// a restore into an empty agent dir would write, every machine's copy
// (opts.Machine's alone, when set; opts.Generation, when set) combined by
// the merge rule. Its artifacts and blobs are not read, and nothing is
// written but temp files in the system's temp folder: each copy streams
// there past its first MiB, verified as it arrives, so that memory stays
// a few buffers whatever the session's size, and no byte is printed before
// every byte is verified. The caller closes what it returns.
func Cat(ctx context.Context, r *repo.Repo, prefix string, opts Options) (*Printed, []string, error) {
	opts.setDefaults()
	if opts.Generation != "" && !repo.ValidGeneration(opts.Generation) {
		return nil, nil, fmt.Errorf("--generation %q: want 16 hex digits, as 'ompsync history' shows", opts.Generation)
	}
	opts.sessionOnly, opts.DryRun, opts.AgentDir = true, true, ""
	p, targets, err := planTargets(ctx, r, opts, []string{prefix})
	if err != nil {
		return nil, p.problems, err
	}
	t := targets[0]
	f, err := fetch(ctx, r, t, opts, nil)
	if err != nil {
		return nil, p.problems, err
	}
	// The merge rule as restore applies it into an empty agent dir: a
	// buffer at a time, or, for copies that diverged, line by line within
	// MaxMergeSize.
	opts.mergeMu = new(sync.Mutex)
	m := &merger{Options: opts}
	pr := &Printed{ID: t.id, Store: opts.Store, m: m, f: f}
	w, err := m.plan("session "+t.id, false, f.session, format{opts.Store, true, true})
	if err == nil && len(w.out.apart) > 0 {
		err = errors.New("the copies diverged and cannot be merged") // not for session files
	}
	if err != nil {
		pr.Close()
		return nil, p.problems, err
	}
	pr.out, pr.Size = w.out.body, w.out.body.size()
	for _, i := range w.out.from {
		pr.Sources = append(pr.Sources, Source{Machine: f.session[i].machine, Generation: f.session[i].generation})
	}
	return pr, p.problems, nil
}
