package restore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// planner knows what the catalogs say: which sessions exist, on which
// machines, at which path. Reading them is one LIST and one GET per machine.
type planner struct {
	sessions map[string]*target
	// problems are catalogs that could not be read.
	problems []string
	opts     Options
	// deletedLeft counts the sessions --all left out as deleted.
	deletedLeft int
}

// target is one session to restore and what each machine's catalog says of it.
type target struct {
	id      string
	entries []machineEntry // sorted by machine
}

type machineEntry struct {
	machine string
	repo.CatalogEntry
}

func newPlanner(ctx context.Context, r *repo.Repo, opts Options) (*planner, error) {
	cats, problems := opts.Catalogs, []string(nil)
	if cats == nil {
		var err error
		if cats, problems, err = readCatalogs(ctx, r, opts.Machine, opts.Parallel); err != nil {
			return nil, err
		}
	}
	p := &planner{sessions: map[string]*target{}, problems: problems, opts: opts}
	for _, c := range cats {
		if opts.Machine != "" && c.Machine != opts.Machine {
			continue
		}
		for _, e := range c.Sessions {
			t := p.sessions[e.ID]
			if t == nil {
				t = &target{id: e.ID}
				p.sessions[e.ID] = t
			}
			t.entries = append(t.entries, machineEntry{machine: c.Machine, CatalogEntry: e})
		}
	}
	for _, t := range p.sessions {
		sort.Slice(t.entries, func(i, j int) bool { return t.entries[i].machine < t.entries[j].machine })
	}
	return p, nil
}

// readCatalogs reads every machine's catalog (or one machine's). A catalog
// that cannot be read or fails its checks is reported as a problem and the
// others are used; it is an error only when none can be read.
func readCatalogs(ctx context.Context, r *repo.Repo, machine string, parallel int) ([]repo.Catalog, []string, error) {
	var machines []string
	if machine != "" {
		if !repo.ValidMachine(machine) {
			return nil, nil, fmt.Errorf("machine name %q is not valid", machine)
		}
		machines = []string{machine}
	} else {
		var err error
		if machines, err = r.Machines(ctx); err != nil {
			return nil, nil, err
		}
	}
	cats := make([]repo.Catalog, len(machines))
	errs := make([]error, len(machines))
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i, m := range machines {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cats[i], errs[i] = r.GetCatalog(ctx, m)
		}()
	}
	wg.Wait()
	var out []repo.Catalog
	var problems []string
	for i, err := range errs {
		switch {
		case err == nil:
			out = append(out, cats[i])
			problems = append(problems, cats[i].Refused...)
		case errors.Is(err, remote.ErrNotFound) && machine != "":
			return nil, nil, fmt.Errorf("machine %q has no catalog on the remote (see 'ompsync ls' for the machines)", machine)
		case errors.Is(err, remote.ErrNotFound):
			// listed between LIST and GET, or a folder left without one
		default:
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			problems = append(problems, fmt.Sprintf("catalog of machine %s refused: %v", machines[i], err))
		}
	}
	if len(out) == 0 && len(problems) > 0 {
		return nil, problems, errors.New(strings.Join(problems, "; "))
	}
	return out, problems, nil
}

// deleted reports whether every machine records the session as deleted.
func (t *target) deleted() bool {
	for _, e := range t.entries {
		if e.State != repo.StateDeleted {
			return false
		}
	}
	return true
}

// newest is the catalog entry with the newest mtime: its path is where the
// session last lived.
func (t *target) newest() machineEntry {
	best := t.entries[0]
	for _, e := range t.entries[1:] {
		if e.Mtime.After(best.Mtime) || e.Mtime.Equal(best.Mtime) && e.Changed.After(best.Changed) {
			best = e
		}
	}
	return best
}

func (t *target) entry(machine string) *machineEntry {
	for i := range t.entries {
		if t.entries[i].machine == machine {
			return &t.entries[i]
		}
	}
	return nil
}

