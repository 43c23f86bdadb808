package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// problemRelog: a path that stays unreadable is reported again this often,
// with how often it failed since, not every pass.
const problemRelog = 5 * time.Minute

// problems are the paths a pass could not read (EACCES, EIO, anything but
// "does not exist") or refused (past a size restore takes: errPastLimit). Such a path keeps its state, never becomes a deletion,
// and fails the pass; its ERROR line is written when it first fails, when
// its error changes, and then once per problemRelog with a count.
type problems struct {
	mu     sync.Mutex
	paths  map[string]*problem
	inPass map[string]bool // reported during the current full pass
	// causes are failures that are not a path's (a compaction, a catalog
	// put): warned of once, then now and then, until clear.
	causes map[string]*problem
}

// warn says at WARN that what (a key such as "compaction of <path>")
// failed with err, with args, as problem.note says when; at debug in
// between.
func (p *problems) warn(log *slog.Logger, now time.Time, what, msg string, err error, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	args = append([]any{"what", what, "err", err}, args...)
	switch pr, n := noteIn(&p.causes, what, now, err); {
	case n == 0:
		log.Warn(msg, args...)
	case n > 0:
		log.Warn("still: "+msg, append(args, "failures", n, "since", pr.since.Format(time.RFC3339))...)
	default:
		log.Debug(msg, args...)
	}
}

// clear says once that what, warned of, works again.
func (p *problems) clear(log *slog.Logger, what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.causes[what]; ok {
		delete(p.causes, what)
		log.Info("works again", "what", what)
	}
}

// saidOnce are the keys of what was said at a level above debug: said so
// once, at debug after that.
type saidOnce map[string]bool

// first reports whether key is new, and remembers it.
func (s *saidOnce) first(key string) bool {
	if (*s)[key] {
		return false
	}
	made(s)[key] = true
	return true
}

// level is lvl the first time key is said, debug after that.
func (s *saidOnce) level(key string, lvl slog.Level) slog.Level {
	if s.first(key) {
		return lvl
	}
	return slog.LevelDebug
}

type problem struct {
	msg    string
	logged time.Time
	since  time.Time // the first failure with msg (zero: none)
	failed int       // failures since logged
}

// note counts a failure with msg at now and says when to say it: 0 at
// the first (or when its error changes), at once; once per problemRelog
// after that, the failures since the last line (n > 0); -1 in between.
func (pr *problem) note(now time.Time, msg string) int {
	if pr.since.IsZero() || pr.msg != msg {
		*pr = problem{msg: msg, logged: now, since: now}
		return 0
	}
	pr.failed++
	if now.Sub(pr.logged) < problemRelog {
		return -1
	}
	n := pr.failed
	pr.logged, pr.failed = now, 0
	return n
}

// noteIn notes err as a failure of key's problem in *m (made on first use),
// as problem.note says.
func noteIn(m *map[string]*problem, key string, now time.Time, err error) (*problem, int) {
	pr := made(m)[key]
	if pr == nil {
		pr = &problem{}
		(*m)[key] = pr
	}
	return pr, pr.note(now, err.Error())
}

// report records that path could not be read.
func (p *problems) report(log *slog.Logger, now time.Time, path string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	made(&p.inPass)[path] = true
	verb := "cannot read"
	if errors.Is(err, errPastLimit) {
		verb = "cannot back up"
	}
	switch pr, n := noteIn(&p.paths, path, now, err); {
	case n == 0:
		log.Error(verb+"; its backup stays as it was, nothing is recorded as deleted", "path", path, "err", err)
	case n > 0:
		log.Error("still "+verb+"; its backup stays as it was, nothing is recorded as deleted", "path", path, "err", err,
			"failures", n, "since", pr.since.Format(time.RFC3339))
	default:
		log.Debug("still cannot read; its backup stays as it was", "path", path, "err", err)
	}
}

// beginFullPass starts counting what a full pass reports.
func (p *problems) beginFullPass() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.inPass)
}

// endFullPass forgets the paths a full pass read without trouble, saying
// so once for each.
func (p *problems) endFullPass(log *slog.Logger) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for path := range p.paths {
		if !p.inPass[path] {
			delete(p.paths, path)
			log.Info("readable again", "path", path)
		}
	}
	clear(p.inPass)
}

// err is the error of a pass that could not read some paths, or nil.
func (p *problems) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.paths) == 0 {
		return nil
	}
	first := slices.Min(slices.Collect(maps.Keys(p.paths)))
	if len(p.paths) == 1 {
		return fmt.Errorf("cannot read %s: %s", first, p.paths[first].msg)
	}
	return fmt.Errorf("cannot read %d paths, among them %s: %s", len(p.paths), first, p.paths[first].msg)
}

// count is how many paths cannot be read.
func (p *problems) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.paths)
}

// outageFix is what a user can do about an outage; the agent retries on
// its own either way.
const outageFix = "check the network, the remote's endpoint and that it is up; uploads resume by themselves once it answers"

// outage turns a run of transient remote failures into one WARN when the
// remote goes away (naming it and what to check), a reminder with a count
// every problemRelog while it stays away, one INFO line when it is back,
// and a capped backoff between tries.
type outage struct {
	mu sync.Mutex
	// once: a single run (agent --once), which stops at the failure
	// rather than watching on.
	once bool
	// remote names the remote in messages (never with credentials), or
	// is "the remote".
	remote  string
	backoff time.Duration
	retryAt time.Time
	// away is the outage (its since zero while the remote answers);
	// lastErr the last failure.
	away    problem
	lastErr string
}

func (o *outage) failed(log *slog.Logger, now time.Time, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lastErr = err.Error()
	switch n := o.away.note(now, ""); {
	case n == 0:
		msg := "remote unreachable; watching on and retrying with backoff"
		if o.once {
			msg = "remote unreachable"
		}
		log.Warn(msg, "remote", o.remote, "err", err, "fix", outageFix)
		o.backoff = time.Second
	case n > 0:
		log.Warn("remote still unreachable; nothing is uploaded until it answers", "remote", o.remote,
			"since", o.away.since.Format(time.RFC3339), "for", now.Sub(o.away.since).Round(time.Second).String(),
			"failures", n, "err", err, "fix", outageFix)
		fallthrough
	default:
		o.backoff = min(2*o.backoff, time.Minute)
	}
	o.retryAt = now.Add(o.backoff)
}

func (o *outage) ok(log *slog.Logger, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.away.since.IsZero() {
		log.Info("remote reachable again; catching up", "remote", o.remote, "down_for", now.Sub(o.away.since).Round(time.Second).String())
		o.away = problem{}
	}
}

func (o *outage) ready(now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.away.since.IsZero() || !now.Before(o.retryAt)
}

func (o *outage) wait() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.backoff
}

// state says whether the remote is away, since when, and why.
func (o *outage) state() (down bool, since time.Time, why string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.away.since.IsZero(), o.away.since, o.lastErr
}
