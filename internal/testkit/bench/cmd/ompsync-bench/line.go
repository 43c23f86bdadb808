//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/bench"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
)

// lineStep is what one peer's step cost on the shaped line.
type lineStep struct {
	cost
	// WireUp and WireDown are every byte that crossed the line (HTTP
	// headers and TLS-free framing too); Conns the connections opened.
	WireUp, WireDown, Conns int64
	// Peak is the peak resident memory of the peer's process (ompsync's
	// only; 0 when not known).
	Peak int64
}

// linePeer is one tool measured on the line, with its own bucket,
// counting proxy and line.
type linePeer struct {
	name string
	p    *peer
	// peak, when set, is the peak resident memory of the step just run.
	peak func() int64
	// backup, pass and restore run the tool's three steps.
	backup, pass func() error
	restore      func(to string) (sessions string, err error)
	// Stored is what the bucket holds after the first backup.
	Stored  int64
	Backup  []lineStep
	Pass    []lineStep
	Restore []lineStep
}

// line: the same tree backed up, updated and restored by ompsync, rclone
// and restic, each through its own shaped line (the same RTT and rates)
// to the same server. Each run starts from fresh buckets and a freshly
// written tree (the same seed, so the same bytes); figures are the median
// of the runs.
func (r *runner) line(ctx context.Context) error {
	c := r.cfg
	lc := bench.LineConfig{RTT: c.lineRTT, Up: c.lineUp * 1e6, Down: c.lineDown * 1e6}
	var peers []*linePeer
	var tree *bench.Tree
	var appended int64
	for run := range c.lineRuns {
		base := fmt.Sprintf("line-%d", run)
		agentDir := r.dir(base, "agent")
		gen := bench.NewGen(r.corpus, c.seed+5)
		var err error
		tree, err = bench.BuildTree(gen, agentDir, c.lineSessions, int64(c.lineMB)*1e6, c.lineForks, time.Date(2026, 2, 2, 8, 0, 0, 0, time.UTC))
		if err != nil {
			return err
		}
		r.log.Info("line: tree written", "run", run, "sessions", len(tree.Sessions), "forks", tree.Forks, "bytes", tree.Bytes, "line", lc.String())
		ps, err := r.linePeers(ctx, base, agentDir, lc)
		if err != nil {
			return err
		}
		if peers == nil {
			peers = ps
		} else {
			for i := range ps {
				ps[i].Backup, ps[i].Pass, ps[i].Restore = peers[i].Backup, peers[i].Pass, peers[i].Restore
			}
			peers = ps
		}
		for _, lp := range peers {
			m, err := r.lineMeasure(lp, "backup", run, lp.backup)
			if err != nil {
				return fmt.Errorf("%s first backup: %w", lp.name, err)
			}
			lp.Backup = append(lp.Backup, m)
			if lp.Stored, err = r.stored(ctx, lp.p.bucket); err != nil {
				return err
			}
		}
		// One round of omp activity on some of the sessions, as in rounds.
		rng := gen.Rand()
		clock := time.Date(2026, 2, 3, 9, 0, 0, 0, time.UTC)
		appended = 0
		for _, i := range rng.Perm(len(tree.Sessions))[:min(c.lineActive, len(tree.Sessions))] {
			n, err := gen.Append(tree.Sessions[i], clock, 2+rng.IntN(13))
			if err != nil {
				return err
			}
			appended += n
			if rng.Float64() < 0.1 {
				n, err := gen.Retitle(tree.Sessions[i], clock)
				if err != nil {
					return err
				}
				appended += n
			}
		}
		for _, lp := range peers {
			m, err := r.lineMeasure(lp, "pass", run, lp.pass)
			if err != nil {
				return fmt.Errorf("%s pass: %w", lp.name, err)
			}
			lp.Pass = append(lp.Pass, m)
		}
		for _, lp := range peers {
			to := filepath.Join(r.dir(base, "out"), lp.name)
			var got string
			m, err := r.lineMeasure(lp, "restore", run, func() error { var err error; got, err = lp.restore(to); return err })
			if err != nil {
				return fmt.Errorf("%s restore: %w", lp.name, err)
			}
			bad, err := sameTree(filepath.Join(agentDir, "sessions"), got)
			if err != nil {
				return err
			}
			if bad > 0 {
				return fmt.Errorf("%s restore: %d files differ from the tree", lp.name, bad)
			}
			lp.Restore = append(lp.Restore, m)
			os.RemoveAll(to)
		}
		if run == c.lineRuns-1 && c.out != "" {
			// restore.Run in this program, through the same line, with a
			// CPU profile: where a restore's time goes when the line is
			// not what holds it up.
			to := filepath.Join(r.dir(base, "out"), "profiled")
			omp := r.ompsync(peers[0].p, agentDir, base)
			m, err := r.lineMeasure(peers[0], "restore-profiled", 0, func() error {
				_, err := omp.RunProgram(ctx, os.Args[0], "restore-profile", "-to", to, "-cpuprofile", filepath.Join(c.out, "line-restore.cpu.pprof"))
				return err
			})
			if err != nil {
				return err
			}
			r.raw["line_restore_profiled"] = m
			os.RemoveAll(to)
			// The agent's first backup, likewise, into a fresh bucket.
			pp, err := r.newLinePeer(ctx, base+"-profiled", lc)
			if err != nil {
				return err
			}
			op := r.ompsync(pp, agentDir, base+"-profiled")
			m, err = r.lineMeasure(&linePeer{name: "profiled", p: pp}, "backup", 1, func() error {
				_, err := op.RunProgram(ctx, os.Args[0], "agent-profile", "-once", "-cpuprofile", filepath.Join(c.out, "line-backup.cpu.pprof"))
				return err
			})
			pp.close()
			if err != nil {
				return err
			}
			r.raw["line_backup_profiled"] = m
		}
		for _, lp := range peers {
			lp.p.close()
		}
	}
	r.raw["line"] = map[string]any{"config": lc.String(), "sessions": len(tree.Sessions), "forks": tree.Forks,
		"bytes": tree.Bytes, "appended": appended, "peers": peers}
	r.lineRows(lc, tree, appended, peers)
	if c.lineSweep != "" {
		if err := r.lineSweep(ctx, lc, fmt.Sprintf("line-%d", c.lineRuns-1), tree); err != nil {
			return err
		}
	}
	if c.lineLiveFor > 0 {
		return r.lineLive(ctx, lc)
	}
	return nil
}

