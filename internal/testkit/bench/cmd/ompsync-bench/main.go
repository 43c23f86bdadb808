//go:build unix

// Command ompsync-bench measures ompsync against `rclone copy` and a
// whole-file re-uploader on a private versitygw, and prints one table.
//
// It runs the ompsync binary given by -ompsync as a user would (`agent`,
// `agent --once`, `ls`, `restore`), each peer through its own counting
// proxy, and reads the agent's CPU and memory from /proc. internal/testkit/bench/run.sh
// builds everything and runs it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/bench"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
)

type settings struct {
	ompsync, rclone, restic, corpus, work, out string
	phases, agentLog                           string
	seed                                       uint64

	roundSessions, roundActive, rounds int

	liveSessions int
	liveFor      time.Duration
	liveGap      time.Duration
	interval     time.Duration
	profileFor   time.Duration

	idleFiles int
	idleFor   time.Duration
	busyFor   time.Duration

	restoreSessions, restoreMB int

	lineRTT              time.Duration
	lineUp, lineDown     float64 // Mbit/s
	lineSessions, lineMB int
	lineForks            float64
	lineActive, lineRuns int
	lineLiveFor          time.Duration
	lineSweep            string
}

func main() {
	if len(os.Args) > 1 {
		sub := map[string]func([]string) error{"agent-profile": profileAgent, "restore-profile": profileRestore}
		if f, ok := sub[os.Args[1]]; ok {
			if err := f(os.Args[2:]); err != nil {
				fmt.Fprintf(os.Stderr, "ompsync-bench %s: %v\n", os.Args[1], err)
				os.Exit(1)
			}
			return
		}
	}
	var c settings
	flag.StringVar(&c.ompsync, "ompsync", "", "the ompsync binary to measure (required)")
	flag.StringVar(&c.rclone, "rclone", "rclone", "the rclone binary")
	flag.StringVar(&c.restic, "restic", "restic", "the restic binary (line phase)")
	flag.StringVar(&c.corpus, "corpus", "testdata/corpus", "folder of real session files the workload is drawn from")
	flag.StringVar(&c.work, "work", "", "scratch folder (default: a new temp folder, removed at the end)")
	flag.StringVar(&c.out, "out", "", "folder for results.json and the agent's CPU and heap profiles (optional)")
	flag.StringVar(&c.agentLog, "agent-log-level", "warn", "log level of the agents run; their logs go to -out as agent-*.log")
	flag.StringVar(&c.phases, "phases", "rounds,live,idle,restore,line", "phases to run, comma-separated")
	flag.Uint64Var(&c.seed, "seed", 7, "workload seed")
	flag.IntVar(&c.roundSessions, "round-sessions", 100, "rounds: sessions in the folder")
	flag.IntVar(&c.roundActive, "round-active", 20, "rounds: sessions appended to per round")
	flag.IntVar(&c.rounds, "rounds", 10, "rounds: rounds of appends (one minute of omp activity each)")
	flag.IntVar(&c.liveSessions, "live-sessions", 100, "live: active sessions")
	flag.DurationVar(&c.liveFor, "live-for", 60*time.Second, "live: how long the sessions grow")
	flag.DurationVar(&c.liveGap, "live-gap", 5*time.Second, "live: mean time between two entries of one session")
	flag.DurationVar(&c.interval, "interval", 2*time.Second, "live: the agent's upload interval")
	flag.DurationVar(&c.profileFor, "profile-for", 15*time.Second, "live, busy: how long the in-process agent is profiled while sessions grow (needs -out; 0: no profiles)")
	flag.IntVar(&c.idleFiles, "idle-files", 10000, "idle: session files")
	flag.DurationVar(&c.idleFor, "idle-for", 62*time.Second, "idle: how long CPU is measured (covers one 60s reconcile scan)")
	flag.DurationVar(&c.busyFor, "busy-for", 20*time.Second, "idle: then how long live-sessions grow among the idle files (0: skip)")
	flag.IntVar(&c.restoreSessions, "restore-sessions", 1000, "restore: sessions")
	flag.IntVar(&c.restoreMB, "restore-mb", 500, "restore: total size in MB")
	flag.DurationVar(&c.lineRTT, "line-rtt", bench.DefaultLine.RTT, "line: round trip time of the shaped line")
	flag.Float64Var(&c.lineUp, "line-up", bench.DefaultLine.Up/1e6, "line: upload rate in Mbit/s, shared by every connection")
	flag.Float64Var(&c.lineDown, "line-down", bench.DefaultLine.Down/1e6, "line: download rate in Mbit/s, shared by every connection")
	flag.IntVar(&c.lineSessions, "line-sessions", 300, "line: sessions in the tree")
	flag.IntVar(&c.lineMB, "line-mb", 80, "line: total size of the tree in MB")
	flag.Float64Var(&c.lineForks, "line-forks", 0.1, "line: share of the sessions that are forks of another")
	flag.IntVar(&c.lineActive, "line-active", 40, "line: sessions appended to before the pass")
	flag.IntVar(&c.lineRuns, "line-runs", 3, "line: runs (fresh buckets and tree each); figures are their median")
	flag.DurationVar(&c.lineLiveFor, "line-live-for", 30*time.Second, "line: how long sessions grow under the running agent (0: skip)")
	flag.StringVar(&c.lineSweep, "line-sweep", "", "line: also back up and restore the tree with each of these transfers (comma-separated, e.g. 4,8,16,32,64)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, log); err != nil {
		fmt.Fprintln(os.Stderr, "ompsync-bench:", err)
		os.Exit(1)
	}
}

