//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/bench"
	"github.com/ompsync/ompsync/repo"
)

// putLog records the objects the agent's puts made readable, as the proxy
// saw the server accept them.
type putLog struct {
	mu       sync.Mutex
	chunks   map[string][]chunkPut // by session id, in time order
	catalogs []bench.PutEvent
	heads    int
}

type chunkPut struct {
	gen string
	end int64
	at  time.Time
}

func newPutLog() *putLog { return &putLog{chunks: map[string][]chunkPut{}} }

func (l *putLog) record(ev bench.PutEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ev.Key == repo.CatalogKey("bench") || ev.Key == repo.RecentKey("bench") {
		l.catalogs = append(l.catalogs, ev)
		return
	}
	ref, err := repo.ParseSessionKey(ev.Key)
	if err != nil {
		return
	}
	switch ref.Object {
	case "meta":
	case "head":
		l.heads++
	default:
		l.chunks[ref.Stream.SessionID] = append(l.chunks[ref.Stream.SessionID], chunkPut{ref.Generation, ref.End, ev.At})
	}
}

// readableAt is when bytes [0, end) of a session were first on the server.
func (l *putLog) readableAt(id string, end int64) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.chunks[id] {
		if p.end >= end {
			return p.at, true
		}
	}
	return time.Time{}, false
}

type appendRec struct {
	id  string
	end int64
	at  time.Time
}

// liveResult is what a running agent did while sessions grew.
type liveResult struct {
	Sessions, Appends int
	Appended          int64
	Window            time.Duration
	Uploaded          bench.Counts
	CatalogBytes      int64
	LagP50, LagP90    time.Duration
	LagP99, LagMax    time.Duration
	NeverUploaded     int
	Slow              [][2]float64 `json:",omitempty"` // [seconds into the run, lag] of appends slower than 3 s
	ChunkPutsMax      int
	ChunkPutsTotal    int
	CatalogPuts       int
	HeadPuts          int
	CPU               float64 // fraction of one core
	Mem               bench.Mem
}

func (l liveResult) perMin(n int) float64 { return float64(n) / l.Window.Minutes() }

// runLive makes the sessions grow for dur while a running agent (started
// by start, through p) uploads, then lets it catch up and stops it.
func runLive(ctx context.Context, p *peer, start func() (*bench.Daemon, error), gen *bench.Gen, sessions []*bench.Session, dur, gap time.Duration) (liveResult, error) {
	return runLiveProfiled(ctx, p, start, false, gen, sessions, dur, gap)
}