// linePeers makes the three peers of one run, each with a fresh bucket.
func (r *runner) linePeers(ctx context.Context, base, agentDir string, lc bench.LineConfig) ([]*linePeer, error) {
	c := r.cfg
	po, err := r.newLinePeer(ctx, base+"-ompsync", lc)
	if err != nil {
		return nil, err
	}
	pr, err := r.newLinePeer(ctx, base+"-rclone", lc)
	if err != nil {
		return nil, err
	}
	pt, err := r.newLinePeer(ctx, base+"-restic", lc)
	if err != nil {
		return nil, err
	}
	omp := r.ompsync(po, agentDir, base)
	rc, err := r.rcloneFor(pr, base)
	if err != nil {
		return nil, err
	}
	rs := bench.NewRestic(c.restic, pt.endpoint(), r.srv.AccessKey, r.srv.SecretKey, pt.bucket, r.dir(base, "restic-home"))
	// restic's repository is made before it is measured; ompsync makes its
	// marker in its first backup, rclone needs none.
	if err := rs.Init(ctx); err != nil {
		return nil, err
	}
	src := filepath.Join(agentDir, "sessions")
	once := func() error { _, err := omp.Run(ctx, "agent", "--once"); return err }
	rcCopy := func() error { return rc.Copy(ctx, src, "bench:"+pr.bucket+"/sessions") }
	return []*linePeer{
		{name: "ompsync", p: po, peak: omp.LastPeak, backup: once, pass: once, restore: func(to string) (string, error) {
			_, err := omp.Run(ctx, "restore", "--all", "--to", to)
			return filepath.Join(to, "sessions"), err
		}},
		{name: "rclone", p: pr, backup: rcCopy, pass: rcCopy, restore: func(to string) (string, error) {
			return filepath.Join(to, "sessions"), rc.Copy(ctx, "bench:"+pr.bucket+"/sessions", filepath.Join(to, "sessions"))
		}},
		{name: "restic", p: pt, backup: func() error { return rs.Backup(ctx, src) }, pass: func() error { return rs.Backup(ctx, src) },
			restore: func(to string) (string, error) {
				// A new machine: no cache. restic restores under the
				// absolute path it backed up.
				err := rs.WithCache(filepath.Join(to, ".cache")).Restore(ctx, to)
				return filepath.Join(to, src), err
			}},
	}, nil
}

