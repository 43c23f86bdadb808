package restore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// Place is one agent's sessions: its store, its repository on the remote
// (repo.Agent) and the folder its sessions go to.
type Place struct {
	Store *store.Store
	Repo  *repo.Repo
	Dir   string
}

// Places are the agents the remote holds sessions of: omp always, and each
// known agent with a folder under v1/agents/ (one delimiter LIST). dir
// gives an agent's local folder. An agent the remote holds that this
// ompsync does not know is a problem, not an error: its sessions are left
// alone.
func Places(ctx context.Context, r *repo.Repo, dir func(agent string) string) ([]Place, []string, error) {
	names, err := r.Agents(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := []Place{{Store: store.OMP(), Repo: r, Dir: dir(repo.DefaultAgent)}}
	var problems []string
	for _, name := range names {
		st, err := store.ByName(name)
		if err != nil {
			problems = append(problems, fmt.Sprintf("the remote holds sessions of agent %q, which this ompsync does not know (upgrade ompsync to restore them)", name))
			continue
		}
		ar, err := r.Agent(name)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, Place{Store: st, Repo: ar, Dir: dir(name)})
	}
	return out, problems, nil
}

// forPlace is opts for one place.
func forPlace(opts Options, pl Place) Options {
	opts.Store, opts.AgentDir = pl.Store, pl.Dir
	return opts
}

