package main

import (
	"context"
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ompsync/ompsync/bench"
)

// idle: many session files that do not change. The first backup is made
// with `agent --once`; then the daemon starts over the unchanged files
// (time to READY=1), and its CPU and memory are read over a quiet window
// that holds one reconcile scan. `ompsync ls` then lists every session.
func (r *runner) idle(ctx context.Context) error {
	c := r.cfg
	agentDir := r.dir("idle", "agent")
	gen := bench.NewGen(r.corpus, c.seed+2)
	gen.BigProb, gen.MaxLine = 0, 4000 // old, small sessions
	rng := gen.Rand()
	cwds := bench.CwdDirs(100)
	clock := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	var total int64
	for i := range c.idleFiles {
		s, err := gen.NewSession(agentDir, cwds[i%len(cwds)], clock.Add(time.Duration(i)*time.Minute), 3+rng.IntN(8))
		if err != nil {
			return err
		}
		total += s.Size
	}
	r.log.Info("idle: sessions written", "files", c.idleFiles, "bytes", total)
	p, err := r.newPeer(ctx, "idle-ompsync")
	if err != nil {
		return err
	}
	defer p.proxy.Close()
	omp := r.ompsync(p, agentDir, "idle")
	first, firstN, err := measure(p, func() error { _, err := omp.Run(ctx, "agent", "--once"); return err })
	if err != nil {
		return err
	}
	r.log.Info("idle: first backup done", "took", first, "requests", firstN.Requests())

	before := p.proxy.Counts()
	d, err := omp.StartDaemon(r.dir("idle"), "OMPSYNC_INTERVAL="+c.interval.String())
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = d.Stop()
		}
	}()
	startup, err := d.WaitReady(2 * time.Minute)
	if err != nil {
		return err
	}
	startN := p.proxy.Counts().Sub(before)
	_, startPeak, _ := bench.ProcMem(d.Pid())
	time.Sleep(time.Second)
	before = p.proxy.Counts()
	cpu0, err := bench.ProcCPU(d.Pid())
	if err != nil {
		return err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(c.idleFor):
	}
	cpu1, err := bench.ProcCPU(d.Pid())
	if err != nil {
		return err
	}
	window := time.Since(t0)
	rss, peak, _ := bench.ProcMem(d.Pid())
	idleN := p.proxy.Counts().Sub(before)
	stopped = true
	if err := d.Stop(); err != nil {
		return err
	}
	cpu := (cpu1 - cpu0).Seconds() / window.Seconds()
	scanNote := ""
	if window >= time.Minute { // the default reconcile_interval
		scanNote = " incl. a reconcile scan"
	}
	r.raw["idle"] = map[string]any{
		"files": c.idleFiles, "bytes": total, "first_backup_ns": first, "first_backup": firstN,
		"startup_ns": startup, "startup_requests": startN, "startup_rss_peak": startPeak,
		"idle_window_ns": window, "idle_cpu_fraction": cpu, "idle_requests": idleN, "rss": rss, "rss_peak": peak,
	}
	r.add(row{
		Figure:  fmt.Sprintf("first backup of %d session files (%s), `agent --once`", c.idleFiles, mb(total)),
		Ompsync: fmt.Sprintf("%s, %d requests, %s up", secs(first), firstN.Requests(), mb(firstN.Up)),
	})
	r.add(row{
		Figure:  fmt.Sprintf("startup with %d unchanged files, start to READY=1 (%d requests)", c.idleFiles, startN.Requests()),
		Target:  "<= 2 s", Ompsync: secs(startup), Result: verdict(startup <= 2*time.Second),
	})
	r.add(row{
		Figure:  fmt.Sprintf("agent resident memory, %d idle session files (peak %s)", c.idleFiles, mb(peak)),
		Target:  "<= 60 MB", Ompsync: mb(rss), Result: verdict(rss <= 60e6),
	})
	r.add(row{
		Figure: fmt.Sprintf("agent CPU when nothing changes, %d files, over %s%s (%d requests)", c.idleFiles, window.Round(time.Second), scanNote, idleN.Requests()),
		Target: "<= 1% of a core", Ompsync: fmt.Sprintf("%.2f%%", 100*cpu), Result: verdict(cpu <= 0.01),
	})

	if !omp.Has(ctx, "ls") {
		r.add(row{Figure: fmt.Sprintf("`ls` over %d sessions, requests", c.idleFiles), Target: "<= 5", Ompsync: "no ls command in this build", Result: "not run"})
		return nil
	}
	var out []byte
	_, lsN, err := measure(p, func() error {
		var err error
		out, err = omp.Run(ctx, "ls", "--json")
		return err
	})
	if err != nil {
		return err
	}
	listed := countListed(out)
	r.raw["ls"] = map[string]any{"requests": lsN, "listed": listed}
	r.add(row{
		Figure:  fmt.Sprintf("`ls` over %d sessions, requests (%d sessions listed)", c.idleFiles, listed),
		Target:  "<= 5", Ompsync: fmt.Sprintf("%d", lsN.Requests()),
		Result: verdict(lsN.Requests() <= 5 && listed == c.idleFiles),
	})
	return nil
}

// countListed counts the sessions in `ls --json` output: a JSON array, or
// one object per line.
func countListed(out []byte) int {
	var arr []json.RawMessage
	if json.Unmarshal(out, &arr) == nil {
		return len(arr)
	}
	n := 0
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return n
		}
		n++
	}
}
