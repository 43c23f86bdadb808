//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"syscall"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/compact"
	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
)

// profileAgent is `ompsync-bench agent-profile`: the backup agent run in
// this process as `ompsync agent` runs it: the configuration loaded by the
// config package from the same OMPSYNC_* variables, the same agent.Options
// (as cmd/ompsync's agentOptions builds them), zstd without encryption,
// agent.New then Run. It writes a CPU profile over its whole run and a
// heap profile of what is live when it stops, and tells its readiness on
// NOTIFY_SOCKET like the real binary.
func profileAgent(args []string) error {
	fs := flag.NewFlagSet("agent-profile", flag.ContinueOnError)
	cpuOut := fs.String("cpuprofile", "", "write a CPU profile here, from SIGUSR1 until the agent stops")
	heapOut := fs.String("heapprofile", "", "write a heap profile here when stopped")
	once := fs.Bool("once", false, "one pass, as agent --once, profiled from its start")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The profile starts on SIGUSR1, so that it covers the steady state the
	// harness measures, not the start.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, r, err := openConfigured(ctx)
	if err != nil {
		return err
	}
	a, err := agent.New(r, agent.Options{
		AgentDir: cfg.AgentDir, StateDir: cfg.StateDir, Machine: cfg.Machine,
		Interval: cfg.Interval, ReconcileInterval: cfg.ReconcileInterval,
		Include: cfg.Include, Exclude: cfg.Exclude, Logger: cfg.LeveledLogger(os.Stderr, cfg.LogLevel()),
		Pull: cfg.Sync.Pull, PullInterval: cfg.Sync.PullInterval,
		PullInclude: cfg.Sync.Include, PullExclude: cfg.Sync.Exclude,
		Compaction: compact.Policy{Idle: cfg.Compaction.Idle, MaxChunks: cfg.Compaction.MaxChunks},
		Retention:  compact.Retention{Generations: cfg.Retention.Generations, Deleted: cfg.Retention.Deleted},
		Parallel:   cfg.Transfers,
		Ready:      func() { notifyReady(os.Getenv("NOTIFY_SOCKET")) },
	})
	if err != nil {
		return err
	}
	defer a.Close()
	started := make(chan *os.File, 1) // the profile's file, nil if none
	if *cpuOut != "" {
		go func() {
			select {
			case <-usr1:
			case <-ctx.Done():
				started <- nil
				return
			}
			f, err := os.Create(*cpuOut)
			if err == nil {
				if err = pprof.StartCPUProfile(f); err != nil {
					f.Close()
				}
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "cpu profile:", err)
				f = nil
			}
			started <- f
		}()
	}
	run := a.Run
	if *once {
		usr1 <- syscall.SIGUSR1 // the whole pass is profiled
		run = a.Once
	}
	runErr := run(ctx)
	if *cpuOut != "" {
		if f := <-started; f != nil {
			pprof.StopCPUProfile()
			f.Close()
		}
	}
	if *heapOut != "" {
		runtime.GC() // in-use figures of what is still live
		if err := writeHeapProfile(*heapOut); err != nil {
			return err
		}
	}
	return runErr
}

func writeHeapProfile(p string) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}

// openConfigured loads the configuration as ompsync does and opens its
// remote as a repository (zstd; the benchmark does not encrypt).
func openConfigured(ctx context.Context) (*config.Config, *repo.Repo, error) {
	cfg, err := config.Load(config.LoadOptions{})
	if err != nil {
		return nil, nil, err
	}
	if cfg.Encryption.Enabled() {
		return nil, nil, errors.New("the profiled agent does not encrypt; unset encryption.*")
	}
	client, err := backend.Open(ctx, cfg.Remote, backend.S3Options{
		Client: cfg.S3.Client, Endpoint: cfg.S3.Endpoint, Region: cfg.S3.Region, PathStyle: cfg.S3.PathStyle,
		AccessKeyID: cfg.S3.AccessKeyID, SecretAccessKey: cfg.S3.SecretAccessKey,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("open remote: %w", err)
	}
	return cfg, repo.New(client, repo.NewZstd()), nil
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
	memOut := fs.String("memprofile", "", "write a heap profile (what was allocated, and where) here at the end")
	to := fs.String("to", "", "agent dir to restore into")
	parallel := fs.Int("parallel", 0, "sessions restored at once (0: transfers, as ompsync restore)")
	dryRun := fs.Bool("dry-run", false, "fetch and verify only, write nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	cfg, r, err := openConfigured(ctx)
	if err != nil {
		return err
	}
	if *parallel == 0 {
		*parallel = cfg.Transfers
	}
	m, err := r.ReadMarker(ctx)
	if err == nil {
		err = r.CheckMarker(m)
	}
	if err != nil {
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
	if *memOut != "" {
		if err := writeHeapProfile(*memOut); err != nil {
			return err
		}
	}
	if len(rep.Problems) > 0 || slices.ContainsFunc(rep.Results, func(r restore.Result) bool { return !r.OK() }) {
		return fmt.Errorf("restore incomplete: %v", rep.Problems)
	}
	return nil
}
