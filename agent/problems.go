package agent

import (
	"errors"
	"fmt"
	"log/slog"
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
}

type problem struct {
	msg    string
	logged time.Time
	since  time.Time // the first failure with msg
	failed int       // failures since logged
}

// report records that path could not be read.
func (p *problems) report(log *slog.Logger, now time.Time, path string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paths == nil {
		p.paths, p.inPass = map[string]*problem{}, map[string]bool{}
	}
	p.inPass[path] = true
	verb := "cannot read"
	if errors.Is(err, errPastLimit) {
		verb = "cannot back up"
	}
	msg := err.Error()
	pr := p.paths[path]
	if pr != nil && pr.msg == msg {
		pr.failed++
		if now.Sub(pr.logged) < problemRelog {
			log.Debug("still cannot read; its backup stays as it was", "path", path, "err", err)
			return
		}
		log.Error("still "+verb+"; its backup stays as it was, nothing is recorded as deleted", "path", path, "err", err,
			"failures", pr.failed, "since", pr.since.Format(time.RFC3339))
		pr.logged, pr.failed = now, 0
		return
	}
	if pr == nil {
		pr = &problem{}
		p.paths[path] = pr
	}
	pr.msg, pr.logged, pr.since, pr.failed = msg, now, now, 0
	log.Error(verb+"; its backup stays as it was, nothing is recorded as deleted", "path", path, "err", err)
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
	var first string
	for path := range p.paths {
		if first == "" || path < first {
			first = path
		}
	}
	switch len(p.paths) {
	case 0:
		return nil
	case 1:
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
