//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/bench"
)

// restore: 1,000 sessions of 500 MB in all, backed up by ompsync and by
// rclone, then brought back into empty folders: `ompsync restore --all
// --to` against `rclone copy` of the same raw files from the same server.
func (r *runner) restore(ctx context.Context) error {
	c := r.cfg
	agentDir := r.dir("restore", "agent")
	gen := bench.NewGen(r.corpus, c.seed+3)
	rng := gen.Rand()
	cwds := bench.CwdDirs(20)
	budget := int64(c.restoreMB) * 1e6
	clock := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	var total int64
	for i := range c.restoreSessions {
		// Sizes from a fifth of the mean to 1.8 times it; the mean follows
		// what is left of the budget, as the last entry of a session
		// overshoots its size (by a large tool result at times).
		mean := int(max(10e3, (budget-total)/int64(c.restoreSessions-i)))
		size := mean/5 + rng.IntN(mean*8/5)
		s, err := gen.NewSessionSize(agentDir, cwds[i%len(cwds)], clock.Add(time.Duration(i)*time.Hour), size)
		if err != nil {
			return err
		}
		total += s.Size
	}
	r.log.Info("restore: sessions written", "sessions", c.restoreSessions, "bytes", total)
	po, err := r.newPeer(ctx, "restore-ompsync")
	if err != nil {
		return err
	}
	defer po.proxy.Close()
	pr, err := r.newPeer(ctx, "restore-rclone")
	if err != nil {
		return err
	}
	defer pr.proxy.Close()
	omp := r.ompsync(po, agentDir, "restore")
	rc, err := r.rcloneFor(pr, "restore")
	if err != nil {
		return err
	}
	bo, err := r.measure(po, func() error { _, err := omp.Run(ctx, "agent", "--once"); return err })
	if err != nil {
		return err
	}
	br, err := r.measure(pr, func() error {
		return rc.Copy(ctx, filepath.Join(agentDir, "sessions"), "bench:"+pr.bucket+"/sessions")
	})
	if err != nil {
		return err
	}
	upO, upON, upR, upRN := bo.Wall, bo.Counts, br.Wall, br.Counts
	r.add(row{
		Figure:  fmt.Sprintf("first backup of %d sessions (%s): wall time, bytes uploaded", c.restoreSessions, mb(total)),
		Ompsync: fmt.Sprintf("%s, %s", secs(upO), mb(upON.Up)), Rclone: fmt.Sprintf("%s, %s", secs(upR), mb(upRN.Up)),
		Versus: fmt.Sprintf("rclone %s ompsync's time, %s its bytes", times(upO.Seconds(), upR.Seconds()), times(float64(upON.Up), float64(upRN.Up))),
	})
	figure := fmt.Sprintf("restore of %d sessions (%s) into an empty folder, wall time", c.restoreSessions, mb(total))
	if !omp.Has(ctx, "restore") {
		r.add(row{Figure: figure, Target: "< rclone copy", Ompsync: "no restore command in this build", Result: "not run"})
		return nil
	}
	// Three runs each into fresh folders, taking turns, the one to go first
	// alternating. The folders are removed at the end of the phase, not
	// between runs: this file system (ext4 without a journal) skips
	// recently deleted inodes when it makes a file, for a minute after
	// many were deleted, which cost a run that followed a removal 15-30%
	// of its CPU. The faster run of each counts (other work on the machine
	// only ever slows a run). Each run starts with the disk synced, so
	// that none pays for another's writes; an ompsync restore has synced
	// every file it wrote when it exits, an rclone copy has not, so
	// rclone's sync of its files is timed too.
	defer os.RemoveAll(r.dir("restore", "out"))
	src := filepath.Join(agentDir, "sessions")
	var ro, rr cost
	var rrSync time.Duration
	var badO, badR int
	for i := range 3 {
		toO := filepath.Join(r.dir("restore", "out"), fmt.Sprintf("ompsync-%d", i))
		toR := filepath.Join(r.dir("restore", "out"), fmt.Sprintf("rclone-%d", i))
		var o, rcl cost
		var synced time.Duration
		runO := func() (err error) {
			syncDisk()
			o, err = r.measure(po, func() error { _, err := omp.Run(ctx, "restore", "--all", "--to", toO); return err })
			return err
		}
		runR := func() (err error) {
			syncDisk()
			rcl, err = r.measure(pr, func() error { return rc.Copy(ctx, "bench:"+pr.bucket+"/sessions", filepath.Join(toR, "sessions")) })
			if err == nil {
				start := time.Now()
				syncDisk()
				synced = time.Since(start)
			}
			return err
		}
		first, second := runO, runR
		if i%2 == 1 {
			first, second = runR, runO
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
		wrongO, err := sameTree(src, filepath.Join(toO, "sessions"))
		if err != nil {
			return err
		}
		wrongR, err := sameTree(src, filepath.Join(toR, "sessions"))
		if err != nil {
			return err
		}
		badO, badR = max(badO, wrongO), max(badR, wrongR)
		if i == 0 || o.Wall < ro.Wall {
			ro = o
		}
		if i == 0 || rcl.Wall+synced < rr.Wall+rrSync {
			rr, rrSync = rcl, synced
		}
	}
	dO, nO, dR, nR := ro.Wall, ro.Counts, rr.Wall, rr.Counts
	r.raw["restore"] = map[string]any{"sessions": c.restoreSessions, "bytes": total,
		"backup_ompsync": bo, "backup_rclone": br, "ompsync": ro, "rclone": rr, "rclone_sync": rrSync,
		"ompsync_wrong_files": badO, "rclone_wrong_files": badR}
	note := ""
	if badO > 0 {
		note = fmt.Sprintf(" (%d files differ!)", badO)
	}
	r.add(row{
		Figure:  figure + " (faster of 3 runs; server CPU in brackets)",
		Target:  "< rclone copy",
		Ompsync: fmt.Sprintf("%s (%s CPU; %s), %d requests, %s down%s", secs(dO), secs(ro.CPU), secs(ro.Server), nO.Requests(), mb(nO.Down), note),
		Rclone:  fmt.Sprintf("%s (%s CPU; %s), %d requests, %s down", secs(dR), secs(rr.CPU), secs(rr.Server), nR.Requests(), mb(nR.Down)),
		Versus:  fmt.Sprintf("rclone takes %s ompsync's time", times(dO.Seconds(), dR.Seconds())),
		Result:  verdict(dO < dR && badO == 0),
	})
	r.add(row{
		Figure:  "the same, until the files are on disk: ompsync syncs each file before it exits; rclone's copy, then a sync of the file system",
		Ompsync: secs(dO), Rclone: fmt.Sprintf("%s (%s + %s sync)", secs(dR+rrSync), secs(dR), secs(rrSync)),
		Versus: fmt.Sprintf("rclone takes %s ompsync's time", times(dO.Seconds(), (dR+rrSync).Seconds())),
		Result: "-",
	})
	// The same, direct to the server: the counting proxy costs CPU by the
	// byte, more for rclone's 501 MB than for ompsync's 92 MB, where on
	// loopback bytes cost nothing else.
	directO := bench.NewOmpsync(c.ompsync, r.srv.Endpoint, r.srv.AccessKey, r.srv.SecretKey, po.bucket,
		agentDir, r.dir("restore", "state"), r.dir("restore", "home"))
	directR, err := bench.NewRclone(c.rclone, r.srv.Endpoint, r.srv.AccessKey, r.srv.SecretKey, r.dir("restore", "rclone"))
	if err != nil {
		return err
	}
	var wallO, wallR time.Duration
	for i := range 3 {
		toO := filepath.Join(r.dir("restore", "out"), fmt.Sprintf("direct-ompsync-%d", i))
		toR := filepath.Join(r.dir("restore", "out"), fmt.Sprintf("direct-rclone-%d", i))
		var o, rcl time.Duration
		runO := func() (err error) {
			o, err = timed(func() error { _, err := directO.Run(ctx, "restore", "--all", "--to", toO); return err })
			return err
		}
		runR := func() (err error) {
			rcl, err = timed(func() error { return directR.Copy(ctx, "bench:"+pr.bucket+"/sessions", filepath.Join(toR, "sessions")) })
			return err
		}
		first, second := runO, runR
		if i%2 == 1 {
			first, second = runR, runO
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
		if i == 0 || o < wallO {
			wallO = o
		}
		if i == 0 || rcl < wallR {
			wallR = rcl
		}
		if bad, err := sameTree(src, filepath.Join(toO, "sessions")); err != nil || bad > 0 {
			return fmt.Errorf("restore direct to the server: %d files differ (%v)", bad, err)
		}
	}
	r.raw["restore_direct"] = map[string]any{"ompsync": wallO, "rclone": wallR}
	r.add(row{
		Figure:  "the same, direct to the server, not through the counting proxy (faster of 3 runs taking turns)",
		Target:  "< rclone copy",
		Ompsync: secs(wallO), Rclone: secs(wallR),
		Versus: fmt.Sprintf("rclone takes %s ompsync's time", times(wallO.Seconds(), wallR.Seconds())),
		Result: verdict(wallO < wallR),
	})
	if c.out == "" {
		return nil
	}

	// restore.Run in this program's image: with a CPU profile at the
	// default parallelism, then with more sessions in flight, then
	// fetching and verifying only (what-if).
	var walls []string
	for _, v := range []struct{ name, par string }{{"default", "0"}, {"parallel", "4"}, {"dry-run", "0"}} {
		to := filepath.Join(r.dir("restore", "out"), "profiled-"+v.name)
		args := []string{"restore-profile", "-parallel", v.par, "-to", to}
		switch v.name {
		case "default":
			args = append(args, "-cpuprofile", filepath.Join(c.out, "restore.cpu.pprof"))
		case "dry-run":
			args = append(args, "-dry-run")
		}
		m, err := r.measure(po, func() error { _, err := omp.RunProgram(ctx, os.Args[0], args...); return err })
		if err != nil {
			return err
		}
		if v.name != "dry-run" {
			if bad, err := sameTree(src, filepath.Join(to, "sessions")); err != nil || bad > 0 {
				return fmt.Errorf("restore.Run (%s): %d files differ (%v)", v.name, bad, err)
			}
		}
		r.raw["restore_"+v.name] = m
		walls = append(walls, fmt.Sprintf("%s (%s CPU)", secs(m.Wall), secs(m.CPU)))
	}
	r.add(row{
		Figure:  "the same through restore.Run in this program: transfers sessions at once (the default); 4 at once; --dry-run (fetch and verify, no writes)",
		Target:  "< rclone copy",
		Ompsync: strings.Join(walls, "; "), Rclone: secs(dR),
		Result: "what-if",
	})
	return nil
}

// timed is f's wall time, from a synced disk.
func timed(f func() error) (time.Duration, error) {
	syncDisk()
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// syncDisk writes everything written to the machine's file systems to
// disk (sync(2), which on Linux returns when it is written).
func syncDisk() { syscall.Sync() }

// sameTree counts the files under want that got differs on (missing or
// other bytes).
func sameTree(want, got string) (int, error) {
	bad := 0
	err := filepath.WalkDir(want, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		a, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(got, rel))
		if err != nil || !bytes.Equal(a, b) {
			bad++
		}
		return nil
	})
	return bad, err
}