// RunAll is Run across places: a prefix names one session of any agent
// (ambiguous when several agents' sessions start with it), each restored
// into its agent's folder; --all restores every agent's. With one place it
// is Run.
func RunAll(ctx context.Context, places []Place, prefixes []string, opts Options) (*Report, error) {
	if len(places) == 1 {
		return Run(ctx, places[0].Repo, prefixes, forPlace(opts, places[0]))
	}
	plans, err := plan(ctx, places, opts)
	if err != nil {
		return nil, err
	}
	if opts.All {
		prefixes = nil
	}
	rep := &Report{}
	err = eachPlace(ctx, places, prefixes, opts, plans, func(i int, ids []string, o Options) error {
		// Run reports no catalog problems of its own when given the
		// catalogs: every place's come from here.
		rep.Problems = append(rep.Problems, plans[i].problems...)
		if !opts.All && len(ids) == 0 {
			return nil
		}
		o.Catalogs = plans[i].catalogs
		if o.Catalogs == nil {
			o.Catalogs = []repo.Catalog{} // read already: none
		}
		r, err := Run(ctx, places[i].Repo, ids, o)
		if err != nil {
			return err
		}
		rep.Results = append(rep.Results, r.Results...)
		rep.Blobs += r.Blobs
		rep.DeletedLeft += r.DeletedLeft
		rep.Problems = append(rep.Problems, r.Problems...)
		rep.Cleanup = append(rep.Cleanup, r.Cleanup...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// eachPlace calls run for each place, as one run across places: with one
// place, on the prefixes and opts as given; with several, on the exact ids
// of the place's sessions the prefixes name (locate, on plans, read here
// when nil; none without prefixes: the caller skips a place the prefixes
// do not name), its progress added to the places' before it and its error
// prefixed with its agent.
func eachPlace(ctx context.Context, places []Place, prefixes []string, opts Options, plans []*planner, run func(i int, ids []string, o Options) error) error {
	if len(places) == 1 {
		return run(0, prefixes, forPlace(opts, places[0]))
	}
	ids := make([][]string, len(places))
	if len(prefixes) > 0 {
		var err error
		if plans == nil {
			if plans, err = plan(ctx, places, opts); err != nil {
				return err
			}
		}
		if ids, err = locate(plans, prefixes, opts); err != nil {
			return err
		}
	}
	next := progressAcross(opts.Progress)
	for i, pl := range places {
		o := forPlace(opts, pl)
		o.Latest, o.Choose = false, nil // exact ids
		o.Progress = next()
		if err := run(i, ids[i], o); err != nil {
			return fmt.Errorf("%s: %w", pl.Store.Name(), err)
		}
	}
	return nil
}

// plan reads every place's catalogs once. A machine asked for that backed
// up some agents only has none of the others': those places are empty.
func plan(ctx context.Context, places []Place, opts Options) ([]*planner, error) {
	plans := make([]*planner, len(places))
	var noMachine error
	found := false
	for i, pl := range places {
		o := forPlace(opts, pl)
		o.setDefaults()
		p, err := newPlanner(ctx, pl.Repo, o)
		var nm *noMachineError
		if errors.As(err, &nm) {
			noMachine = err
			o.Catalogs = []repo.Catalog{}
			p, err = newPlanner(ctx, pl.Repo, o)
		} else if err == nil {
			found = true
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pl.Store.Name(), err)
		}
		plans[i] = p
	}
	if !found && noMachine != nil {
		return nil, noMachine
	}
	return plans, nil
}

// Find resolves one prefix across places, as RunAll does, to the place
// that holds it and the session's id (cat, history).
func Find(ctx context.Context, places []Place, prefix string, opts Options) (Place, string, error) {
	plans, err := plan(ctx, places, opts)
	if err != nil {
		return Place{}, "", err
	}
	i, id, err := locateOne(plans, prefix, opts)
	if err != nil {
		if len(places) == 1 {
			// As Run says it, with the catalogs' problems.
			_, err = plans[0].targets([]string{prefix})
		}
		return Place{}, "", err
	}
	return places[i], id, nil
}

// locate resolves each prefix to one session of one place: an exact id
// wins; a prefix that sessions of several places start with is an
// *AmbiguousError (listing each with its agent) unless opts.Latest or
// opts.Choose settles it.
func locate(plans []*planner, prefixes []string, opts Options) ([][]string, error) {
	ids := make([][]string, len(plans))
	var errs []error
	for _, pre := range prefixes {
		i, id, err := locateOne(plans, pre, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !slices.Contains(ids[i], id) {
			ids[i] = append(ids[i], id)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return ids, nil
}

func locateOne(plans []*planner, pre string, opts Options) (int, string, error) {
	type hit struct {
		place int
		t     *target
		l     Listing
	}
	var exact, hits []hit
	var notFound error
	for i, p := range plans {
		ts, err := p.match(pre)
		notFound = cmp.Or(notFound, err)
		for _, t := range ts {
			h := hit{i, t, t.listing()}
			if strings.EqualFold(t.id, strings.TrimSpace(pre)) {
				exact = append(exact, h)
			}
			hits = append(hits, h)
		}
	}
	if len(exact) == 1 {
		return exact[0].place, exact[0].t.id, nil
	}
	switch len(hits) {
	case 0:
		if notFound == nil {
			notFound = fmt.Errorf("no session id starts with %q on the remote (see 'ompsync ls')", pre)
		}
		return 0, "", notFound
	case 1:
		return hits[0].place, hits[0].t.id, nil
	}
	slices.SortFunc(hits, func(a, b hit) int { return newestFirst(a.l, b.l) })
	amb := &AmbiguousError{Prefix: pre}
	for _, h := range hits {
		amb.Candidates = append(amb.Candidates, h.l)
	}
	id := hits[0].t.id // the newest, for opts.Latest
	if !opts.Latest {
		if opts.Choose == nil {
			return 0, "", amb
		}
		var err error
		if id, err = opts.Choose(amb); err != nil {
			return 0, "", err
		}
	}
	for _, h := range hits {
		if h.t.id == id {
			return h.place, id, nil
		}
	}
	return 0, "", fmt.Errorf("session %q is not among those %q matches", id, pre)
}

// ListAll is List across places: every agent's sessions, newest first.
func ListAll(ctx context.Context, places []Place, machine string) ([]Listing, []string, error) {
	var out []Listing
	var problems []string
	plans, err := plan(ctx, places, Options{Machine: machine, Parallel: 8})
	if err != nil {
		return nil, nil, err
	}
	for _, p := range plans {
		for _, t := range p.sessions {
			out = append(out, t.listing())
		}
		problems = append(problems, p.problems...)
	}
	slices.SortFunc(out, newestFirst)
	return out, problems, nil
}

// newestFirst orders sessions as ls lists them: the last changed first.
func newestFirst(a, b Listing) int {
	return cmp.Or(b.Mtime.Compare(a.Mtime), strings.Compare(a.Agent+a.ID, b.Agent+b.ID))
}

// VerifyAll is Verify across places: the sessions the prefixes name, of
// whatever agent, or every agent's sessions without prefixes.
func VerifyAll(ctx context.Context, places []Place, prefixes []string, opts Options) ([]Check, []string, error) {
	var checks []Check
	var problems []string
	err := eachPlace(ctx, places, prefixes, opts, nil, func(i int, ids []string, o Options) error {
		if len(prefixes) > 0 && len(ids) == 0 {
			return nil
		}
		c, p, err := Verify(ctx, places[i].Repo, ids, o)
		checks = append(checks, c...)
		problems = append(problems, p...)
		return err
	})
	return checks, problems, err
}

// progressAcross reports place after place as one run: each call of next
// is the Progress of the next place, added to the places' before it (nil
// when progress is).
func progressAcross(progress func(Progress)) (next func() func(Progress)) {
	var before Progress // of the places done
	return func() func(Progress) {
		if progress == nil {
			return nil
		}
		base := before
		return func(p Progress) {
			before = Progress{Sessions: base.Sessions + p.Sessions, SessionsTotal: base.SessionsTotal + p.SessionsTotal,
				Bytes: base.Bytes + p.Bytes, BytesTotal: base.BytesTotal + p.BytesTotal}
			progress(before)
		}
	}
}
