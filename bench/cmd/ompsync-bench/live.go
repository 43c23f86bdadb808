package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ompsync/ompsync/bench"
	"github.com/ompsync/ompsync/repo"
)

// putLog records the objects the agent's puts made readable, as the proxy
// saw the server accept them.
type putLog struct {
	mu       sync.Mutex
	chunks   map[string][]chunkPut // by session id, in time order
	catalogs []time.Time
	heads    int
}

type chunkPut struct {
	gen string
	end int64
	at  time.Time
}

func (l *putLog) record(ev bench.PutEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ev.Key == repo.CatalogKey("bench") {
		l.catalogs = append(l.catalogs, ev.At)
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
	log := &putLog{chunks: map[string][]chunkPut{}}
	p.proxy.OnPut(log.record)
	omp := r.ompsync(p, agentDir, "live")
	d, err := omp.StartDaemon(r.dir("live"), "OMPSYNC_INTERVAL="+c.interval.String())
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = d.Stop()
		}
	}()
	if _, err := d.WaitReady(2 * time.Minute); err != nil {
		return err
	}

	// Each session gets entries as a Poisson process, and one rename.
	type event struct {
		at      time.Duration
		s       int
		retitle bool
	}
	var events []event
	for i := range sessions {
		for t := time.Duration(rng.ExpFloat64() * float64(c.liveGap)); t < c.liveFor; t += time.Duration(rng.ExpFloat64() * float64(c.liveGap)) {
			events = append(events, event{at: t, s: i})
		}
		events = append(events, event{at: time.Duration(rng.Int64N(int64(c.liveFor))), s: i, retitle: true})
	}
	sort.Slice(events, func(i, j int) bool { return events[i].at < events[j].at })

	before := p.proxy.Counts()
	cpu0, err := bench.ProcCPU(d.Pid())
	if err != nil {
		return err
	}
	var appends []appendRec
	var appended int64
	t0 := time.Now()
	for _, ev := range events {
		if wait := time.Until(t0.Add(ev.at)); wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
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
			return err
		}
		appended += n
		appends = append(appends, appendRec{id: s.ID, end: s.Size, at: time.Now()})
	}
	loadEnd := time.Now()
	cpu1, err := bench.ProcCPU(d.Pid())
	if err != nil {
		return err
	}
	rss, peak, _ := bench.ProcMem(d.Pid())

	// Let the agent catch up, then stop it.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
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
		time.Sleep(100 * time.Millisecond)
	}
	after := p.proxy.Counts()
	stopped = true
	if err := d.Stop(); err != nil {
		return err
	}

	var lags []time.Duration
	missing := 0
	for _, a := range appends {
		at, ok := log.readableAt(a.id, a.end)
		if !ok {
			missing++
			continue
		}
		lags = append(lags, at.Sub(a.at))
	}
	window := loadEnd.Sub(t0)
	perMin := func(n int) float64 { return float64(n) / window.Minutes() }
	log.mu.Lock()
	var maxChunks, sumChunks int
	for _, s := range sessions {
		n := 0
		for _, p := range log.chunks[s.ID] {
			if !p.at.Before(t0) && !p.at.After(loadEnd) {
				n++
			}
		}
		maxChunks = max(maxChunks, n)
		sumChunks += n
	}
	cats := 0
	for _, t := range log.catalogs {
		if !t.Before(t0) && !t.After(loadEnd) {
			cats++
		}
	}
	heads := log.heads
	log.mu.Unlock()
	up := after.Sub(before)
	ratio := float64(up.Up) / float64(appended)
	cpu := (cpu1 - cpu0).Seconds() / window.Seconds()
	p50, p99 := percentile(lags, 0.5), percentile(lags, 0.99)
	limit := 60 / c.interval.Seconds()

	r.raw["live"] = map[string]any{
		"sessions": len(sessions), "appends": len(appends), "appended_bytes": appended, "window_ns": window,
		"uploaded": up, "lag_p50_ns": p50, "lag_p90_ns": percentile(lags, 0.9), "lag_p99_ns": p99,
		"lag_max_ns": percentile(lags, 1), "never_uploaded": missing, "chunk_puts_max": maxChunks,
		"chunk_puts_total": sumChunks, "catalog_puts": cats, "head_puts": heads,
		"agent_cpu_fraction": cpu, "agent_rss": rss, "agent_rss_peak": peak,
	}
	desc := fmt.Sprintf("%d sessions, interval %s, %d entries + %d renames in %s", len(sessions), c.interval, len(appends)-len(sessions), len(sessions), window.Round(time.Second))
	r.add(row{
		Figure:  "bytes uploaded per byte appended, agent running, " + desc + fmt.Sprintf(" (%s appended)", mb(appended)),
		Target:  "<= 0.35", Ompsync: fmt.Sprintf("%.3f", ratio), Result: verdict(ratio <= 0.35),
	})
	r.add(row{
		Figure: "lag, append to object readable, p50 (" + desc + ")", Target: "<= 2.5 s",
		Ompsync: secs(p50), Result: verdict(p50 <= 2500*time.Millisecond && missing == 0),
	})
	r.add(row{
		Figure: fmt.Sprintf("lag, append to object readable, p99 (max %s, %d of %d appends never uploaded)", secs(percentile(lags, 1)), missing, len(appends)),
		Target: "<= 4 s", Ompsync: secs(p99), Result: verdict(p99 <= 4*time.Second && missing == 0),
	})
	r.add(row{
		Figure:  "chunk uploads per active session per minute (busiest session; mean)",
		Target:  fmt.Sprintf("<= %.0f", limit),
		Ompsync: fmt.Sprintf("%.1f; %.1f", perMin(maxChunks), perMin(sumChunks)/float64(len(sessions))),
		Result:  verdict(perMin(maxChunks) <= limit),
	})
	r.add(row{
		Figure: "catalog updates per machine per minute", Target: fmt.Sprintf("<= %.0f", limit),
		Ompsync: fmt.Sprintf("%.1f", perMin(cats)), Result: verdict(perMin(cats) <= limit),
	})
	r.add(row{
		Figure:  fmt.Sprintf("agent CPU and memory while %d sessions grow", len(sessions)),
		Ompsync: fmt.Sprintf("%.1f%% of a core, RSS %s (peak %s)", 100*cpu, mb(rss), mb(peak)),
	})
	return nil
}
