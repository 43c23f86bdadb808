//go:build unix

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/bench"
)

// peerRun is what one peer did over the rounds.
type peerRun struct {
	Initial      bench.Counts    `json:"initial"`
	InitialTime  time.Duration   `json:"initial_ns"`
	Counts       bench.Counts    `json:"counts"` // all rounds
	Times        []time.Duration `json:"times_ns"`
	RoundUploads []int64         `json:"round_upload_bytes"`
	CPU          time.Duration   `json:"cpu_ns"` // all rounds, of the peer's processes
}

// rounds: the same rounds of appends, and after each one every peer
// brings its copy up to date, one after the other. A round is one minute
// of omp activity on a share of the sessions; ompsync runs as
// `ompsync agent --once`, the cron-style one-shot that compares with
// `rclone copy`.
func (r *runner) rounds(ctx context.Context) error {
	c := r.cfg
	agentDir := r.dir("rounds", "agent")
	gen := bench.NewGen(r.corpus, c.seed)
	rng := gen.Rand()
	clock := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	cwds := bench.CwdDirs(10)
	var sessions []*bench.Session
	var total int64
	for i := range c.roundSessions {
		s, err := gen.NewSession(agentDir, cwds[i%len(cwds)], clock.Add(time.Duration(i)*time.Second), 10+rng.IntN(190))
		if err != nil {
			return err
		}
		sessions = append(sessions, s)
		total += s.Size
	}
	r.log.Info("rounds: sessions written", "sessions", len(sessions), "bytes", total)

	po, err := r.newPeer(ctx, "rounds-ompsync")
	if err != nil {
		return err
	}
	defer po.proxy.Close()
	pr, err := r.newPeer(ctx, "rounds-rclone")
	if err != nil {
		return err
	}
	defer pr.proxy.Close()
	pw, err := r.newPeer(ctx, "rounds-whole")
	if err != nil {
		return err
	}
	defer pw.proxy.Close()
	omp := r.ompsync(po, agentDir, "rounds")
	rc, err := r.rcloneFor(pr, "rounds")
	if err != nil {
		return err
	}
	wc, err := r.s3Client(ctx, pw)
	if err != nil {
		return err
	}
	whole := &bench.Whole{Client: wc, Root: agentDir, Parallel: 4}

	type stepper struct {
		name string
		p    *peer
		run  func() error
		res  peerRun
	}
	steps := []*stepper{
		{name: "ompsync", p: po, run: func() error { _, err := omp.Run(ctx, "agent", "--once"); return err }},
		{name: "rclone", p: pr, run: func() error {
			return rc.Copy(ctx, filepath.Join(agentDir, "sessions"), "bench:"+pr.bucket+"/sessions")
		}},
		{name: "whole", p: pw, run: func() error { _, err := whole.Sync(ctx); return err }},
	}
	for _, s := range steps {
		m, err := r.measure(s.p, s.run)
		if err != nil {
			return fmt.Errorf("%s initial upload: %w", s.name, err)
		}
		d, n := m.Wall, m.Counts
		s.res.Initial, s.res.InitialTime = n, d
	}

	var appended int64
	for round := range c.rounds {
		clock = clock.Add(time.Minute)
		for _, i := range rng.Perm(len(sessions))[:min(c.roundActive, len(sessions))] {
			// About one entry every 7 s, as in the real sessions.
			n, err := gen.Append(sessions[i], clock, 2+rng.IntN(13))
			if err != nil {
				return err
			}
			appended += n
			if rng.Float64() < 0.1 {
				n, err := gen.Retitle(sessions[i], clock)
				if err != nil {
					return err
				}
				appended += n
			}
		}
		for _, s := range steps {
			m, err := r.measure(s.p, s.run)
			if err != nil {
				return fmt.Errorf("%s round %d: %w", s.name, round, err)
			}
			d, n := m.Wall, m.Counts
			s.res.CPU += m.CPU
			s.res.Times = append(s.res.Times, d)
			s.res.RoundUploads = append(s.res.RoundUploads, n.Up)
			s.res.Counts = s.res.Counts.Add(n)
		}
	}
	o, rcl, w := steps[0].res, steps[1].res, steps[2].res
	r.raw["rounds"] = map[string]any{"sessions": len(sessions), "initial_bytes": total, "appended_bytes": appended,
		"ompsync": o, "rclone": rcl, "whole": w}

	ratio := func(p peerRun) float64 { return float64(p.Counts.Up) / float64(appended) }
	r.add(row{
		Figure:  fmt.Sprintf("bytes uploaded per byte appended, %d rounds of 1 min of appends to %d of %d sessions (%s appended)", c.rounds, c.roundActive, len(sessions), mb(appended)),
		Target:  "<= 0.35",
		Ompsync: fmt.Sprintf("%.3f", ratio(o)), Rclone: fmt.Sprintf("%.1f", ratio(rcl)), Whole: fmt.Sprintf("%.1f", ratio(w)),
		Versus: fmt.Sprintf("rclone %s, whole-file %s ompsync's bytes", times(ratio(o), ratio(rcl)), times(ratio(o), ratio(w))),
		Result: verdict(ratio(o) <= 0.35),
	})
	mo, mr, mw := median(o.Times), median(rcl.Times), median(w.Times)
	r.add(row{
		Figure:  "one backup pass after a round of appends, wall time (median of rounds; ompsync and rclone start a process, whole-file runs in the harness)",
		Target:  "< rclone copy",
		Ompsync: secs(mo), Rclone: secs(mr), Whole: secs(mw),
		Versus: fmt.Sprintf("rclone %s, whole-file %s ompsync's time", times(mo.Seconds(), mr.Seconds()), times(mo.Seconds(), mw.Seconds())),
		Result: verdict(mo < mr),
	})
	perRound := func(p peerRun) string {
		return fmt.Sprintf("%.0f", float64(p.Counts.Requests())/float64(c.rounds))
	}
	r.add(row{
		Figure:  "requests per round",
		Ompsync: perRound(o), Rclone: perRound(rcl), Whole: perRound(w),
	})
	r.add(row{
		Figure:  fmt.Sprintf("first backup of the %d sessions (%s): bytes uploaded, wall time", len(sessions), mb(total)),
		Ompsync: fmt.Sprintf("%s, %s", mb(o.Initial.Up), secs(o.InitialTime)),
		Rclone:  fmt.Sprintf("%s, %s", mb(rcl.Initial.Up), secs(rcl.InitialTime)),
		Whole:   fmt.Sprintf("%s, %s", mb(w.Initial.Up), secs(w.InitialTime)),
		Versus:  fmt.Sprintf("rclone %s ompsync's bytes", times(float64(o.Initial.Up), float64(rcl.Initial.Up))),
	})
	return nil
}
