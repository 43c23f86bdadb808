package restore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/search"
)

// GrepOptions configure Grep.
type GrepOptions struct {
	// Options: Machine, IncludeDeleted, Latest, Choose, Parallel,
	// MaxStreamSize, Logger and Now (the clock) apply.
	Options
	Pattern *search.Matcher
	// Cache keeps what was read for the next search (nil: nothing kept).
	Cache *search.Cache
	// Since, when set, searches only entries from then on.
	Since time.Time
	// maxLine bounds one line indexed (0: search.MaxLine; tests).
	maxLine int
	// maxHeld and maxLines replace grepHeld and grepMaxLines (tests).
	maxHeld, maxLines int
}

// olderRelist is how long the older generations a search found of a
// session stand before it lists the session again: retention removes
// them, and a search should not find lines the remote no longer keeps.
const olderRelist = 24 * time.Hour

// GrepMatch is one line of a session that matches, found once however
// many copies hold it.
type GrepMatch struct {
	// Agent is the agent whose session it is (omp, pi, ...), set by
	// GrepAll.
	Agent   string    `json:"agent,omitempty"`
	Session string    `json:"session"`
	Title   string    `json:"title,omitempty"`
	Entry   string    `json:"entry,omitempty"`
	Role    string    `json:"role"`
	Kind    string    `json:"kind"`
	Time    time.Time `json:"time,omitzero"`
	Text    string    `json:"text"`
	// Machines hold the line: in their current copy, or, when Older,
	// only in an older one (a session rewritten smaller or cut since,
	// whose older generation the remote still keeps).
	Machines []string `json:"machines"`
	Older    bool     `json:"older,omitempty"`
	// State is the session's (present, archived, deleted).
	State string `json:"state"`
	// Project is the session's, as ls shows it (the MCP search tool's
	// filter); grep's JSON leaves it out, as it always has.
	Project *project.ID `json:"-"`
}

// Label is the match's role, with its kind when that says more (a tool
// call in an assistant's entry: "assistant/toolCall").
func (gm GrepMatch) Label() string {
	if gm.Kind != "text" && gm.Kind != gm.Role {
		return gm.Role + "/" + gm.Kind
	}
	return gm.Role
}

// GrepReport says what a search read.
type GrepReport struct {
	Sessions, Copies int
	// Fetched copies were read from the remote (new, grown or rewritten
	// since the cache last saw them), Bytes the session bytes that took.
	Fetched int
	Bytes   int64
	Matches int
	// Problems are copies that could not be read: their lines are
	// searched as the cache last had them, if at all.
	Problems []string
	// DeletedLeft counts sessions left out as deleted.
	DeletedLeft int
	// LeftOut name the lines not searched, longer than a search reads of
	// one (search.MaxLine).
	LeftOut []string
}

// grepCopy is one machine's copy of a session being searched.
type grepCopy struct {
	e  machineEntry
	st *search.CopyState // what the cache holds, or recs
	// recs are the copy's records when they are not in the cache (too
	// large for it, or no cache): a part of the search's spool.
	recs  *io.SectionReader
	fresh bool
	// older: e names an older generation of the machine's (e.Size its
	// bytes), searched beside the current copy.
	older bool
	// g is the generation the listing found (olderCopies), and for a
	// current copy olderGens the machine's older ones.
	g         *repo.Generation
	olderGens []string
}

// key is the copy's name in the search cache.
func (c *grepCopy) key() string {
	if c.older {
		return search.OlderCopy(c.e.machine, c.e.Generation)
	}
	return c.e.machine
}

// olderCached names the older generations of c's machine the cache
// holds, as c's state names them (it is a current copy's).
func (c *grepCopy) olderCached() []string {
	if c.older || c.st == nil {
		return nil
	}
	return c.st.Older
}