// newLinePeer is newPeer behind a shaped line.
func (r *runner) newLinePeer(ctx context.Context, bucket string, lc bench.LineConfig) (*peer, error) {
	p, err := r.newPeer(ctx, bucket)
	if err != nil {
		return nil, err
	}
	if p.line, err = bench.StartLine(p.proxy.URL, lc); err != nil {
		p.proxy.Close()
		return nil, err
	}
	return p, nil
}

// lineMeasure is measure, with what crossed the line. The first run's
// requests are traced to -out as trace-line-<peer>-<step>.log.
func (r *runner) lineMeasure(lp *linePeer, step string, run int, f func() error) (lineStep, error) {
	p := lp.p
	if run == 0 && r.cfg.out != "" {
		if tf, err := os.Create(filepath.Join(r.cfg.out, "trace-line-"+lp.name+"-"+step+".log")); err == nil {
			p.proxy.Trace(tf)
			defer func() { p.proxy.Trace(nil); tf.Close() }()
		}
	}
	u0, d0, c0 := p.line.Wire()
	m, err := r.measure(p, f)
	u1, d1, c1 := p.line.Wire()
	st := lineStep{cost: m, WireUp: u1 - u0, WireDown: d1 - d0, Conns: c1 - c0}
	if lp.peak != nil {
		st.Peak = lp.peak()
	}
	return st, err
}

// stored is what a bucket holds, listed on the server directly.
func (r *runner) stored(ctx context.Context, bucket string) (int64, error) {
	cl, err := backend.OpenRaw(ctx, "s3://"+bucket, backend.S3Options{
		Endpoint: r.srv.Endpoint, PathStyle: true, AccessKeyID: r.srv.AccessKey, SecretAccessKey: r.srv.SecretKey,
	})
	if err != nil {
		return 0, err
	}
	var n int64
	for obj, err := range cl.List(ctx, "", remote.ListOptions{}) {
		if err != nil {
			return 0, err
		}
		n += obj.Size
	}
	return n, nil
}

// medianStep is the run with the median wall time.
func medianStep(s []lineStep) lineStep {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b lineStep) int { return int(a.Wall - b.Wall) })
	return s[(len(s)-1)/2]
}

func walls(s []lineStep) string {
	var out []time.Duration
	for _, x := range s {
		out = append(out, x.Wall)
	}
	slices.Sort(out)
	if len(out) == 1 {
		return ""
	}
	return fmt.Sprintf(" (%s-%s over %d runs)", secs(out[0]), secs(out[len(out)-1]), len(out))
}

