package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/compact"
	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/notify"
	"github.com/ompsync/ompsync/progress"
	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
	"github.com/ompsync/ompsync/service"
)

const agentLong = `Run the backup agent: watch each coding agent's folder and upload what the
agent appends to its session files, seconds after it is written.

For omp it backs up <agent_dir>/sessions/<cwd-dir>/*.jsonl, each session's
artifact folder, <agent_dir>/blobs and <agent_dir>/archive/sessions; for pi
<pi.dir>/sessions; for Claude Code <claude.dir>/projects (transcripts and
their subagents); for Codex <codex.dir>/sessions and archived_sessions.
Never credentials, settings, databases, locks or temp files. Which agents:
the agents key, by default every one whose folder exists. Only complete
lines are uploaded. Rewrites, moves, archives and deletes are recorded;
nothing already uploaded is removed.

The agent runs until SIGINT or SIGTERM, then uploads what is settled and exits
0, or 130 when that last upload fails. SIGHUP reloads the configuration
(interval, log level). One agent per state_dir: a second one refuses to start.

A machine name belongs to one state dir at a time: an agent refuses a name
whose catalog another ompsync wrote in the last 30 minutes (a running agent
writes it at least every 10), or since this one last wrote it. Set machine to
a name of its own, or, for a reinstalled machine or an old disk gone, take the
name over with --take-over-machine; sessions this machine has not seen are
"not on this machine", never recorded as deleted. A state dir that describes
another remote (or a remote recreated since) is not trusted: every file is
checked against the remote and what it lacks is uploaded.

A session is recorded as deleted only when this state saw its file and then
saw it go. When at least 5 sessions, and more than half of them, vanish in
one pass, or the sessions folder itself (an unmounted disk, a wrong
agent_dir), nothing is recorded and the pass fails; 'agent --once
--confirm-deletions' records them when they were deleted on purpose. A file
or folder that cannot be read (permissions, I/O errors) keeps its backup as
it was and fails the pass.

With --pull (sync.pull) it also fetches, every --pull-interval, the sessions
other machines uploaded and merges them into <agent_dir> by restore's rule, so
a session can be resumed on any machine: a new one goes where this machine's
agent looks for its project (its checkout of the same git repository, found
under projects.roots; else the same folder under this home; else path_map;
see 'ompsync restore --help'). With --once --pull: one full pass, then one
pull, then a pass that backs up what the pull wrote; exit 1 if a session
could not be merged, or a machine's catalog could not be read (its sessions
are not pulled: a key that is not one of the repository's, say).`

const agentExample = `  # back up to the default local folder (~/.local/share/ompsync/remote)
  ompsync agent

  # one full pass for cron or scripts: exit 0 when everything is uploaded
  ompsync agent --once

  # the same, and bring in what other machines uploaded (a second machine)
  ompsync agent --once --pull

  # to S3, uploading at most every 5 seconds, with metrics
  ompsync --remote s3://my-bucket/omp agent --interval 5s --metrics-addr 127.0.0.1:9464`

// identityFlags are the agent's one-off decisions about identity: not
// configuration keys, since neither should stay on.
type identityFlags struct {
	takeOver, confirmDeletions bool
	// damaged: chunk keys verify --repair leaves to the agent's pass (not
	// a flag).
	damaged map[string]bool
}

func newAgentCmd(a *app) *cobra.Command {
	var once bool
	var idf identityFlags
	cmd := &cobra.Command{
		Use:     "agent",
		Short:   "Watch the session folder and upload what changes",
		Long:    agentLong,
		Example: agentExample,
		RunE:    func(cmd *cobra.Command, _ []string) error { return a.runAgent(cmd.Context(), once, idf) },
	}
	cmd.Flags().BoolVar(&once, "once", false, "make one full pass (scan, upload everything settled, record deletions) and exit; exit 1 if anything could not be uploaded")
	cmd.Flags().BoolVar(&idf.takeOver, "take-over-machine", false, "write this machine name's catalog though another ompsync (another state dir) wrote it: a reinstalled machine, an old disk gone; sessions not on this machine stay as they are")
	cmd.Flags().BoolVar(&idf.confirmDeletions, "confirm-deletions", false, "with --once: record as deleted the sessions that vanished, even most of them at once")
	config.AddFlags(cmd.Flags(), "interval", "reconcile_interval", "metrics.addr", "sync.pull", "sync.pull_interval")
	cmd.Flags().SetNormalizeFunc(pullFlagNames)
	return cmd
}

