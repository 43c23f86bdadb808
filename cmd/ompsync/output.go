package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"

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

// report is where a command's summary and per-item lines go: nowhere
// with -q.
func (a *app) report() io.Writer {
	if a.quiet {
		return io.Discard
	}
	return a.stdout
}

// warn prints each line on standard error after "ompsync: ".
func (a *app) warn(lines []string) {
	for _, l := range lines {
		fmt.Fprintf(a.stderr, "ompsync: %s\n", l)
	}
}

// jsonLines writes one JSON object per item per line.
func jsonLines[T any](w io.Writer, items []T) error {
	enc := json.NewEncoder(w)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			return err
		}
	}
	return nil
}

// sessionBar draws restore's and verify's progress: sessions done of the
// total, and the bytes opened since the totals were known (of the
// sessions' sizes for restore; as a count for verify, which also checks
// older generations).
type sessionBar struct {
	out        *progress.Output
	unit, verb string
	m          *meter

	mu      sync.Mutex
	p       restore.Progress
	opened0 int64
	started bool
	bar     *progress.Bar
}

func (a *app) sessionBar(machineReadable bool, verb string) *sessionBar {
	return &sessionBar{out: a.output(machineReadable), unit: "sessions", verb: verb, m: a.meters()}
}

// update is restore.Options.Progress; restore calls it one at a time.
func (s *sessionBar) update(p restore.Progress) {
	s.mu.Lock()
	first := !s.started
	s.p, s.started = p, true
	if first {
		s.opened0 = s.m.opened.Load()
	}
	s.mu.Unlock()
	if first {
		bar := s.out.Start(s.unit, s.verb, s.state)
		s.mu.Lock()
		s.bar = bar
		s.mu.Unlock()
	}
}

func (s *sessionBar) state() progress.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := progress.State{Count: s.p.Sessions, CountTotal: s.p.SessionsTotal, Bytes: s.m.opened.Load() - s.opened0, BytesTotal: s.p.BytesTotal}
	if st.BytesTotal > 0 && (st.Bytes > st.BytesTotal || st.Count == st.CountTotal) {
		st.Bytes = st.BytesTotal // overlapping chunks and catalogs are read too
	}
	return st
}

// done removes the bar.
func (s *sessionBar) done() {
	s.mu.Lock()
	bar := s.bar
	s.mu.Unlock()
	bar.Done()
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
