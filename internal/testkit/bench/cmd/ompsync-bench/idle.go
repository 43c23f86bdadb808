//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/bench"
)

// memLimit is the soft memory limit tried on the idle agent: a bit above
// twice its live heap (about 23 MB with 10,000 files).
const memLimit = "40MiB"

// idle: many session files that do not change (small ones: an unchanged
// file costs one stat whatever its size). The first backup is made with
// `agent --once`; then the daemon starts over the unchanged files (time to
// READY=1), and its CPU and memory are read over a quiet window that holds
// one reconcile scan. Then: the same with a soft memory limit, a heap
// profile, `ompsync ls` over every session, and the busy workload.
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
	fc, err := r.measure(p, func() error { _, err := omp.Run(ctx, "agent", "--once"); return err })
	first, firstN := fc.Wall, fc.Counts
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
	startMem, _ := bench.ProcMem(d.Pid())
	// After READY the agent may still work through its files once (the
	// retention pass); the idle window starts when it has gone quiet.
	quietAt, err := waitQuiet(ctx, p, 5*time.Second, 3*time.Minute)
	if err != nil {
		return err
	}
	settleN := p.proxy.Counts().Sub(before).Sub(startN)
	settleCPU, _ := bench.ProcCPU(d.Pid())
	before = p.proxy.Counts()
	cpu0, err := bench.ProcCPU(d.Pid())
	if err != nil {
		return err
	}
	t0 := time.Now()
	var mem10 bench.Mem // 10 s in, to compare with the memory-limit run below
	for _, wait := range []time.Duration{min(10*time.Second, c.idleFor), c.idleFor - min(10*time.Second, c.idleFor)} {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		if mem10.RSS == 0 {
			mem10, _ = bench.ProcMem(d.Pid())
		}
	}
	cpu1, err := bench.ProcCPU(d.Pid())
	if err != nil {
		return err
	}
	window := time.Since(t0)
	mem, _ := bench.ProcMem(d.Pid())
	rss, peak := mem.RSS, mem.Peak
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
		"startup_ns": startup, "startup_requests": startN, "startup_mem": startMem,
		"quiet_after_start_ns": quietAt.Sub(d.Started), "settle_requests": settleN, "cpu_until_quiet_ns": settleCPU,
		"idle_window_ns": window, "idle_cpu_fraction": cpu, "idle_requests": idleN, "mem": mem, "mem_10s": mem10,
	}
	r.add(row{
		Figure:  fmt.Sprintf("first backup of %d session files (%s), `agent --once`", c.idleFiles, mb(total)),
		Ompsync: fmt.Sprintf("%s, %d requests, %s up", secs(first), firstN.Requests(), mb(firstN.Up)),
	})
	r.add(row{
		Figure: fmt.Sprintf("startup with %d unchanged files, start to READY=1 (%d requests)", c.idleFiles, startN.Requests()),
		Target: "<= 2 s", Ompsync: secs(startup), Result: verdict(startup <= 2*time.Second),
	})
	r.add(row{
		Figure: fmt.Sprintf("the same, start to the last request of the work after READY (%d requests: %d LIST, %d GET; %s CPU from start)",
			settleN.Requests(), settleN.Lists, settleN.Gets, secs(settleCPU)),
		Target: "<= 2 s", Ompsync: secs(quietAt.Sub(d.Started)), Result: verdict(quietAt.Sub(d.Started) <= 2*time.Second),
	})
	r.add(row{
		Figure: fmt.Sprintf("agent resident memory, %d idle session files (peak %s; now %s anonymous + %s of the binary)", c.idleFiles, mb(peak), mb(mem.Anon), mb(mem.File)),
		Target: "<= 60 MB", Ompsync: mb(rss), Result: verdict(rss <= 60e6),
	})
	r.add(row{
		Figure: fmt.Sprintf("agent CPU when nothing changes, %d files, over %s%s (%d requests)", c.idleFiles, window.Round(time.Second), scanNote, idleN.Requests()),
		Target: "<= 1% of a core", Ompsync: fmt.Sprintf("%.2f%%", 100*cpu), Result: verdict(cpu <= 0.01),
	})

	// What if the Go runtime had a soft memory limit (GOMEMLIMIT, which a
	// unit file or the agent itself can set)?
	ld, err := omp.StartDaemon(r.dir("idle"), "OMPSYNC_INTERVAL="+c.interval.String(), "GOMEMLIMIT="+memLimit)
	if err != nil {
		return err
	}
	if _, err := ld.WaitReady(2 * time.Minute); err != nil {
		_ = ld.Stop()
		return err
	}
	if _, err := waitQuiet(ctx, p, 5*time.Second, 3*time.Minute); err != nil {
		_ = ld.Stop()
		return err
	}
	time.Sleep(10 * time.Second)
	lmem, _ := bench.ProcMem(ld.Pid())
	if err := ld.Stop(); err != nil {
		return err
	}
	r.raw["idle_memlimit"] = map[string]any{"GOMEMLIMIT": memLimit, "mem_10s": lmem}
	r.add(row{
		Figure:  fmt.Sprintf("the same, 10 s into the quiet: as shipped; with GOMEMLIMIT=%s (peak)", memLimit),
		Target:  "<= 60 MB",
		Ompsync: fmt.Sprintf("%s; %s (%s)", mb(mem10.RSS), mb(lmem.RSS), mb(lmem.Peak)),
		Result:  "what-if",
	})

	if c.out != "" {
		// The same agent in this program's image, for a heap profile of
		// what it keeps for the idle files.
		pd, err := omp.StartWith(r.dir("idle"), []string{os.Args[0], "agent-profile", "-heapprofile", filepath.Join(c.out, "agent-idle.heap.pprof")},
			"OMPSYNC_INTERVAL="+c.interval.String())
		if err != nil {
			return err
		}
		if _, err := pd.WaitReady(2 * time.Minute); err != nil {
			_ = pd.Stop()
			return err
		}
		if _, err := waitQuiet(ctx, p, 5*time.Second, 3*time.Minute); err != nil {
			_ = pd.Stop()
			return err
		}
		pmem, _ := bench.ProcMem(pd.Pid())
		if err := pd.Stop(); err != nil {
			return err
		}
		r.raw["idle_profiled"] = map[string]any{"mem": pmem}
	}

	if err := r.ls(ctx, p, omp); err != nil {
		return err
	}
	if c.busyFor > 0 {
		return r.busy(ctx, p, omp, gen, agentDir, cwds)
	}
	return nil
}