// pullFlagNames names the sync.* keys' flags --pull and --pull-interval,
// as the help and the README write them (and --help lists, and errors
// name); --sync-pull and --sync-pull-interval, the keys' own flag names,
// are accepted for them.
func pullFlagNames(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	switch name {
	case "sync-pull":
		name = "pull"
	case "sync-pull-interval":
		name = "pull-interval"
	}
	return pflag.NormalizedName(name)
}

// runAgent backs up: one pass with once, else until a signal stops it.
func (a *app) runAgent(ctx context.Context, once bool, idf identityFlags) error {
	cfg, err := a.config()
	if err != nil {
		return err
	}
	if err := a.checkSessionDir(cfg); err != nil {
		return err
	}
	if idf.confirmDeletions && !once {
		return usagef("--confirm-deletions goes with --once: it confirms the deletions of one pass")
	}
	if once {
		return runAgentOnce(ctx, a, cfg, idf)
	}
	return runAgentLoop(ctx, a, cfg, idf)
}

// checkSessionDir: omp and pi write their sessions to
// $PI_CODING_AGENT_SESSION_DIR when it is set; backing up their folders
// then would back up none of them.
func (a *app) checkSessionDir(cfg *config.Config) error {
	d, ok := a.env("PI_CODING_AGENT_SESSION_DIR")
	if !ok || d == "" {
		return nil
	}
	ws, err := cfg.BackedUp()
	if err != nil {
		return err
	}
	for _, w := range ws {
		name := w.Store.Name()
		if name != "omp" && name != "pi" || filepath.Clean(d) == filepath.Join(w.Dir, "sessions") {
			continue
		}
		key := config.FolderKey(name)
		return fmt.Errorf("PI_CODING_AGENT_SESSION_DIR is %s: %s writes its sessions there, not under %s (%s), so none would be backed up; set %s to the folder that holds that sessions folder, or unset the variable", d, name, key, w.Dir, key)
	}
	return nil
}

// agentRun is one run of the agent command: what its watched agents
// share. The loop's agents share a metrics registry (nil: none) and the
// readiness the service manager is told of too.
type agentRun struct {
	a     *app
	cfg   *config.Config
	idf   identityFlags
	out   *progress.Output
	log   *slog.Logger
	ws    []config.AgentFolder
	r     *repo.Repo
	reg   *prometheus.Registry
	ready sync.WaitGroup
}

// newAgentRun starts a run over the watched agents, logging at level.
func newAgentRun(a *app, cfg *config.Config, idf identityFlags, level slog.Leveler) (*agentRun, error) {
	out := a.output(false)
	ws, err := cfg.BackedUp()
	if err == nil {
		err = remoteApart(cfg, ws)
	}
	log := cfg.LeveledLogger(out, level)
	a.meters().log = log // a retry of the remote's is one debug line
	return &agentRun{a: a, cfg: cfg, idf: idf, out: out, log: log, ws: ws}, err
}

// several names watched agent w, in its lines, log, alerts and metrics,
// when there are several; "" when there is one.
func (run *agentRun) several(w config.AgentFolder) string {
	if len(run.ws) == 1 {
		return ""
	}
	return w.Store.Name()
}

