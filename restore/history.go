package restore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// SessionHistory is every copy the remote holds of one session.
type SessionHistory struct {
	ID string `json:"id"`
	// Copies are by machine, then generation, oldest first.
	Copies []Copy `json:"copies"`
	// Problems are copies that could not be described fully (an
	// unreadable meta or first chunk); the rest of each copy is listed.
	Problems []string `json:"problems,omitempty"`
}

// Copy is one generation of a session on one machine.
type Copy struct {
	Machine    string `json:"machine"`
	Generation string `json:"generation"`
	// Started is when the generation began (its name: the writing
	// machine's clock), Reason why (new, rewritten, shrank, ...), and
	// Previous the generation it replaced.
	Started  time.Time `json:"started"`
	Reason   string    `json:"reason,omitempty"`
	Previous string    `json:"previous,omitempty"`
	// Bytes are what its chunks hold.
	Bytes int64  `json:"bytes"`
	Title string `json:"title,omitempty"`
	Path  string `json:"path,omitempty"`
	Cwd   string `json:"cwd,omitempty"`
	// Project is the project the machine recorded cwd in (its catalog's).
	Project *project.ID `json:"project,omitempty"`
	// LastUpload is when its last bytes were uploaded: the last chunk's
	// upload mark, or else the newest modification time the listing shows
	// for its objects (a rekey's or compaction's, when one rewrote them).
	LastUpload time.Time `json:"last_upload"`
	// Current is the machine's newest complete generation, the one a
	// restore takes; State is then what the machine's catalog says of the
	// session (present, deleted or archived).
	Current bool   `json:"current"`
	State   string `json:"state,omitempty"`
	// Incomplete: chunks without meta, an upload cut off as it began;
	// readers ignore it.
	Incomplete bool `json:"incomplete,omitempty"`
}

// History describes every copy of the session prefix names, on every
// machine (or opts.Machine): each generation, when and why it began, its
// size, title and path, its last upload, and whether it is current. It
// reads one LIST of the session, and each generation's meta; titles of the
// copies the catalogs do not describe come from their head or first chunk.
func History(ctx context.Context, r *repo.Repo, prefix string, opts Options) (*SessionHistory, []string, error) {
	opts.setDefaults()
	p, targets, err := planTargets(ctx, r, opts, []string{prefix})
	if err != nil {
		return nil, p.problems, err
	}
	t := targets[0]
	invs, err := inventory(ctx, r, t.id, opts, nil)
	if err != nil {
		return nil, p.problems, fmt.Errorf("list session %s: %w", t.id, err)
	}
	h := &SessionHistory{ID: t.id}
	var jobs []func() []string // each describes its own element of h.Copies
	for _, inv := range invs {
		if inv.Stream.Name != repo.SessionStream {
			continue
		}
		newest := inv.Newest()
		e := t.entry(inv.Stream.Machine)
		for _, g := range inv.Generations {
			_, covered := repo.Cover(g.Chunks)
			c := Copy{
				Machine: inv.Stream.Machine, Generation: g.Name, Started: repo.GenerationTime(g.Name),
				Bytes: covered, LastUpload: lastUpload(g), Current: g == newest, Incomplete: !g.HasMeta,
			}
			described := false
			if c.Current && e != nil {
				c.State = e.State
				if e.Generation == g.Name {
					c.Title, c.Path, c.Cwd, c.Project, described = e.Title, e.Path, e.Cwd, e.Project, true
				}
			}
			h.Copies = append(h.Copies, c)
			if i := len(h.Copies) - 1; g.HasMeta {
				jobs = append(jobs, func() []string { return describe(ctx, r, opts.Store, inv.Stream, g, &h.Copies[i], !described) })
			}
		}
	}
	problems := make([][]string, len(jobs))
	parallel(len(jobs), opts.Parallel, func(i int) { problems[i] = jobs[i]() })
	h.Problems = slices.Concat(problems...)
	if err := ctx.Err(); err != nil {
		return nil, p.problems, err
	}
	return h, p.problems, nil
}

// describe fills in what a generation's meta says, and with title its
// title from the head, or else from the first chunk.
func describe(ctx context.Context, r *repo.Repo, st *store.Store, s repo.Stream, g *repo.Generation, c *Copy, title bool) []string {
	var problems []string
	picked, _ := repo.Cover(g.Chunks)
	m, err := retried(ctx, func() (repo.Meta, error) { return r.GenerationMeta(ctx, s, g) })
	if err != nil {
		problems = append(problems, fmt.Sprintf("machine %s, generation %s: %v", s.Machine, g.Name, err))
	} else {
		c.Reason, c.Previous = m.Reason, m.Previous
		if c.Path == "" {
			c.Path, c.Cwd = m.Path, m.Cwd
		}
	}
	if len(picked) > 0 {
		last := picked[len(picked)-1]
		if at, err := retried(ctx, func() (time.Time, error) { return r.UploadedAt(ctx, s, g.Name, last) }); err == nil {
			c.LastUpload = at
		}
	}
	if !title {
		return problems
	}
	if g.HasHead {
		if head, err := retried(ctx, func() ([]byte, error) { return r.GetHead(ctx, s, g.Name) }); err == nil {
			if title, ok := st.SlotTitle(head); ok {
				c.Title = title
				return problems
			}
		}
	}
	if len(picked) == 0 {
		return problems
	}
	data, err := retried(ctx, func() ([]byte, error) {
		_, data, err := r.GetChunk(ctx, s, g.Name, picked[0].Start, picked[0].End)
		return data, err
	})
	if err != nil {
		return append(problems, fmt.Sprintf("machine %s, generation %s: %v", s.Machine, g.Name, err))
	}
	if info, ok := st.Describe(data); ok {
		c.Title = info.Title
	}
	return problems
}

// lastUpload is the newest modification time among a generation's
// objects: what LastUpload is until the last chunk's marks are read.
func lastUpload(g *repo.Generation) time.Time {
	t := g.MetaModTime
	if g.HeadModTime.After(t) {
		t = g.HeadModTime
	}
	for _, c := range g.Chunks {
		if c.ModTime.After(t) {
			t = c.ModTime
		}
	}
	return t
}