func (r *runner) lineRows(lc bench.LineConfig, tree *bench.Tree, appended int64, peers []*linePeer) {
	o, rc, rs := peers[0], peers[1], peers[2]
	desc := fmt.Sprintf("%d sessions (%d forks), %s, line %s", len(tree.Sessions), tree.Forks, mb(tree.Bytes), lc)
	cell := func(s lineStep, down bool) string {
		b := s.Counts.Up
		dir := "up"
		if down {
			b, dir = s.Counts.Down, "down"
		}
		out := fmt.Sprintf("%s, %s %s, %d requests", secs(s.Wall), mb(b), dir, s.Counts.Requests())
		if s.Peak > 0 {
			out += ", peak RSS " + mb(s.Peak)
		}
		return out
	}
	// The line's limit for the bytes ompsync moves: at the line's rate,
	// plus ten round trips.
	ob, rb, tb := medianStep(o.Backup), medianStep(rc.Backup), medianStep(rs.Backup)
	lim := lc.Limit(ob.Counts.Up, ob.Counts.Down, 10)
	r.add(row{
		Figure:  "line: first backup of " + desc + "; wall time (median" + walls(o.Backup) + "), body bytes, requests",
		Target:  fmt.Sprintf("<= 1.5 x the line's limit (%s) and <= rclone / 3", secs(lim)),
		Ompsync: cell(ob, false), Rclone: cell(rb, false), Restic: cell(tb, false),
		Versus: fmt.Sprintf("%.2f x the limit; rclone %s, restic %s ompsync's time", ob.Wall.Seconds()/lim.Seconds(),
			times(ob.Wall.Seconds(), rb.Wall.Seconds()), times(ob.Wall.Seconds(), tb.Wall.Seconds())),
		Result: verdict(ob.Wall.Seconds() <= 1.5*lim.Seconds() && 3*ob.Wall <= rb.Wall),
	})
	r.add(row{
		Figure:  "line: stored after the first backup (every object in the bucket)",
		Ompsync: mb(o.Stored), Rclone: mb(rc.Stored), Restic: mb(rs.Stored),
		Versus: fmt.Sprintf("restic stores %.2f x ompsync's bytes", float64(rs.Stored)/float64(o.Stored)),
	})
	op, rp, tp := medianStep(o.Pass), medianStep(rc.Pass), medianStep(rs.Pass)
	r.add(row{
		Figure:  fmt.Sprintf("line: one pass after appends to %d sessions (%s appended); wall time (median%s)", r.cfg.lineActive, mb(appended), walls(o.Pass)),
		Target:  "<= 0.3 x rclone",
		Ompsync: cell(op, false), Rclone: cell(rp, false), Restic: cell(tp, false),
		Versus: fmt.Sprintf("%.2f x rclone's time, %.2f x restic's", op.Wall.Seconds()/rp.Wall.Seconds(), op.Wall.Seconds()/tp.Wall.Seconds()),
		Result: verdict(op.Wall.Seconds() <= 0.3*rp.Wall.Seconds()),
	})
	or, rr, tr := medianStep(o.Restore), medianStep(rc.Restore), medianStep(rs.Restore)
	lim = lc.Limit(or.Counts.Up, or.Counts.Down, 10)
	r.add(row{
		Figure:  fmt.Sprintf("line: restore of everything into an empty folder (restic without its cache); wall time (median%s)", walls(o.Restore)),
		Target:  fmt.Sprintf("<= 1.5 x the line's limit (%s) and <= rclone / 3", secs(lim)),
		Ompsync: cell(or, true), Rclone: cell(rr, true), Restic: cell(tr, true),
		Versus: fmt.Sprintf("%.2f x the limit; rclone %s, restic %s ompsync's time", or.Wall.Seconds()/lim.Seconds(),
			times(or.Wall.Seconds(), rr.Wall.Seconds()), times(or.Wall.Seconds(), tr.Wall.Seconds())),
		Result: verdict(or.Wall.Seconds() <= 1.5*lim.Seconds() && 3*or.Wall <= rr.Wall),
	})
}