// recordedSize is the largest size a catalog records for the session.
func (t *target) recordedSize() int64 {
	var n int64
	for _, e := range t.entries {
		n = max(n, e.Size)
	}
	return n
}

// targets resolves the prefixes (or --all) to sessions, sorted by id. Every
// prefix must name exactly one session: an exact id wins, otherwise the
// candidates are listed.
func (p *planner) targets(prefixes []string) ([]*target, error) {
	if p.opts.All {
		var out []*target
		for _, t := range p.sessions {
			if p.opts.IncludeDeleted || !t.deleted() {
				out = append(out, t)
			} else {
				p.deletedLeft++
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
		return out, nil
	}
	seen := map[string]bool{}
	var out []*target
	var errs []string
	for _, pre := range prefixes {
		t, err := p.match(pre)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if !seen[t.id] {
			seen[t.id] = true
			out = append(out, t)
		}
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return out, nil
}

// match finds the one session whose id starts with pre, ignoring case, as
// omp's --resume does.
func (p *planner) match(pre string) (*target, error) {
	if pre == "" {
		return nil, errors.New("empty session id prefix")
	}
	var cands []*target
	for id, t := range p.sessions {
		if strings.EqualFold(id, pre) {
			return t, nil
		}
		if len(id) >= len(pre) && strings.EqualFold(id[:len(pre)], pre) {
			cands = append(cands, t)
		}
	}
	where := "on the remote"
	if p.opts.Machine != "" {
		where = "in the catalog of machine " + p.opts.Machine
	}
	switch len(cands) {
	case 0:
		return nil, fmt.Errorf("no session id starts with %q %s (see 'ompsync ls')", pre, where)
	case 1:
		return cands[0], nil
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].id < cands[j].id })
	const show = 10
	var names []string
	for _, t := range cands[:min(len(cands), show)] {
		e := t.newest()
		desc := t.id + " " + e.Path
		if e.Title != "" {
			desc += " (" + e.Title + ")"
		}
		names = append(names, desc)
	}
	more := ""
	if len(cands) > show {
		more = fmt.Sprintf(" and %d more", len(cands)-show)
	}
	return nil, fmt.Errorf("session id prefix %q is ambiguous: it matches %s%s; give more characters", pre, strings.Join(names, ", "), more)
}

// Listing is one session as the catalogs describe it, for `ompsync ls`.
type Listing struct {
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
	Cwd   string `json:"cwd,omitempty"`
	// Path is relative to the agent dir, from the copy changed last.
	Path     string   `json:"path"`
	Machines []string `json:"machines"`
	Size     int64    `json:"size"`
	// Mtime is the file's last change, Changed the last change of its
	// state (a move, archive or delete).
	Mtime   time.Time `json:"mtime"`
	Changed time.Time `json:"changed"`
	// State is present when any machine has the file, else archived when
	// any has it archived, else deleted.
	State string `json:"state"`
}

// List describes every session the catalogs hold (of one machine, when
// machine is set), newest first. Catalogs that cannot be read are returned
// as problems.
func List(ctx context.Context, r *repo.Repo, machine string) ([]Listing, []string, error) {
	p, err := newPlanner(ctx, r, Options{Machine: machine, Parallel: 8})
	if err != nil {
		return nil, nil, err
	}
	out := make([]Listing, 0, len(p.sessions))
	for _, t := range p.sessions {
		e := t.newest()
		l := Listing{ID: t.id, Title: e.Title, Cwd: e.Cwd, Path: e.Path, Size: e.Size, Mtime: e.Mtime, State: repo.StateDeleted}
		for _, m := range t.entries {
			l.Machines = append(l.Machines, m.machine)
			if m.Changed.After(l.Changed) {
				l.Changed = m.Changed
			}
			switch {
			case m.State == repo.StatePresent:
				l.State = repo.StatePresent
			case m.State == repo.StateArchived && l.State == repo.StateDeleted:
				l.State = repo.StateArchived
			}
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Listing) int {
		if c := b.Mtime.Compare(a.Mtime); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, p.problems, nil
}
