package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
)

// profileAgent is `ompsync-bench agent-profile`: the backup agent run in
// this process as `ompsync agent` runs it (agent.New, then Run, settings
// from the same OMPSYNC_* variables, zstd without encryption), with a CPU
// profile over its whole run and a heap profile of what is live when it
// stops. It tells its readiness on NOTIFY_SOCKET like the real binary.
func profileAgent(args []string) error {
	fs := flag.NewFlagSet("agent-profile", flag.ContinueOnError)
	cpuOut := fs.String("cpuprofile", "", "write a CPU profile here")
	heapOut := fs.String("heapprofile", "", "write a heap profile here when stopped")
	if err := fs.Parse(args); err != nil {
		return err
	}
	env := os.Getenv
	interval := 2 * time.Second
	if v := env("OMPSYNC_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("OMPSYNC_INTERVAL: %w", err)
		}
		interval = d
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client, err := backend.Open(ctx, env("OMPSYNC_REMOTE"), backend.S3Options{
		Endpoint: env("OMPSYNC_S3_ENDPOINT"), PathStyle: true,
		AccessKeyID: env("OMPSYNC_S3_ACCESS_KEY_ID"), SecretAccessKey: env("OMPSYNC_S3_SECRET_ACCESS_KEY"),
	})
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := agent.New(repo.New(client, repo.NewZstd()), agent.Options{
		AgentDir: env("OMPSYNC_AGENT_DIR"), StateDir: env("OMPSYNC_STATE_DIR"), Machine: env("OMPSYNC_MACHINE"),
		Interval: interval, Logger: log, Ready: func() { notifyReady(env("NOTIFY_SOCKET")) },
	})
	if err != nil {
		return err
	}
	defer a.Close()
	if *cpuOut != "" {
		f, err := os.Create(*cpuOut)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	runErr := a.Run(ctx)
	if *cpuOut != "" {
		pprof.StopCPUProfile()
	}
	if *heapOut != "" {
		runtime.GC() // in-use figures of what is still live
		f, err := os.Create(*heapOut)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			return err
		}
	}
	return runErr
}

// notifyReady sends READY=1 to a systemd-style notify socket.
func notifyReady(sock string) {
	if sock == "" {
		return
	}
	c, err := net.Dial("unixgram", sock)
	if err != nil {
		return
	}
	defer c.Close()
	_, _ = c.Write([]byte("READY=1"))
}

// profileRestore is `ompsync-bench restore-profile -to DIR`: what
// `ompsync restore --all --to DIR` does (restore.Run), in this process,
// with a CPU profile.
func profileRestore(args []string) error {
	fs := flag.NewFlagSet("restore-profile", flag.ContinueOnError)
	cpuOut := fs.String("cpuprofile", "", "write a CPU profile here")
	to := fs.String("to", "", "agent dir to restore into")
	parallel := fs.Int("parallel", 0, "sessions restored at once (0: restore's default)")
	dryRun := fs.Bool("dry-run", false, "fetch and verify only, write nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	env := os.Getenv
	ctx := context.Background()
	client, err := backend.Open(ctx, env("OMPSYNC_REMOTE"), backend.S3Options{
		Endpoint: env("OMPSYNC_S3_ENDPOINT"), PathStyle: true,
		AccessKeyID: env("OMPSYNC_S3_ACCESS_KEY_ID"), SecretAccessKey: env("OMPSYNC_S3_SECRET_ACCESS_KEY"),
	})
	if err != nil {
		return err
	}
	r := repo.New(client, repo.NewZstd())
	if err := r.Check(ctx); err != nil {
		return err
	}
	if *cpuOut != "" {
		f, err := os.Create(*cpuOut)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := restore.Run(ctx, r, nil, restore.Options{AgentDir: *to, All: true, Parallel: *parallel, DryRun: *dryRun})
	if err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("restore incomplete: %v", rep.Problems)
	}
	return nil
}