// lineLive: the agent running (interval 2 s) while 100 sessions grow, its
// uploads through the line.
func (r *runner) lineLive(ctx context.Context, lc bench.LineConfig) error {
	c := r.cfg
	agentDir := r.dir("line-live", "agent")
	gen := bench.NewGen(r.corpus, c.seed+6)
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
	p, err := r.newLinePeer(ctx, "line-live", lc)
	if err != nil {
		return err
	}
	defer p.close()
	omp := r.ompsync(p, agentDir, "line-live")
	res, err := runLive(ctx, p, func() (*bench.Daemon, error) {
		return omp.StartDaemon(r.dir("line-live"), "OMPSYNC_INTERVAL="+c.interval.String())
	}, gen, sessions, c.lineLiveFor, c.liveGap)
	if err != nil {
		return err
	}
	r.raw["line_live"] = res
	r.add(row{
		Figure: fmt.Sprintf("line: lag, append to object readable, p50 / p99 (max %s; %d sessions, interval %s, %s; %d of %d appends never uploaded)",
			secs(res.LagMax), res.Sessions, c.interval, res.Window.Round(time.Second), res.NeverUploaded, res.Appends),
		Target:  "p99 <= 4 s",
		Ompsync: fmt.Sprintf("%s / %s, %.1f%% of a core, RSS %s (peak %s)", secs(res.LagP50), secs(res.LagP99), 100*res.CPU, mb(res.Mem.RSS), mb(res.Mem.Peak)),
		Result:  verdict(res.LagP99 <= 4*time.Second && res.NeverUploaded == 0),
	})
	return nil
}

// lineSweep backs up the last run's tree and restores it with each value
// of transfers in -line-sweep, each into a fresh bucket, -line-runs times:
// how the default was chosen.
func (r *runner) lineSweep(ctx context.Context, lc bench.LineConfig, base string, tree *bench.Tree) error {
	c := r.cfg
	agentDir := r.dir(base, "agent")
	type point struct {
		Transfers       int
		Backup, Restore []lineStep
	}
	var points []point
	for _, f := range strings.Split(c.lineSweep, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-line-sweep: %q is not a number of transfers", f)
		}
		pt := point{Transfers: n}
		for run := range c.lineRuns {
			name := fmt.Sprintf("sweep-%d-%d", n, run)
			p, err := r.newLinePeer(ctx, name, lc)
			if err != nil {
				return err
			}
			omp := r.ompsync(p, agentDir, name).With(fmt.Sprintf("OMPSYNC_TRANSFERS=%d", n))
			lp := &linePeer{name: name, p: p, peak: omp.LastPeak}
			b, err := r.lineMeasure(lp, "backup", 1, func() error { _, err := omp.Run(ctx, "agent", "--once"); return err })
			if err != nil {
				p.close()
				return err
			}
			to := filepath.Join(r.dir(base, "out"), name)
			rs, err := r.lineMeasure(lp, "restore", 1, func() error { _, err := omp.Run(ctx, "restore", "--all", "--to", to); return err })
			p.close()
			os.RemoveAll(to)
			if err != nil {
				return err
			}
			pt.Backup, pt.Restore = append(pt.Backup, b), append(pt.Restore, rs)
		}
		points = append(points, pt)
	}
	r.raw["line_sweep"] = points
	var cells []string
	for _, pt := range points {
		b, rs := medianStep(pt.Backup), medianStep(pt.Restore)
		cells = append(cells, fmt.Sprintf("%d: %s / %s (peak RSS %s / %s)", pt.Transfers, secs(b.Wall), secs(rs.Wall), mb(b.Peak), mb(rs.Peak)))
	}
	r.add(row{
		Figure:  fmt.Sprintf("line: first backup / restore of the %d sessions by transfers (median of %d runs each)", len(tree.Sessions), c.lineRuns),
		Ompsync: strings.Join(cells, "; "),
	})
	return nil
}
