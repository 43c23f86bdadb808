package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/progress"
	"github.com/ompsync/ompsync/restore"
)

// output is standard error for a command that may draw a progress bar:
// only on a terminal, and not with -q or machine-readable output.
func (a *app) output(machineReadable bool) *progress.Output {
	return progress.NewOutput(a.stderr, !machineReadable && !a.quiet && progress.Terminal(a.stderr))
}

// logLevel is log.level, raised to error by -q.
func (a *app) logLevel(cfg *config.Config) slog.Level {
	if l := cfg.LogLevel(); !a.quiet || l >= slog.LevelError {
		return l
	}
	return slog.LevelError
}

// logger is the command's log on standard error at logLevel.
func (a *app) logger(cfg *config.Config) *slog.Logger {
	return cfg.LeveledLogger(a.stderr, a.logLevel(cfg))
}

// report is where a command's summary and per-item lines go: nowhere
// with -q.
func (a *app) report() io.Writer {
	if a.quiet {
		return io.Discard
	}
	return a.stdout
}

// notes is where a command's totals and notes go: report, but standard
// error beside machine-readable output, which stays one object per line.
func (a *app) notes(machineReadable bool) io.Writer {
	if machineReadable && !a.quiet {
		return a.stderr
	}
	return a.report()
}

// warn prints each line on standard error after "ompsync: ".
func (a *app) warn(lines []string) { under(a.stderr, "ompsync: ", lines) }

// under prints each line after lead: an item's problems and notes under
// its first line.
func under(w io.Writer, lead string, lines []string) {
	for _, l := range lines {
		fmt.Fprintf(w, "%s%s\n", lead, l)
	}
}

// printList prints a command's items: one JSON object per item per line
// with asJSON (--json), else as text prints them.
func printList[T any](w io.Writer, asJSON bool, items []T, text func()) error {
	if !asJSON {
		text()
		return nil
	}
	enc := json.NewEncoder(w)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			return err
		}
	}
	return nil
}

// liveBar is a progress bar started at its first update: restore's and
// verify's sessions, the agent's first pass's files. With opened set, its
// bytes are those opened since the first update (of the sessions' sizes
// for restore; as a count for verify, which also checks older
// generations), not the update's.
type liveBar struct {
	out        *progress.Output
	unit, verb string
	opened     *atomic.Int64

	start   sync.Once     // the bar, at the first update; after done, never
	opened0 int64         // set in start, before the bar reads it
	bar     *progress.Bar // set in start; taken by done under mu

	mu sync.Mutex
	st progress.State
}

func (a *app) sessionBar(machineReadable bool, verb string) *liveBar {
	return &liveBar{out: a.output(machineReadable), unit: "sessions", verb: verb, opened: &a.meters().opened}
}

// restoreProgress is restore.Options.Progress; restore calls it one at a
// time.
func (b *liveBar) restoreProgress(p restore.Progress) {
	b.update(progress.State{Count: p.Sessions, CountTotal: p.SessionsTotal, BytesTotal: p.BytesTotal})
}

// passProgress is agent.Options.Progress: the bar goes once every file is
// done.
func (b *liveBar) passProgress(p agent.PassProgress) {
	b.update(progress.State{Count: p.Files, CountTotal: p.FilesTotal, Bytes: p.Bytes, BytesTotal: p.BytesTotal})
	if p.Files == p.FilesTotal {
		b.done()
	}
}

func (b *liveBar) update(st progress.State) {
	b.mu.Lock()
	b.st = st
	b.mu.Unlock()
	b.start.Do(func() {
		if b.opened != nil {
			b.opened0 = b.opened.Load()
		}
		b.bar = b.out.Start(b.unit, b.verb, b.state) // done's start.Do waits for it
	})
}

func (b *liveBar) state() progress.State {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.st
	if b.opened != nil {
		st.Bytes = b.opened.Load() - b.opened0
		if st.BytesTotal > 0 && (st.Bytes > st.BytesTotal || st.Count == st.CountTotal) {
			st.Bytes = st.BytesTotal // overlapping chunks and catalogs are read too
		}
	}
	return st
}

// done removes the bar.
func (b *liveBar) done() {
	b.start.Do(func() {})
	b.mu.Lock()
	bar := b.bar
	b.bar = nil
	b.mu.Unlock()
	bar.Done()
}

// counted is a number of things and what they are, for tally.
type counted struct {
	n    int
	what string
}

// tally is "; N what" for each count above zero, in order: how a totals
// line names what did not go well.
func tally(counts ...counted) string {
	s := ""
	for _, c := range counts {
		if c.n > 0 {
			s += fmt.Sprintf("; %d %s", c.n, c.what)
		}
	}
	return s
}

// Column widths of the ls, history and status tables without --wide: a line
// stays within 200 columns, the rest of a long value cut with "…".
const (
	titleWidth    = 28
	projectWidth  = 24
	folderWidth   = 32
	machinesWidth = 20
	pathWidth     = 96
)

// clip cuts s to n runes, keeping its start (a title).
func clip(s string, n int, wide bool) string {
	r := []rune(s)
	if wide || len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// clipPath cuts a path to n runes, keeping its end (the file or folder
// name tells it apart).
func clipPath(p string, n int, wide bool) string {
	r := []rune(p)
	if wide || len(r) <= n {
		return p
	}
	return "…" + string(r[len(r)-n+1:])
}