// options are the agent's options for watched agent w, and that agent's
// repository: its folder, its state dir, its store and, with sync.pull,
// its merger.
func (run *agentRun) options(ctx context.Context, w config.AgentFolder) (agent.Options, *repo.Repo, error) {
	cfg, log := run.cfg, run.log
	ar, err := run.r.Agent(w.Store.Name())
	if err != nil {
		return agent.Options{}, nil, err
	}
	if name := run.several(w); name != "" {
		log = log.With("agent", name)
	}
	opts := agent.Options{
		AgentDir: w.Dir, StateDir: stateDirOf(cfg, w.Store.Name()), Machine: cfg.Machine, Remote: remoteName(cfg),
		Store: w.Store,
		// Another client found by its folder (agents unset) may never have
		// written a session; omp's folder, or one agents names, must hold them.
		Detected:        len(cfg.Agents) == 0 && w.Store.Name() != repo.DefaultAgent,
		TakeOverMachine: run.idf.takeOver, ConfirmDeletions: run.idf.confirmDeletions, Damaged: run.idf.damaged,
		Interval: cfg.Interval, ReconcileInterval: cfg.ReconcileInterval,
		Include: cfg.Include, Exclude: cfg.Exclude, Logger: log,
		Pull: cfg.Sync.Pull, PullInterval: cfg.Sync.PullInterval,
		PullInclude: cfg.Sync.Include, PullExclude: cfg.Sync.Exclude,
		Compaction:    compact.Policy{Idle: cfg.Compaction.Idle, MaxChunks: cfg.Compaction.MaxChunks},
		Retention:     cfg.Retention,
		ReadBackBytes: cfg.Verify.DailyRead.Bytes(),
		Parallel:      cfg.Transfers,
	}
	if opts.Pull {
		opts.Merger, err = newMerger(ctx, cfg, ar, w, log)
	}
	return opts, ar, err
}

