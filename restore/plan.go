package restore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/safename"
	"github.com/ompsync/ompsync/store"
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
	// catalogs are what the planner read (or was given).
	catalogs []repo.Catalog
}

// target is one session to restore and what each machine's catalog says of it.
type target struct {
	agent   string // the store's name
	id      string
	entries []machineEntry // sorted by machine
	// cwd is the folder the session runs in here, once placed: each copy
	// is rewritten from the folder its machine recorded to this one.
	cwd string
	// local is the session's file here (relative to the agent dir), when
	// there is one.
	local string
}

type machineEntry struct {
	machine string
	repo.CatalogEntry
}

// planTargets reads the catalogs and finds the sessions prefixes name
// (every one with opts.All); the planner is never nil, for its problems.
func planTargets(ctx context.Context, r *repo.Repo, opts Options, prefixes []string) (*planner, []*target, error) {
	p, err := newPlanner(ctx, r, opts)
	if err != nil {
		return &planner{}, nil, err
	}
	targets, err := p.targets(prefixes)
	return p, targets, err
}

func newPlanner(ctx context.Context, r *repo.Repo, opts Options) (*planner, error) {
	cats, problems := opts.Catalogs, []string(nil)
	if cats == nil {
		var err error
		if cats, problems, err = readCatalogs(ctx, r, opts.Machine, opts.Parallel); err != nil {
			return nil, err
		}
	}
	p := &planner{sessions: map[string]*target{}, problems: problems, opts: opts, catalogs: cats}
	for _, c := range cats {
		if opts.Machine != "" && c.Machine != opts.Machine {
			continue
		}
		for _, e := range c.Sessions {
			t := p.sessions[e.ID]
			if t == nil {
				t = &target{agent: opts.Store.Name(), id: e.ID}
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

// uses are the folders machine's own catalog records its sessions ran in.
func (p *planner) uses(machine string) []project.Use {
	var out []project.Use
	for _, c := range p.catalogs {
		if c.Machine != machine {
			continue
		}
		for _, e := range c.Sessions {
			if e.Project != nil && e.Project.Origin != "" {
				out = append(out, project.Use{Cwd: e.Cwd, ID: *e.Project, Used: e.Mtime})
			}
		}
	}
	return out
}

// blobMtimes is each blob's mtime as the catalogs record it: the earliest
// where machines differ (each recorded its own copy; the first was the
// original).
func (p *planner) blobMtimes() map[string]time.Time {
	out := map[string]time.Time{}
	for _, c := range p.catalogs {
		for _, b := range c.Blobs {
			if t, ok := out[b.Name]; !ok || b.Mtime.Before(t) {
				out[b.Name] = b.Mtime
			}
		}
	}
	return out
}

// readCatalogs reads every machine's catalog (or one machine's). A catalog
// that cannot be read or fails its checks is reported as a problem and the
// others are used; it is an error only when none can be read.
func readCatalogs(ctx context.Context, r *repo.Repo, machine string, limit int) ([]repo.Catalog, []string, error) {
	var machines []string
	if machine != "" {
		if !safename.Machine(machine) {
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
	parallel(len(machines), limit, func(i int) { cats[i], errs[i] = r.GetCatalog(ctx, machines[i]) })
	var out []repo.Catalog
	var problems []string
	for i, err := range errs {
		switch {
		case err == nil:
			out = append(out, cats[i])
			problems = append(problems, cats[i].Refused...)
		case errors.Is(err, remote.ErrNotFound) && machine != "":
			return nil, nil, &noMachineError{machine}
		case errors.Is(err, remote.ErrNotFound):
			// Listed between LIST and GET, or a folder left without one;
			// but a folder that still holds the recent changes lost its
			// catalog, and every session it listed would go unseen.
			if _, serr := r.Client().Stat(ctx, repo.RecentKey(machines[i])); serr == nil {
				problems = append(problems, fmt.Sprintf("the catalog of machine %s is missing from the remote (its recent changes are there), so its sessions are not listed: run 'ompsync agent --once' on %s to write it again", machines[i], machines[i]))
			} else if !errors.Is(serr, remote.ErrNotFound) {
				problems = append(problems, fmt.Sprintf("catalog of machine %s: %v", machines[i], serr))
			}
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

// noMachineError: the machine asked for has no catalog (of this agent).
type noMachineError struct{ machine string }

func (e *noMachineError) Error() string {
	return fmt.Sprintf("machine %q has no catalog on the remote (see 'ompsync ls' for the machines)", e.machine)
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
	// MaxFunc keeps the first of equals: the lowest machine's.
	return slices.MaxFunc(t.entries, func(a, b machineEntry) int {
		return cmp.Or(a.Mtime.Compare(b.Mtime), a.Changed.Compare(b.Changed))
	})
}

func (t *target) entry(machine string) *machineEntry {
	for i := range t.entries {
		if t.entries[i].machine == machine {
			return &t.entries[i]
		}
	}
	return nil
}

// cataloged is the catalog entry that describes generation g of s: nil
// unless s is the session stream and g the generation its machine's
// catalog names.
func (t *target) cataloged(s repo.Stream, g *repo.Generation) *machineEntry {
	if e := t.entry(s.Machine); e != nil && s.Name == repo.SessionStream && e.Generation == g.Name {
		return e
	}
	return nil
}

// short refuses a copy of generation g of s that holds fewer bytes (size)
// than its machine's catalog records: the catalog promises more than is
// there.
func (t *target) short(s repo.Stream, g *repo.Generation, size int64) error {
	if e := t.cataloged(s, g); e != nil && size < e.Size {
		return fmt.Errorf("session %s, machine %s: %w: the remote holds %d bytes of the %d its catalog records", t.id, s.Machine, repo.ErrGap, size, e.Size)
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
// prefix must name exactly one session: an exact id wins; otherwise one
// that several ids start with is an *AmbiguousError, unless opts.Latest
// picks the newest or opts.Choose picks one.
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
	// As across places: an ambiguity settled by --latest or the caller's
	// choice.
	ids, err := locate([]*planner{p}, prefixes, p.opts)
	if err != nil {
		if len(p.problems) > 0 {
			// A session a catalog names unsafely is dropped from it: say
			// why it may not be found.
			err = errors.Join(err, fmt.Errorf("the catalogs have problems: %s", strings.Join(p.problems, "; ")))
		}
		return nil, err
	}
	var out []*target
	for _, id := range ids[0] {
		out = append(out, p.sessions[id])
	}
	return out, nil
}

// match finds the sessions whose ids start with pre, ignoring case, as
// omp's --resume does: the one whose whole id it is, or every one it
// starts (locateOne settles between them). A session file's name or path,
// which holds the whole id, names that session.
func (p *planner) match(pre string) ([]*target, error) {
	if pre == "" {
		return nil, errors.New("empty session id prefix")
	}
	if id, isFile, err := fileNameID(p.opts.Store, pre); isFile {
		if err != nil {
			return nil, err
		}
		pre = id
	}
	var cands []*target
	for id, t := range p.sessions {
		if strings.EqualFold(id, pre) {
			return []*target{t}, nil
		}
		if len(id) >= len(pre) && strings.EqualFold(id[:len(pre)], pre) {
			cands = append(cands, t)
		}
	}
	if len(cands) == 0 {
		where := "on the remote"
		if p.opts.Machine != "" {
			where = "in the catalog of machine " + p.opts.Machine
		}
		return nil, fmt.Errorf("no session id starts with %q %s (see 'ompsync ls')", pre, where)
	}
	return cands, nil
}

// fileNameID reads the session id out of a session file's name or path
// (<time>_<id>.jsonl, archived .jsonl.<compression>, with or without
// folders), which a user may give wherever an id prefix goes: it is what ls
// and omp show. isFile says whether arg looks like one at all.
func fileNameID(st *store.Store, arg string) (id string, isFile bool, err error) {
	if !strings.ContainsAny(arg, `/\`) && path.Ext(arg) != ".jsonl" && path.Ext(strings.TrimSuffix(arg, path.Ext(arg))) != ".jsonl" {
		return "", false, nil
	}
	id, ok := st.IDFromName(filepath.ToSlash(arg))
	if !ok {
		return "", true, fmt.Errorf("%q is neither a session id prefix nor a session file name (<time>_<id>.jsonl)", arg)
	}
	return id, true, nil
}

// Candidate is one of the sessions an ambiguous prefix matches, as ls
// lists it.
type Candidate = Listing

// AmbiguousError is a prefix that several session ids start with (UUIDv7
// ids start with their creation time: 8 hex digits are shared by every
// session begun within about 72 minutes).
type AmbiguousError struct {
	Prefix string
	// Candidates are newest first.
	Candidates []Candidate
}

func (e *AmbiguousError) Error() string {
	const show = 10
	var names []string
	for _, c := range e.Candidates[:min(len(e.Candidates), show)] {
		desc := c.ID + " " + c.Path
		if c.Title != "" {
			desc += " (" + c.Title + ")"
		}
		names = append(names, desc)
	}
	more := ""
	if len(e.Candidates) > show {
		more = fmt.Sprintf(" and %d more", len(e.Candidates)-show)
	}
	return fmt.Sprintf("session id prefix %q is ambiguous: it matches %s%s; give more characters, or --latest for the newest", e.Prefix, strings.Join(names, ", "), more)
}

// Listing is one session as the catalogs describe it, for `ompsync ls`.
type Listing struct {
	// Agent wrote the session: omp, pi, claude or codex.
	Agent string `json:"agent"`
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
	Cwd   string `json:"cwd,omitempty"`
	// Project is the project the copy changed last recorded cwd in.
	Project *project.ID `json:"project,omitempty"`
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

// listing describes t from its catalog entries.
func (t *target) listing() Listing {
	e := t.newest()
	l := Listing{Agent: t.agent, ID: t.id, Title: e.Title, Cwd: e.Cwd, Project: e.Project, Path: e.Path, Size: e.Size, Mtime: e.Mtime, State: repo.StateDeleted}
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
	return l
}