// runLiveProfiled is runLive; with profile, the agent (agent-profile) is
// told to start its CPU profile when the sessions start to grow.
func runLiveProfiled(ctx context.Context, p *peer, start func() (*bench.Daemon, error), profile bool, gen *bench.Gen, sessions []*bench.Session, dur, gap time.Duration) (liveResult, error) {
	var res liveResult
	log := newPutLog()
	p.proxy.OnPut(log.record)
	defer p.proxy.OnPut(nil)
	d, err := start()
	if err != nil {
		return res, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = d.Stop()
		}
	}()
	if _, err := d.WaitReady(2 * time.Minute); err != nil {
		return res, err
	}
	// Steady state: the work an agent does once after it starts (the
	// retention pass lists every session) is measured in the idle phase.
	if _, err := waitQuiet(ctx, p, 3*time.Second, 2*time.Minute); err != nil {
		return res, err
	}
	if profile {
		if err := d.Cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			return res, err
		}
	}
	before := p.proxy.Counts()
	cpu0, err := bench.ProcCPU(d.Pid())
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	appends, appended, err := grow(ctx, gen, sessions, dur, gap)
	if err != nil {
		return res, err
	}
	loadEnd := time.Now()
	cpu1, err := bench.ProcCPU(d.Pid())
	if err != nil {
		return res, err
	}
	res.Mem, _ = bench.ProcMem(d.Pid())

	// Let the agent catch up, then stop it.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		done := true
		for _, s := range sessions {
			if _, ok := log.readableAt(s.ID, s.Size); !ok {
				done = false
				break
			}
		}
		if done {
			break
		}
	}
	res.Uploaded = p.proxy.Counts().Sub(before)
	caughtUp := time.Now()
	stopped = true
	if err := d.Stop(); err != nil {
		return res, err
	}

	var lags []time.Duration
	for _, a := range appends {
		at, ok := log.readableAt(a.id, a.end)
		if !ok {
			res.NeverUploaded++
			continue
		}
		lags = append(lags, at.Sub(a.at))
		if at.Sub(a.at) > 3*time.Second {
			res.Slow = append(res.Slow, [2]float64{a.at.Sub(t0).Seconds(), at.Sub(a.at).Seconds()})
		}
	}
	res.Sessions, res.Appends, res.Appended = len(sessions), len(appends), appended
	res.Window = loadEnd.Sub(t0)
	res.CPU = (cpu1 - cpu0).Seconds() / res.Window.Seconds()
	res.LagP50, res.LagP90 = percentile(lags, 0.5), percentile(lags, 0.9)
	res.LagP99, res.LagMax = percentile(lags, 0.99), percentile(lags, 1)
	log.mu.Lock()
	defer log.mu.Unlock()
	in := func(t time.Time) bool { return !t.Before(t0) && !t.After(loadEnd) }
	for _, s := range sessions {
		n := 0
		for _, p := range log.chunks[s.ID] {
			if in(p.at) {
				n++
			}
		}
		res.ChunkPutsMax = max(res.ChunkPutsMax, n)
		res.ChunkPutsTotal += n
	}
	for _, ev := range log.catalogs {
		if in(ev.At) {
			res.CatalogPuts++
		}
		if !ev.At.Before(t0) && ev.At.Before(caughtUp) {
			res.CatalogBytes += ev.Size
		}
	}
	res.HeadPuts = log.heads
	return res, nil
}

// live: the agent as a daemon (`ompsync agent`, interval 2s) while 100
// sessions grow in real time, entries arriving at random as omp writes
// them, each session renamed once. Lag is measured from the write of a
// line to the server's answer to the put that holds it.
func (r *runner) live(ctx context.Context) error {
	c := r.cfg
	agentDir := r.dir("live", "agent")
	gen := bench.NewGen(r.corpus, c.seed+1)
	rng := gen.Rand()
	cwds := bench.CwdDirs(10)
	var sessions []*bench.Session
	for i := range c.liveSessions {
		s, err := gen.NewSession(agentDir, cwds[i%len(cwds)], time.Now(), 5+rng.IntN(25))
		if err != nil {
			return err
		}
		sessions = append(sessions, s)
	}
	p, err := r.newPeer(ctx, "live-ompsync")
	if err != nil {
		return err
	}
	defer p.proxy.Close()
	omp := r.ompsync(p, agentDir, "live")
	res, err := runLive(ctx, p, func() (*bench.Daemon, error) {
		return omp.StartDaemon(r.dir("live"), "OMPSYNC_INTERVAL="+c.interval.String())
	}, gen, sessions, c.liveFor, c.liveGap)
	if err != nil {
		return err
	}
	r.raw["live"] = res
	desc := fmt.Sprintf("%d sessions, interval %s, %d entries + %d renames in %s", res.Sessions, c.interval, res.Appends-res.Sessions, res.Sessions, res.Window.Round(time.Second))
	r.liveRows(desc, res)
	r.add(row{
		Figure:  fmt.Sprintf("agent CPU and memory while %d sessions grow", res.Sessions),
		Ompsync: fmt.Sprintf("%.1f%% of a core, RSS %s (peak %s)", 100*res.CPU, mb(res.Mem.RSS), mb(res.Mem.Peak)),
	})
	if c.out == "" || c.profileFor <= 0 {
		return nil
	}

	// The same workload again for a while, with the agent in this
	// program's image so that its CPU profile can be taken.
	pres, err := runLiveProfiled(ctx, p, func() (*bench.Daemon, error) {
		return omp.StartWith(r.dir("live"), []string{os.Args[0], "agent-profile", "-cpuprofile", filepath.Join(c.out, "agent-live.cpu.pprof")},
			"OMPSYNC_INTERVAL="+c.interval.String())
	}, true, gen, sessions, c.profileFor, c.liveGap)
	if err != nil {
		return err
	}
	r.raw["live_profiled"] = pres
	return nil
}

