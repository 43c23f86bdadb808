package agent

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/ompsync/ompsync/compact"
	"github.com/ompsync/ompsync/repo"
)

// maxCompactionsPerTick bounds how long compaction can hold up uploads.
const maxCompactionsPerTick = 2

// maintain compacts this machine's streams that are busy (many small chunks
// since the last compaction) or idle (no upload for Compaction.Idle), and
// applies retention once a day. It runs between upload passes.
func (a *Agent) maintain(ctx context.Context) {
	if a.noDelete {
		return
	}
	now := a.now()
	var unlock func()
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	// locked takes the maintenance lock before the first object is
	// deleted, so a compact, prune or rekey run from a shell or cron
	// and this agent never delete at once; held by one, this tick's
	// maintenance waits for a later tick.
	locked := func() bool {
		if unlock != nil {
			return true
		}
		u, ok, err := tryLockMaintenance(a.opts.StateDir)
		if err != nil {
			a.problems.warn(a.log, now, "maintenance lock", "compaction and retention wait: the maintenance lock cannot be taken; check the state dir's permissions", err)
			return false
		}
		a.problems.clear(a.log, "maintenance lock")
		if !ok {
			a.log.Debug("compaction and retention wait for another ompsync command holding the maintenance lock")
			return false
		}
		unlock = u
		return true
	}
	if a.compactStreams(ctx, now, locked) {
		a.applyRetention(ctx, now, locked)
	}
}

// compactStreams compacts up to maxCompactionsPerTick streams that are
// due, once locked (the maintenance lock) holds; false says maintenance
// stops for this tick.
func (a *Agent) compactStreams(ctx context.Context, now time.Time, locked func() bool) bool {
	done := 0
	for _, f := range a.state.Streams {
		if done >= maxCompactionsPerTick || ctx.Err() != nil {
			break
		}
		if f.Generation == "" || f.State != repo.StatePresent && f.State != repo.StateArchived {
			continue
		}
		busy := f.SmallChunks > a.opts.Compaction.MaxChunks
		idle := !f.IdleCompacted && f.SmallChunks > 0 && now.Sub(f.SyncedAt) >= a.opts.Compaction.Idle
		if !busy && !idle {
			continue
		}
		if !locked() {
			return false
		}
		done++
		res, err := compact.Stream(ctx, a.repo, f.stream(a.opts.Machine), f.Generation, idle, a.opts.Compaction)
		// A remote away, a refusal or a stop ends this tick's
		// maintenance: every other compaction would fail alike.
		if a.deletesDenied(err) || a.ended(ctx, "compaction of "+f.Path, "compaction failed; it is retried, the backup itself is not affected", err) {
			return false
		}
		if err != nil {
			continue
		}
		// A busy compaction leaves the newest small chunks for the idle one.
		f.SmallChunks = 0
		if !idle {
			f.SmallChunks = 1
		}
		f.IdleCompacted = idle
		a.state.touch(f)
		if res.Written > 0 {
			a.log.Debug("compacted", "path", f.Path, "chunks_before", res.Before, "chunks_after", res.After)
		}
	}
	return true
}

// due reports whether a job run every interval that last ran at *last is
// due at now. The first time (*last zero) it is not: *last is set so that
// it runs some time in the coming interval, not at start-up, where it
// would hold up the catch-up uploads.
func (a *Agent) due(last *time.Time, now time.Time, every time.Duration) bool {
	if last.IsZero() {
		*last = now.Add(-time.Duration(rand.Int64N(int64(every))))
		a.state.changed.all = true
		return false
	}
	return now.Sub(*last) >= every
}

// applyRetention applies retention once a day, once locked holds.
func (a *Agent) applyRetention(ctx context.Context, now time.Time, locked func() bool) {
	if a.opts.Retention.Generations <= 0 && a.opts.Retention.Deleted <= 0 {
		return
	}
	if !a.due(&a.state.LastPrune, now, 24*time.Hour) || !locked() {
		return
	}
	a.state.LastPrune = now
	a.state.changed.all = true
	rep, err := compact.Prune(ctx, a.repo, a.opts.Store, a.opts.Machine, a.opts.Retention, now, false)
	if err != nil {
		if !a.refused.report(a.log, err) && !a.deletesDenied(err) {
			a.log.Warn("retention failed; will retry tomorrow", "err", err)
		}
		return
	}
	for _, id := range rep.Sessions {
		for k, f := range a.state.Streams {
			if f.SessionID == id {
				a.state.forget(k)
			}
		}
		a.catalogStale = true
	}
	if rep.Objects > 0 {
		a.log.Info("retention removed old backups", "objects", rep.Objects, "bytes", rep.Bytes, "sessions", len(rep.Sessions))
	}
}