// grepPlace searches the text of every session the catalogs hold (those the
// prefixes name, when given), every machine's copy, for opts.Pattern, and
// calls emit for each matching line once, session by session, newest
// first. A copy the cache holds as the catalog describes it is not read
// from the remote at all; one that grew is read from where the cache left
// off (repo.StreamGenerationFrom); a rewritten one is read again. Bytes
// are indexed as they stream, a line at a time, and records are searched
// from disk a buffer at a time: memory stays a few buffers and the
// longest line, whatever the sessions' size. A copy's new records count
// only once all its bytes are verified: one that cannot be read is named
// in the report's problems, and searched as the cache last had it, if at
// all; nothing of what this search read of it is (not even the chunks
// verified before the damage), and no match is emitted before every copy
// was read. What it read adds to rep (GrepAll: the places').
func grepPlace(ctx context.Context, r *repo.Repo, prefixes []string, opts GrepOptions, rep *GrepReport, emit func(GrepMatch) error) error {
	opts.setDefaults()
	o := opts.Options
	o.All = len(prefixes) == 0
	p, targets, err := planTargets(ctx, r, o, prefixes)
	if err != nil {
		return err
	}
	targets = slices.DeleteFunc(targets, func(t *target) bool { return t.newest().Mtime.Before(opts.Since) })
	slices.SortFunc(targets, func(a, b *target) int {
		return cmp.Or(b.newest().Mtime.Compare(a.newest().Mtime), strings.Compare(a.id, b.id))
	})
	copies, stale, staleAt, err := grepStale(targets, opts)
	if err != nil {
		return err
	}
	rep.Sessions += len(targets)
	rep.DeletedLeft += p.deletedLeft
	rep.Problems = append(rep.Problems, p.problems...)

	var mu sync.Mutex
	var spool search.Spool
	defer spool.Close()
	// A few stale sessions among many list one by one, not the whole
	// remote.
	lo := o
	lo.All = false
	eachTarget(ctx, r, stale, len(p.sessions), lo, nil, func(i int, t *target, listed *repo.SessionObjects) {
		cs, fetched, n, problems := grepFetch(ctx, r, t, copies[staleAt[i]], opts, listed, &spool)
		mu.Lock()
		defer mu.Unlock()
		copies[staleAt[i]] = cs
		rep.Fetched += fetched
		rep.Bytes += n
		rep.Problems = append(rep.Problems, problems...)
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	grepLeftOut(targets, copies, opts, rep)
	err = grepSearch(targets, copies, opts, rep, emit)
	if _, eerr := opts.Cache.Evict(); eerr != nil && err == nil {
		err = eerr
	}
	return err
}

// grepStale makes the copies of each target as the cache holds them (the
// current ones, then the older generations their states name), and says
// which targets have a copy the cache lacks or holds stale: those are
// listed and read (stale, stale[j] at staleAt[j] in targets).
func grepStale(targets []*target, opts GrepOptions) (copies [][]*grepCopy, stale []*target, staleAt []int, err error) {
	copies = make([][]*grepCopy, len(targets))
	for i, t := range targets {
		needs := false
		var older []*grepCopy
		for _, e := range t.entries {
			c := &grepCopy{e: e}
			if c.st, err = opts.Cache.State(t.id, e.machine); err != nil {
				return nil, nil, nil, err
			}
			// Older generations never change: as the last listing found
			// them, for a day.
			c.fresh = c.st == nil || c.st.Generation != e.Generation || c.st.Offset < e.Size || c.st.Listed.IsZero() ||
				len(c.st.Older) > 0 && opts.Now().Sub(c.st.Listed) >= olderRelist
			needs = needs || c.fresh
			copies[i] = append(copies[i], c)
			for _, gen := range c.olderCached() {
				o := &grepCopy{e: machineEntry{e.machine, repo.CatalogEntry{Generation: gen}}, older: true}
				if o.st, err = opts.Cache.State(t.id, o.key()); err != nil {
					return nil, nil, nil, err
				}
				// One the cache does not hold was not read whole (a failed
				// check): read again, and named again if it fails.
				if needs = needs || o.st == nil; o.st != nil {
					o.e.Size = o.st.Offset
					older = append(older, o)
				}
			}
		}
		copies[i] = append(copies[i], older...)
		if needs {
			stale, staleAt = append(stale, t), append(staleAt, i)
		}
	}
	return copies, stale, staleAt, nil
}

// grepLeftOut counts the copies into rep, and names their lines too long
// to search.
func grepLeftOut(targets []*target, copies [][]*grepCopy, opts GrepOptions, rep *GrepReport) {
	maxLine := int64(cmp.Or(opts.maxLine, search.MaxLine))
	for i, t := range targets {
		rep.Copies += len(copies[i])
		for _, c := range copies[i] {
			if c.st == nil {
				continue
			}
			for _, l := range c.st.LeftOut {
				rep.LeftOut = append(rep.LeftOut, fmt.Sprintf("session %s, machine %s: the line at byte %d holds %s, more than the %s a search reads of one line; not searched",
					t.id, c.e.machine, l.At, sizeText(l.Size), sizeText(maxLine)))
			}
		}
	}
}

// grepFetch brings the stale copies of t up to date: reads what they lack
// and indexes it, into the cache or c.recs, and adds the older
// generations the listing shows, read once. It returns t's copies, how
// many were read, the bytes that took, and the problems.
func grepFetch(ctx context.Context, r *repo.Repo, t *target, copies []*grepCopy, opts GrepOptions, listed *repo.SessionObjects, spool *search.Spool) ([]*grepCopy, int, int64, []string) {
	var problems []string
	fetched := 0
	var bytes int64
	for attempt := 1; ; attempt++ {
		invs, err := inventory(ctx, r, t.id, opts.Options, listed)
		if err != nil {
			return copies, 0, 0, []string{fmt.Sprintf("session %s: list: %v", t.id, err)}
		}
		if copies, err = olderCopies(t, copies, invs, opts.Cache); err != nil {
			return copies, 0, 0, []string{fmt.Sprintf("session %s: %v", t.id, err)}
		}
		retryList := false
		problems = problems[:0]
		for _, c := range copies {
			if !c.fresh {
				continue
			}
			n, err := grepUpdate(ctx, r, t, c, opts, spool)
			bytes += n
			switch {
			case err == nil:
				fetched++
				c.fresh = false
			case attempt < 3 && compactedMeanwhile(err):
				retryList = true
			default:
				problems = append(problems, fmt.Sprintf("session %s, machine %s: %v", t.id, c.e.machine, err))
			}
		}
		if !retryList {
			return copies, fetched, bytes, problems
		}
		listed = nil
	}
}

// olderCopies is copies with t's older generations as invs list them: the
// complete generations of a machine with a current copy that are not that
// copy. One the cache holds whole is not read again; one retention removed
// is forgotten (those the cache holds are named in their current copy's
// state).
func olderCopies(t *target, copies []*grepCopy, invs []*repo.StreamInventory, cache *search.Cache) ([]*grepCopy, error) {
	copies = slices.DeleteFunc(copies, func(c *grepCopy) bool { return c.older })
	for _, c := range copies {
		c.g, c.olderGens = nil, nil
	}
	for _, inv := range invs {
		i := slices.IndexFunc(copies, func(c *grepCopy) bool { return !c.older && c.e.machine == inv.Stream.Machine })
		if inv.Stream.Name != repo.SessionStream || i < 0 {
			continue
		}
		cur := copies[i]
		cur.g = inv.Newest()
		for _, g := range inv.Generations {
			if !g.HasMeta || g.Name == cur.e.Generation {
				continue
			}
			cur.olderGens = append(cur.olderGens, g.Name)
			_, end := repo.Cover(g.Chunks)
			c := &grepCopy{e: machineEntry{cur.e.machine, repo.CatalogEntry{Generation: g.Name, Size: end}}, older: true, g: g}
			var err error
			if c.st, err = cache.State(t.id, c.key()); err != nil {
				return copies, err
			}
			c.fresh = c.st == nil || c.st.Generation != g.Name || c.st.Offset < end
			copies = append(copies, c)
		}
	}
	for _, c := range copies {
		for _, gen := range c.olderCached() {
			if !slices.Contains(c.olderGens, gen) {
				if err := cache.Remove(t.id, search.OlderCopy(c.e.machine, gen)); err != nil {
					return copies, err
				}
			}
		}
	}
	return copies, nil
}

// grepUpdate reads one copy from where the cache left off, or from the
// start, indexing the new bytes as they stream: into the cache, or into
// the spool when the copy's records are more than the cache holds.
func grepUpdate(ctx context.Context, r *repo.Repo, t *target, c *grepCopy, opts GrepOptions, spool *search.Spool) (int64, error) {
	g := c.g
	if g == nil {
		return 0, errors.New("the catalog lists the session but the remote holds no copy of it")
	}
	s := repo.Stream{SessionID: t.id, Machine: c.e.machine, Name: repo.SessionStream}
	var from *search.CopyState // the cached records read on from
	if st := c.st; st != nil && st.Generation == g.Name && st.Offset > 0 {
		from = st
	}
	var (
		tail *repo.Tail
		p    *search.Pending
		x    *search.Indexer
	)
	err := retry(ctx, func() (err error) {
		p, err = opts.Cache.Begin(t.id, c.key(), from)
		if p == nil && err == nil { // the cached records are gone: indexed anew
			from = nil
			p, err = opts.Cache.Begin(t.id, c.key(), nil)
		}
		if err != nil {
			return err
		}
		offset, state := int64(0), []byte(nil)
		if from != nil {
			offset, state = from.Offset, from.HashState
		}
		x = search.NewIndexer(p, offset, opts.Store, opts.maxLine)
		tail, err = r.StreamGenerationFrom(ctx, s, g, offset, state, slack(max(c.e.Size, t.recordedSize()), opts.MaxStreamSize), x)
		if err == nil {
			err = x.Close()
		}
		if err == nil && g.Name == c.e.Generation && tail.End < c.e.Size {
			// As restore refuses it: bytes the catalog records are missing.
			err = fmt.Errorf("%w: the remote holds %d bytes of the %d its catalog records", repo.ErrGap, tail.End, c.e.Size)
		}
		if err != nil {
			p.Abort() // what the cache held stays as it was
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	n := tail.End - tail.From
	st := &search.CopyState{Session: t.id, Machine: c.key(), Generation: g.Name, Offset: tail.End, HashFrom: tail.HashFrom, HashState: tail.HashState}
	if !c.older {
		st.Listed, st.Older = opts.Now().UTC(), c.olderGens
	}
	st.LeftOut = x.LeftOut()
	if from != nil {
		st.LeftOut = append(slices.Clone(from.LeftOut), st.LeftOut...)
		if n == 0 {
			st.HashFrom = from.HashFrom
		}
	}
	// Records more than the whole cache holds are searched from the
	// spool, and not kept.
	recs, err := p.Keep(st, spool)
	if err != nil {
		return n, err
	}
	c.st, c.recs = st, recs
	return n, nil
}

// A session's matches wait in memory for their turn to be printed, up to
// grepHeld bytes of text a session; past that only a hash of each matching
// line is kept, with the copies that hold it (about 50 bytes a line,
// whatever its length), and the session's copies are searched a second
// time as it is printed. grepMaxLines bounds even that: a search fails
// with a session that has more matching lines. At most grepAhead sessions
// are searched ahead of the one being printed.
const (
	grepHeld     = 16 << 20
	grepMaxLines = 1 << 22
	grepAhead    = 4
)

// grepSearch matches every copy's records, a few sessions at once, and
// emits each session's matches in order.
func grepSearch(targets []*target, copies [][]*grepCopy, opts GrepOptions, rep *GrepReport, emit func(GrepMatch) error) error {
	type searched struct {
		res  *grepResult
		err  error
		bufs *search.Buffers
	}
	// A session's buffers go to the one ahead once it is printed: at most
	// ahead sessions are searched at a time, the one printed among them.
	ahead := max(grepAhead, runtime.GOMAXPROCS(0))
	done := make([]chan searched, len(targets))
	start := func(i int, bufs *search.Buffers) {
		if i < len(targets) {
			ch := make(chan searched, 1)
			done[i] = ch
			go func() {
				res, err := grepTarget(targets[i], copies[i], opts, bufs)
				ch <- searched{res, err, bufs}
			}()
		}
	}
	for i := range ahead {
		start(i, new(search.Buffers))
	}
	for i := range targets {
		s := <-done[i]
		err := s.err
		if err == nil {
			err = s.res.emit(targets[i], copies[i], opts, s.bufs, func(m GrepMatch) error {
				rep.Matches++
				return emit(m)
			})
		}
		if err != nil {
			for _, ch := range done[i+1 : min(i+ahead, len(targets))] {
				<-ch // those searched ahead end before the cache closes
			}
			return err
		}
		start(i+ahead, s.bufs)
	}
	return nil
}

// grepResult is one session's matching lines, each once, in the order
// its copies hold them: the matches themselves (out[i] is line i), or,
// past grepHeld, only the lines (spilled).
type grepResult struct {
	out   []GrepMatch
	lines map[lineKey]int32 // a line's index
	// holders[i*words:][:words] is the set of copies that hold line i: bit
	// c%64 of word c/64 for copy c.
	holders []uint64
	words   int
	spilled bool
}

type lineKey [16]byte

// lineKeyOf identifies a record across copies: the same entry's same text.
func lineKeyOf(h hash.Hash, rec search.Record) lineKey {
	h.Reset()
	var ms [8]byte
	binary.LittleEndian.PutUint64(ms[:], uint64(rec.Ms))
	for _, s := range []string{rec.Entry, "\x00", rec.Role, "\x00"} {
		h.Write([]byte(s))
	}
	h.Write(ms[:])
	h.Write([]byte(rec.Text))
	var k lineKey
	copy(k[:], h.Sum(nil))
	return k
}

// grepTarget matches one session's copies, each line once.
func grepTarget(t *target, copies []*grepCopy, opts GrepOptions, bufs *search.Buffers) (*grepResult, error) {
	held, maxLines := cmp.Or(opts.maxHeld, grepHeld), cmp.Or(opts.maxLines, grepMaxLines)
	l := t.listing()
	res := &grepResult{lines: map[lineKey]int32{}, words: (len(copies) + 63) / 64}
	h := sha256.New()
	for ci, c := range copies {
		var tooMany bool
		err := scanCopy(c, opts, bufs, func(rec search.Record) {
			k := lineKeyOf(h, rec)
			i, seen := res.lines[k]
			if !seen {
				if len(res.lines) >= maxLines {
					tooMany = true
					return
				}
				i = int32(len(res.lines))
				res.lines[k] = i
				res.holders = append(res.holders, make([]uint64, res.words)...)
				if !res.spilled {
					res.out = append(res.out, grepMatch(l, rec))
					if held -= len(rec.Text) + len(rec.Entry) + 64; held < 0 {
						res.out, res.spilled = nil, true // searched again as it is printed
					}
				}
			}
			res.holders[int(i)*res.words+ci/64] |= 1 << (ci % 64)
		})
		if err != nil {
			return nil, err
		}
		if tooMany {
			return nil, fmt.Errorf("session %s: more than %d lines match; narrow the pattern (or search entries from a later time with --since)", t.id, maxLines)
		}
	}
	return res, nil
}

// grepMatch is the match rec is, a line of the session l lists.
func grepMatch(l Listing, rec search.Record) GrepMatch {
	return GrepMatch{Session: l.ID, Title: l.Title, Entry: rec.Entry, Role: rec.Role, Kind: rec.Kind,
		Time: rec.Time(), Text: rec.Text, State: l.State, Project: l.Project}
}

// scanCopy matches the records of one copy, from the cache or the spool.
func scanCopy(c *grepCopy, opts GrepOptions, bufs *search.Buffers, f func(search.Record)) error {
	var recs io.Reader
	switch {
	case c.recs != nil:
		recs = io.NewSectionReader(c.recs, 0, c.recs.Size())
	case c.st != nil:
		rc, err := opts.Cache.Open(c.st)
		if err != nil {
			return err
		}
		if rc == nil {
			return nil // gone from the cache: nothing to search
		}
		defer rc.Close()
		recs = rc
	default:
		return nil
	}
	// A zero Since is before every record's time.
	return opts.Pattern.ScanFrom(recs, opts.Since.UnixMilli(), bufs, f)
}

// machines names the machines whose current copies hold line i, in the
// copies' order; or, when none does, those whose older copies do (older).
func (r *grepResult) machines(i int32, copies []*grepCopy) (names []string, older bool) {
	set := r.holders[int(i)*r.words:][:r.words]
	held := func(c int) bool { return set[c/64]&(1<<(c%64)) != 0 }
	older = true
	for c, cp := range copies {
		older = older && (cp.older || !held(c))
	}
	for c, cp := range copies {
		if held(c) && cp.older == older && !slices.Contains(names, cp.e.machine) {
			names = append(names, cp.e.machine)
		}
	}
	return names, older
}

// emit prints the session's matches in order: those held, or, spilled,
// each line as a second search of its copies comes to it.
func (r *grepResult) emit(t *target, copies []*grepCopy, opts GrepOptions, bufs *search.Buffers, emit func(GrepMatch) error) error {
	if !r.spilled {
		for i, m := range r.out {
			m.Machines, m.Older = r.machines(int32(i), copies)
			if err := emit(m); err != nil {
				return err
			}
		}
		return nil
	}
	l := t.listing()
	h := sha256.New()
	printed := make([]bool, len(r.lines))
	n := 0
	var err error
	for _, c := range copies {
		serr := scanCopy(c, opts, bufs, func(rec search.Record) {
			if err != nil {
				return
			}
			i, ok := r.lines[lineKeyOf(h, rec)]
			if !ok || printed[i] {
				return // a line the first search did not see is not the same search
			}
			printed[i] = true
			n++
			m := grepMatch(l, rec)
			m.Machines, m.Older = r.machines(i, copies)
			err = emit(m)
		})
		if err != nil {
			return err
		}
		if serr != nil {
			return serr
		}
	}
	if n < len(r.lines) {
		return fmt.Errorf("session %s: %d of its %d matching lines were gone from its copies when they were printed (another search changed the cache?); search again", t.id, len(r.lines)-n, len(r.lines))
	}
	return nil
}

// GrepAll searches across places (grepPlace): the sessions the prefixes
// name, of whatever agent, or every agent's sessions without prefixes,
// place by place; cache opens each agent's cache (a nil cache: none kept),
// closed when that agent's search ends. A match names its agent.
func GrepAll(ctx context.Context, places []Place, prefixes []string, opts GrepOptions, cache func(agent string) (*search.Cache, error), emit func(GrepMatch) error) (*GrepReport, error) {
	total := &GrepReport{}
	var cacheErr error // said as it is, without the agent
	err := eachPlace(ctx, places, prefixes, opts.Options, nil, func(i int, ids []string, o Options) error {
		if len(prefixes) > 0 && len(ids) == 0 {
			return nil
		}
		name := places[i].Store.Name()
		c, err := cache(name)
		if err != nil {
			cacheErr = err
			return err
		}
		defer c.Close()
		po := opts
		po.Options, po.Cache = o, c
		return grepPlace(ctx, places[i].Repo, ids, po, total, func(m GrepMatch) error {
			m.Agent = name
			return emit(m)
		})
	})
	return total, cmp.Or(cacheErr, err)
}

// sizeText says a size in MiB, or in bytes below one.
func sizeText(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}