// runner holds what every phase shares.
type runner struct {
	cfg    settings
	log    *slog.Logger
	corpus *bench.Corpus
	srv    *bench.Server
	work   string
	table  []row
	raw    map[string]any
}

func run(ctx context.Context, c settings, log *slog.Logger) error {
	if c.ompsync == "" {
		return errors.New("-ompsync is required (build it with: go build -o /tmp/ompsync ./cmd/ompsync)")
	}
	bin, err := filepath.Abs(c.ompsync)
	if err != nil {
		return err
	}
	c.ompsync = bin
	if c.rclone, err = exec.LookPath(c.rclone); err != nil {
		return fmt.Errorf("rclone: %w (install the Debian package rclone)", err)
	}
	if strings.Contains(c.phases, "line") {
		if c.restic, err = exec.LookPath(c.restic); err != nil {
			return fmt.Errorf("restic: %w (install the Debian package restic)", err)
		}
	}
	if c.out != "" {
		if err := os.MkdirAll(c.out, 0o755); err != nil {
			return err
		}
	}
	corpus, err := bench.LoadCorpus(c.corpus)
	if err != nil {
		return err
	}
	work := c.work
	if work == "" {
		if work, err = os.MkdirTemp("", "ompsync-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	srv, err := bench.StartServer(filepath.Join(work, "server"))
	if err != nil {
		return err
	}
	defer srv.Close()
	log.Info("versitygw started", "endpoint", srv.Endpoint, "corpus_lines", corpus.Lines())

	r := &runner{cfg: c, log: log, corpus: corpus, srv: srv, work: work, raw: map[string]any{}}
	r.raw["machine"] = machineInfo()
	r.raw["started"] = time.Now().UTC().Format(time.RFC3339)
	r.raw["load_at_start"] = loadAvg()
	phases := map[string]func(context.Context) error{
		"rounds":  r.rounds,
		"live":    r.live,
		"idle":    r.idle,
		"restore": r.restore,
		"line":    r.line,
	}
	var failed error
	for _, p := range strings.Split(c.phases, ",") {
		f, ok := phases[strings.TrimSpace(p)]
		if !ok {
			return fmt.Errorf("unknown phase %q", p)
		}
		start := time.Now()
		log.Info("phase start", "phase", p)
		if err := f(ctx); err != nil {
			failed = fmt.Errorf("phase %s: %w", p, err)
			break // the figures measured so far are still printed
		}
		log.Info("phase done", "phase", p, "took", time.Since(start).Round(time.Second))
	}
	r.raw["load_at_end"] = loadAvg()
	fmt.Printf("\n%s; load average %s at the start, %s at the end\n", machineInfo(), r.raw["load_at_start"], r.raw["load_at_end"])
	printTable(os.Stdout, r.table)
	if c.out != "" {
		r.raw["table"] = r.table
		b, _ := json.MarshalIndent(r.raw, "", "  ")
		if err := os.WriteFile(filepath.Join(c.out, "results.json"), b, 0o644); err != nil {
			return err
		}
	}
	return failed
}

// dir makes a folder for one phase.
func (r *runner) dir(parts ...string) string {
	p := filepath.Join(append([]string{r.work}, parts...)...)
	if err := os.MkdirAll(p, 0o700); err != nil {
		panic(err)
	}
	return p
}

// peer is one uploader with its own bucket and counting proxy, and in
// the line phase a shaped line in front of the proxy.
type peer struct {
	bucket string
	proxy  *bench.Proxy
	line   *bench.Line
}

// endpoint is where the peer's clients connect: the line, else the proxy.
func (p *peer) endpoint() string {
	if p.line != nil {
		return p.line.URL
	}
	return p.proxy.URL
}

func (p *peer) close() {
	if p.line != nil {
		p.line.Close()
	}
	p.proxy.Close()
}

func (r *runner) newPeer(ctx context.Context, bucket string) (*peer, error) {
	if err := r.srv.CreateBucket(ctx, bucket); err != nil {
		return nil, err
	}
	p, err := bench.StartProxy(r.srv.Endpoint)
	if err != nil {
		return nil, err
	}
	return &peer{bucket: bucket, proxy: p}, nil
}

func (r *runner) ompsync(p *peer, agentDir, phase string) *bench.Ompsync {
	o := bench.NewOmpsync(r.cfg.ompsync, p.endpoint(), r.srv.AccessKey, r.srv.SecretKey, p.bucket,
		agentDir, r.dir(phase, "state"), r.dir(phase, "home"))
	o.LogLevel = r.cfg.agentLog
	if r.cfg.out != "" {
		o.LogDir = r.cfg.out
	}
	return o
}

func (r *runner) rcloneFor(p *peer, phase string) (*bench.Rclone, error) {
	return bench.NewRclone(r.cfg.rclone, p.endpoint(), r.srv.AccessKey, r.srv.SecretKey, r.dir(phase, "rclone"))
}

func (r *runner) s3Client(ctx context.Context, p *peer) (remote.Client, error) {
	return backend.OpenRaw(ctx, "s3://"+p.bucket, backend.S3Options{
		Endpoint: p.endpoint(), PathStyle: true, AccessKeyID: r.srv.AccessKey, SecretAccessKey: r.srv.SecretKey,
	})
}

// cost is what one step took.
type cost struct {
	Wall time.Duration
	// CPU is the user + system time of the processes the step ran and
	// waited for (0 for work done in this process); Server that of
	// versitygw meanwhile.
	CPU, Server time.Duration
	// Harness is this program's own CPU meanwhile: the proxies and, in the
	// line phase, the shaped line, which share the machine with the peer.
	Harness time.Duration
	Counts  bench.Counts
}

// measure runs f and returns its wall time, CPU time and what it sent
// through p.
func (r *runner) measure(p *peer, f func() error) (cost, error) {
	before := p.proxy.Counts()
	cpu0, self0 := childrenCPU(), selfCPU()
	srv0, _ := bench.ProcCPU(r.srv.Pid())
	start := time.Now()
	err := f()
	c := cost{Wall: time.Since(start), CPU: childrenCPU() - cpu0, Harness: selfCPU() - self0, Counts: p.proxy.Counts().Sub(before)}
	srv1, _ := bench.ProcCPU(r.srv.Pid())
	c.Server = srv1 - srv0
	return c, err
}

// selfCPU is the CPU time of this process so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childrenCPU is the CPU time of every child process waited for so far.
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func machineInfo() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if strings.HasPrefix(line, "MemTotal:") {
				var kb int64
				fmt.Sscanf(strings.TrimPrefix(line, "MemTotal:"), "%d", &kb)
				mem = fmt.Sprintf(", %.1f GiB RAM", float64(kb)/(1<<20))
			}
		}
	}
	return fmt.Sprintf("machine: %d CPUs (%s)%s, %s", numCPU(), cpu, mem, time.Now().UTC().Format("2006-01-02"))
}

// loadAvg is the 1, 5 and 15 minute load averages: other work on the
// machine shows up in every timing.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// waitQuiet waits until nothing went through p for quiet (the agent's
// work after READY, such as its retention pass, is done), at most limit.
// It returns when the last request was seen.
func waitQuiet(ctx context.Context, p *peer, quiet, limit time.Duration) (time.Time, error) {
	last, lastAt := p.proxy.Counts().Requests(), time.Now()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return lastAt, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if n := p.proxy.Counts().Requests(); n != last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) >= quiet {
			return lastAt, nil
		}
	}
	return lastAt, fmt.Errorf("the agent still made requests %s after it was ready", limit)
}