func runAgentOnce(ctx context.Context, a *app, cfg *config.Config, idf identityFlags) error {
	run, err := newAgentRun(a, cfg, idf, a.logLevel(cfg))
	if err != nil {
		return err
	}
	if err := missingFolder(a.cmd.Flags(), run.ws); err != nil && !cfg.Sync.Pull {
		return err // a pull makes the folder it pulls into (agent.New)
	}
	if run.r, err = openRepo(ctx, cfg, a.meters()); err != nil {
		return err
	}
	logSameDisk(run.log, cfg, run.ws)
	var failed []string
	for _, w := range run.ws {
		passErr, err := run.oncePass(ctx, w)
		if err != nil {
			return err
		}
		if passErr != nil {
			if len(run.ws) == 1 {
				return fmt.Errorf("backup pass incomplete: %w", passErr)
			}
			failed = append(failed, fmt.Sprintf("%s: %v", w.Store.Name(), passErr))
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("backup pass incomplete: %s", strings.Join(failed, "; "))
	}
	return ctx.Err()
}

// oncePass runs one agent's pass and prints its totals: passErr is the
// pass's own failure, err one that stops every agent.
func (run *agentRun) oncePass(ctx context.Context, w config.AgentFolder) (passErr, err error) {
	opts, ar, err := run.options(ctx, w)
	if err != nil {
		return nil, err
	}
	bar := &liveBar{out: run.out, unit: "files"}
	opts.Progress = bar.passProgress
	ag, err := agent.New(ar, opts)
	if err != nil {
		bar.done()
		return nil, err
	}
	err = ag.Once(ctx)
	bar.done()
	ag.Close()
	if errors.Is(err, agent.ErrMachineInUse) {
		return nil, err // says it all: nothing was backed up
	}
	totals := ag.Totals()
	if err != nil {
		// What the pass did before it stopped, not what a finished one
		// found: "0 files checked" alone reads as nothing to do.
		totals = "incomplete: " + totals
	}
	fmt.Fprintln(run.a.report(), agentPrefix(w.Store.Name(), len(run.ws))+totals)
	return err, nil
}

// logSameDisk says, of a file remote on the disk of a watched folder, what
// such a copy keeps: a session deleted or damaged, not the sessions of a
// disk that fails or is lost. A user who left the default remote should
// know before trusting it with that. Nothing for any other remote.
func logSameDisk(log *slog.Logger, cfg *config.Config, ws []config.AgentFolder) {
	dir, ok := remoteFolder(cfg)
	if !ok {
		return
	}
	rdev, ok := deviceOf(dir)
	if !ok {
		return
	}
	for _, w := range ws {
		if dev, ok := deviceOf(w.Dir); ok && dev == rdev {
			log.Info(fmt.Sprintf("the remote folder %s is on the same disk (file system) as %s: it keeps sessions that are deleted or damaged, "+
				"not those of a disk that fails or is lost; for that, set remote to a folder on another disk, or to an S3 bucket", dir, w.Dir))
			return
		}
	}
}

// remoteApart refuses a file remote that is a watched folder, holds one
// (the home folder, named by mistake) or lies inside one: the backup
// would be written among the files it backs up.
func remoteApart(cfg *config.Config, ws []config.AgentFolder) error {
	dir, ok := remoteFolder(cfg)
	if !ok {
		return nil
	}
	for _, w := range ws {
		if within(dir, w.Dir) || within(w.Dir, dir) {
			return fmt.Errorf("the remote folder %s and %s's folder %s lie one inside the other: the backup would be written among the files it backs up; set remote (%s) to a folder of its own, outside %s",
				dir, w.Store.Name(), w.Dir, cfg.Source("remote"), w.Dir)
		}
	}
	return nil
}

// within reports whether path is dir or lies inside it, symlinks
// resolved where they can be.
func within(path, dir string) bool {
	_, ok := project.Under(project.RealPath(dir), project.RealPath(path))
	return ok
}

// missingFolder says of the first agent's folder that is not there how to
// set it; nil when all are there. It names a flag only if flags has it:
// most agents' folders have none.
func missingFolder(flags *pflag.FlagSet, ws []config.AgentFolder) error {
	i := slices.IndexFunc(ws, func(w config.AgentFolder) bool {
		_, err := os.Stat(w.Dir)
		return err != nil
	})
	if i < 0 {
		return nil
	}
	w, name := ws[i], ws[i].Store.Name()
	key := config.FolderKey(name)
	how := config.EnvVar(key) + ", the config file"
	if flags.Lookup(config.FlagName(key)) != nil {
		how = "--" + config.FlagName(key) + ", " + how
	}
	if name == repo.DefaultAgent {
		return fmt.Errorf("agent dir %s does not exist: set %s (%s) to omp's agent folder", w.Dir, key, how)
	}
	return fmt.Errorf("%s's folder %s does not exist: set %s (%s), or leave %s out of agents", name, w.Dir, key, how, name)
}

// agentPrefix names the agent in a line of its own when there are
// several.
func agentPrefix(name string, n int) string {
	if n == 1 {
		return ""
	}
	return name + ": "
}

// defaultMemoryLimit keeps a long-running agent small on a laptop: the
// live heap is a few MB per thousand sessions; the rest would be GC
// headroom. GOMEMLIMIT overrides it.
const defaultMemoryLimit = 40 << 20

// memoryLimits sets the GC's target (gcPercent; 0 leaves it) and the soft
// memory limit, unless GOGC and GOMEMLIMIT set them.
func (a *app) memoryLimits(gcPercent int, limit int64) {
	if _, ok := a.env("GOGC"); !ok && gcPercent > 0 {
		debug.SetGCPercent(gcPercent)
	}
	if _, ok := a.env("GOMEMLIMIT"); !ok {
		debug.SetMemoryLimit(limit)
	}
}

// logStarted logs each agent's start, and a remote on a watched disk.
func logStarted(log *slog.Logger, cfg *config.Config, ws []config.AgentFolder) {
	for _, w := range ws {
		log.Info("agent started", "agent", w.Store.Name(), "agent_dir", w.Dir, "remote", cfg.Remote, "machine", cfg.Machine, "interval", cfg.Interval)
	}
	logSameDisk(log, cfg, ws)
}

// runAgentLoop runs the agents until a signal stops them: metrics served,
// the service manager told when they are ready, SIGHUP reloading the
// configuration.
func runAgentLoop(ctx context.Context, a *app, cfg *config.Config, idf identityFlags) error {
	level := new(slog.LevelVar)
	level.Set(a.logLevel(cfg))
	a.memoryLimits(0, defaultMemoryLimit)
	run, err := newAgentRun(a, cfg, idf, level)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	run.log.Debug("agent starting", "pid", os.Getpid())
	// A stop signal during start-up is Run's to handle (it finishes
	// start-up and flushes), so opening, which makes at most a request or
	// two of its own, is not cut short by it.
	run.reg = metricsRegistry(cfg, a.meters()) // counts the retries of opening too
	if run.r, err = openRepo(context.WithoutCancel(ctx), cfg, a.meters()); err != nil {
		return err
	}
	bar := &liveBar{out: run.out, unit: "files"}
	defer bar.done() // the first pass, on a terminal (of the first agent)
	agents, err := run.newAgents(ctx, bar)
	for _, ag := range agents {
		defer ag.Close()
	}
	if err != nil {
		return err
	}
	closeMetrics, err := serveMetrics(cfg.Metrics.Addr, run.reg, run.log)
	if err != nil {
		return err
	}
	defer closeMetrics()
	go notifyReady(&run.ready, run.log)
	defer a.reloadOnSIGHUP(ctx, agents, run.log, level)()
	logStarted(run.log, cfg, run.ws)
	return stoppedEarly(ctx, runAll(ctx, agents, run.ws))
}

// watch gives watched agent w its notifier and its metrics.
func (run *agentRun) watch(ctx context.Context, opts *agent.Options, w config.AgentFolder) {
	cfg := run.cfg
	if nf := notify.New(notify.Options{URL: cfg.Notify.URL, Command: cfg.Notify.Command, Machine: cfg.Machine, Source: run.several(w),
		Grace: cfg.Notify.Grace, PingInterval: cfg.Notify.PingInterval, Logger: opts.Logger}); nf != nil {
		opts.Notifier = nf
		go nf.Run(ctx) // its own goroutine: a slow notifier never holds up the backup
	}
	if run.reg != nil {
		// Several agents' series are told apart by a label; one agent's
		// are as they always were.
		var rg prometheus.Registerer = run.reg
		if name := run.several(w); name != "" {
			rg = prometheus.WrapRegistererWith(prometheus.Labels{"agent": name}, run.reg)
		}
		opts.Metrics = agent.NewMetrics(rg)
	}
}

// newAgents makes an agent for each watched folder, the first drawing bar
// in its first pass. It returns those made so far with an error, for the
// caller to close.
func (run *agentRun) newAgents(ctx context.Context, bar *liveBar) ([]*agent.Agent, error) {
	var agents []*agent.Agent
	for i, w := range run.ws {
		opts, ar, err := run.options(ctx, w)
		if err != nil {
			return agents, err
		}
		if i == 0 {
			opts.Progress = bar.passProgress
		}
		// The first pass ends with the totals line agent --once ends with:
		// a new user sees that it ran, and what it found.
		var ag *agent.Agent
		prefix, report := agentPrefix(w.Store.Name(), len(run.ws)), run.a.report()
		run.ready.Add(1)
		opts.Ready = func() {
			if ctx.Err() == nil { // stopped: the stop's own line says what was done
				fmt.Fprintln(report, prefix+"first pass: "+ag.Totals())
			}
			run.ready.Done()
		}
		run.watch(ctx, &opts, w)
		if ag, err = agent.New(ar, opts); err != nil {
			return agents, err
		}
		agents = append(agents, ag)
	}
	return agents, nil
}

// reloadOnSIGHUP reloads the agents' settings on SIGHUP, telling the
// service manager, until ctx ends. The function returned stops it.
func (a *app) reloadOnSIGHUP(ctx context.Context, agents []*agent.Agent, log *slog.Logger, level *slog.LevelVar) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-ctx.Done():
				_ = service.NotifyStopping()
				return
			case <-hup:
				_ = service.NotifyReloading()
				a.reload(agents, log, level)
				_ = service.NotifyReady()
			}
		}
	}()
	return func() { signal.Stop(hup) }
}