// liveRows adds the figures the issue sets targets for.
func (r *runner) liveRows(desc string, res liveResult) {
	limit := 60 / r.cfg.interval.Seconds()
	ratio := float64(res.Uploaded.Up) / float64(res.Appended)
	r.add(row{
		Figure: fmt.Sprintf("bytes uploaded per byte appended, agent running, %s (%s appended; catalog puts are %.0f%% of the bytes)",
			desc, mb(res.Appended), 100*float64(res.CatalogBytes)/float64(res.Uploaded.Up)),
		Target: "<= 0.35", Ompsync: fmt.Sprintf("%.3f", ratio), Result: verdict(ratio <= 0.35),
	})
	r.add(row{
		Figure: "lag, append to object readable, p50 (" + desc + ")", Target: "<= 2.5 s",
		Ompsync: secs(res.LagP50), Result: verdict(res.LagP50 <= 2500*time.Millisecond && res.NeverUploaded == 0),
	})
	r.add(row{
		Figure: fmt.Sprintf("lag, append to object readable, p99 (max %s, %d of %d appends never uploaded)", secs(res.LagMax), res.NeverUploaded, res.Appends),
		Target: "<= 4 s", Ompsync: secs(res.LagP99), Result: verdict(res.LagP99 <= 4*time.Second && res.NeverUploaded == 0),
	})
	r.add(row{
		Figure:  "chunk uploads per active session per minute (busiest session; mean)",
		Target:  fmt.Sprintf("<= %.0f", limit),
		Ompsync: fmt.Sprintf("%.1f; %.1f", res.perMin(res.ChunkPutsMax), res.perMin(res.ChunkPutsTotal)/float64(res.Sessions)),
		Result:  verdict(res.perMin(res.ChunkPutsMax) <= limit),
	})
	r.add(row{
		Figure: "catalog updates per machine per minute", Target: fmt.Sprintf("<= %.0f", limit),
		Ompsync: fmt.Sprintf("%.1f", res.perMin(res.CatalogPuts)), Result: verdict(res.perMin(res.CatalogPuts) <= limit),
	})
}

// grow makes the sessions grow for dur: each gets entries as a Poisson
// process with mean gap, and one rename at a random time.
func grow(ctx context.Context, gen *bench.Gen, sessions []*bench.Session, dur, gap time.Duration) ([]appendRec, int64, error) {
	rng := gen.Rand()
	type event struct {
		at      time.Duration
		s       int
		retitle bool
	}
	var events []event
	for i := range sessions {
		for t := time.Duration(rng.ExpFloat64() * float64(gap)); t < dur; t += time.Duration(rng.ExpFloat64() * float64(gap)) {
			events = append(events, event{at: t, s: i})
		}
		events = append(events, event{at: time.Duration(rng.Int64N(int64(dur))), s: i, retitle: true})
	}
	sort.Slice(events, func(i, j int) bool { return events[i].at < events[j].at })
	var appends []appendRec
	var appended int64
	t0 := time.Now()
	for _, ev := range events {
		if wait := time.Until(t0.Add(ev.at)); wait > 0 {
			select {
			case <-ctx.Done():
				return nil, 0, ctx.Err()
			case <-time.After(wait):
			}
		}
		s := sessions[ev.s]
		var n int64
		var err error
		if ev.retitle {
			n, err = gen.Retitle(s, time.Now())
		} else {
			n, err = gen.Append(s, time.Now(), 1)
		}
		if err != nil {
			return nil, 0, err
		}
		appended += n
		appends = append(appends, appendRec{id: s.ID, end: s.Size, at: time.Now()})
	}
	if wait := time.Until(t0.Add(dur)); wait > 0 {
		time.Sleep(wait)
	}
	return appends, appended, nil
}