// ls lists the idle files' sessions with `ompsync ls`, counting requests.
func (r *runner) ls(ctx context.Context, p *peer, omp *bench.Ompsync) error {
	c := r.cfg
	if !omp.Has(ctx, "ls") {
		r.add(row{Figure: fmt.Sprintf("`ls` over %d sessions, requests", c.idleFiles), Target: "<= 5", Ompsync: "no ls command in this build", Result: "not run"})
		return nil
	}
	var out []byte
	lc, err := r.measure(p, func() error {
		var err error
		out, err = omp.Run(ctx, "ls", "--json")
		return err
	})
	if err != nil {
		return err
	}
	lsN := lc.Counts
	listed := countListed(out)
	r.raw["ls"] = map[string]any{"requests": lsN, "listed": listed}
	r.add(row{
		Figure: fmt.Sprintf("`ls` over %d sessions, requests (%d sessions listed)", c.idleFiles, listed),
		Target: "<= 5", Ompsync: fmt.Sprintf("%d", lsN.Requests()),
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

// busy: the live workload again, now among the idle files, as on a laptop
// with a long history: what an active session costs when the agent also
// tracks thousands of old ones.
func (r *runner) busy(ctx context.Context, p *peer, omp *bench.Ompsync, gen *bench.Gen, agentDir string, cwds []string) error {
	c := r.cfg
	gen.BigProb, gen.MaxLine = bench.NewGen(r.corpus, 0).BigProb, 0
	var sessions []*bench.Session
	for i := range c.liveSessions {
		s, err := gen.NewSession(agentDir, cwds[i%len(cwds)], time.Now(), 5+gen.Rand().IntN(25))
		if err != nil {
			return err
		}
		sessions = append(sessions, s)
	}
	res, err := runLive(ctx, p, func() (*bench.Daemon, error) {
		return omp.StartDaemon(r.dir("idle"), "OMPSYNC_INTERVAL="+c.interval.String())
	}, gen, sessions, c.busyFor, c.liveGap)
	if err != nil {
		return err
	}
	r.raw["busy"] = res
	if c.out != "" && c.profileFor > 0 {
		// Again with the agent in this program's image, for its profiles.
		pres, err := runLiveProfiled(ctx, p, func() (*bench.Daemon, error) {
			return omp.StartWith(r.dir("idle"), []string{os.Args[0], "agent-profile",
				"-cpuprofile", filepath.Join(c.out, "agent-busy.cpu.pprof"), "-heapprofile", filepath.Join(c.out, "agent-busy.heap.pprof")},
				"OMPSYNC_INTERVAL="+c.interval.String())
		}, true, gen, sessions, c.profileFor, c.liveGap)
		if err != nil {
			return err
		}
		r.raw["busy_profiled"] = pres
	}
	ratio := float64(res.Uploaded.Up) / float64(res.Appended)
	r.add(row{
		Figure: fmt.Sprintf("%d sessions growing among %d idle files for %s: bytes uploaded per byte appended (catalog puts %.0f%% of the bytes)",
			res.Sessions, c.idleFiles, res.Window.Round(time.Second), 100*float64(res.CatalogBytes)/float64(res.Uploaded.Up)),
		Target: "<= 0.35", Ompsync: fmt.Sprintf("%.2f", ratio), Result: verdict(ratio <= 0.35),
	})
	r.add(row{
		Figure:  fmt.Sprintf("the same: lag p50 / p99 (max %s), agent CPU, RSS", secs(res.LagMax)),
		Target:  "p50 <= 2.5 s, p99 <= 4 s",
		Ompsync: fmt.Sprintf("%s / %s, %.0f%% of a core, %s", secs(res.LagP50), secs(res.LagP99), 100*res.CPU, mb(res.Mem.RSS)),
		Result:  verdict(res.LagP50 <= 2500*time.Millisecond && res.LagP99 <= 4*time.Second && res.NeverUploaded == 0),
	})
	return nil
}