// runAll runs the agents until ctx ends. One agent that stops (its machine
// name taken, say) stops the others: the process says what went wrong and
// exits, as with one.
func runAll(ctx context.Context, agents []*agent.Agent, ws []config.AgentFolder) error {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errs := make([]error, len(agents))
	var wg sync.WaitGroup
	for i, ag := range agents {
		wg.Go(func() {
			if errs[i] = ag.Run(runCtx); errs[i] != nil {
				errs[i] = fmt.Errorf("%s%w", agentPrefix(ws[i].Store.Name(), len(ws)), errs[i])
				cancel(errs[i])
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stoppedEarly: an agent stopped by a signal says itself what it left
// undone (its last upload failed), so that is the line, not the general
// "interrupted before the work was done".
func stoppedEarly(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	return &interruptedError{err.Error()}
}

// reload re-reads the configuration on SIGHUP and applies what can change
// without a restart.
func (a *app) reload(agents []*agent.Agent, log *slog.Logger, level *slog.LevelVar) {
	a.cfg, a.cfgErr = nil, nil
	cfg, err := a.config()
	if err != nil {
		log.Error("reload: configuration not applied", "err", err)
		return
	}
	for _, ag := range agents {
		ag.SetInterval(cfg.Interval)
	}
	// Said at the more verbose of the two levels, so it shows at least once.
	old, now := level.Level(), a.logLevel(cfg)
	if now < old {
		level.Set(now)
	}
	log.Info("configuration reloaded", "interval", cfg.Interval, "log_level", cfg.Log.Level)
	level.Set(now)
}

// metricsRegistry is the agent's metrics registry, counting m's retries;
// nil when metrics.addr is not set.
func metricsRegistry(cfg *config.Config, m *meter) *prometheus.Registry {
	if cfg.Metrics.Addr == "" {
		return nil
	}
	reg := prometheus.NewRegistry()
	retries := prometheus.NewCounter(prometheus.CounterOpts{Name: "ompsync_remote_retries_total", Help: "Remote requests tried again after a transient failure."})
	reg.MustRegister(retries)
	m.onRetry = retries.Inc
	return reg
}

// notifyReady tells the service manager the agent is ready once every
// agent's first pass is done.
func notifyReady(ready *sync.WaitGroup, log *slog.Logger) {
	ready.Wait()
	if err := service.NotifyReady(); err != nil {
		log.Warn("could not tell the service manager the agent is ready", "err", err)
	}
}

// serveMetrics serves reg on addr until the function returned is called;
// with reg nil, nothing.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (closeFn func(), err error) {
	if reg == nil {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", addr)
	return func() { srv.Close() }, nil
}

// restoreMerger lets the agent's pull use restore's merge rule. Its
// placer's index of checkouts is read again once older than
// project.CacheAge: an agent runs for weeks, and a checkout cloned
// meanwhile is where its project's sessions belong.
type restoreMerger struct {
	repo     *repo.Repo
	opts     restore.Options // each merge's, but for the request's own
	stateDir string
	roots    []string

	mu sync.Mutex
	pl *project.Placer
}

func (m *restoreMerger) placer(ctx context.Context) *project.Placer {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.pl.Index.Scanned) < project.CacheAge {
		return m.pl
	}
	pl := *m.pl // restores under way keep the placer they have
	pl.Index = project.LoadIndex(ctx, m.stateDir, m.roots, project.DefaultLimits())
	for _, p := range pl.Index.Problems {
		m.opts.Logger.Debug("pull: " + p) // said at WARN at start-up
	}
	m.pl = &pl
	return m.pl
}

// newMerger is the pull's merger for watched agent w: restore's merge, and
// its placement of sessions from other machines. Where the search for
// checkouts stopped short is said once, at WARN.
func newMerger(ctx context.Context, cfg *config.Config, ar *repo.Repo, w config.AgentFolder, log *slog.Logger) (*restoreMerger, error) {
	pl, problems, err := placer(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	for _, p := range problems {
		log.Warn("pull: " + p)
	}
	opts := restore.Options{AgentDir: w.Dir, Store: w.Store, Logger: log, HashWritten: true, MaxMergeSize: cfg.Restore.MaxMergeSize.Bytes()}
	return &restoreMerger{repo: ar, opts: opts, stateDir: cfg.StateDir, roots: cfg.Projects.Roots, pl: pl}, nil
}

func (m *restoreMerger) Merge(ctx context.Context, req agent.MergeRequest) (agent.Merged, error) {
	id := req.SessionID
	opts := m.opts
	opts.Machine, opts.Catalogs, opts.OpenFiles, opts.Local = req.Machine, req.Catalogs, req.OpenFiles, req.Local
	opts.Placer = m.placer(ctx)
	rep, err := restore.Run(ctx, m.repo, []string{id}, opts)
	if err != nil {
		return agent.Merged{}, err
	}
	if len(rep.Results) != 1 {
		return agent.Merged{}, fmt.Errorf("restore of %s gave %d results", id, len(rep.Results))
	}
	res := rep.Results[0]
	out := agent.Merged{Action: string(res.Action), Path: res.Path, Bytes: res.Bytes, Backup: res.Backup, Problem: res.Error, Missing: res.Missing,
		Cwd: res.Cwd, Placed: res.Placed, Notes: res.Notes}
	if a := res.Added; a != nil {
		out.Added = &agent.Added{Start: a.Start, End: a.End, SHA256: a.SHA256}
	}
	if len(res.Sources) == 1 {
		out.Source = &repo.ChunkSource{Machine: res.Sources[0].Machine, Generation: res.Sources[0].Generation}
	}
	return out, nil
}
