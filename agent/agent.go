// Package agent is the watcher that backs up omp's session folder: it notices
// changes (fsnotify plus a reconcile scan), works out what each file gained
// since the last upload, and ships only that to the remote.
//
// Data flows one way: disk -> tracker (syncFile: what changed) -> uploader
// (uploadRange: chunks, heads, metadata) -> remote. The state file in
// state_dir is a cache of what was uploaded; the remote is the truth.
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/ompsync/ompsync/atomicfile"
	"github.com/ompsync/ompsync/compact"
	"github.com/ompsync/ompsync/notify"
	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/safename"
	"github.com/ompsync/ompsync/store"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
)

// Options configure an Agent. Zero values take the defaults noted.
type Options struct {
	AgentDir string // the store's folder, omp's agent dir (required)
	// Store is the agent whose sessions AgentDir holds. Default omp.
	Store    *store.Store
	StateDir string // where the agent keeps its state (required)
	Machine  string // this machine's name on the remote (required)
	// Interval batches uploads: an active file is uploaded at most once
	// per interval. Default 2s.
	Interval time.Duration
	// ReconcileInterval is how often a full scan catches events that were
	// missed. Default 60s.
	ReconcileInterval time.Duration
	// AuditInterval is how often each file's whole uploaded prefix is
	// re-hashed, and checked to be still on the remote (Once checks it
	// all). Default 24h.
	AuditInterval time.Duration
	// Damaged are keys of this machine's chunks that verify --repair found
	// damaged and could not prove from a later chunk: Once's check of the
	// uploads takes them as lost, so it puts them again from the local
	// file when the file still hashes to what was uploaded.
	Damaged map[string]bool
	// Include and Exclude are globs over paths relative to AgentDir.
	Include, Exclude []string
	// Pull makes Run also merge what other machines uploaded, every
	// PullInterval (default 30s), for sessions matching PullInclude and not
	// PullExclude (globs over the session's path or cwd).
	Pull                     bool
	PullInterval             time.Duration
	PullInclude, PullExclude []string
	// Merger merges pulled sessions (required with Pull).
	Merger Merger
	// ReadBackBytes is about how much of what this machine uploaded Run
	// reads back from the remote each day, every hash checked (0: none).
	ReadBackBytes int64
	// Compaction says when Run compacts this machine's streams; Retention
	// what it prunes once a day (zero: keep everything).
	Compaction compact.Policy
	Retention  compact.Retention
	// ChunkSize bounds one chunk of a backlog. Default 4 MiB.
	ChunkSize int64
	// Parallel bounds concurrent uploads, confirmations and pulls. Default
	// 16, the config's transfers.
	Parallel int
	// FlushTimeout bounds the last upload after a stop signal. Default 20s.
	FlushTimeout time.Duration
	Logger       *slog.Logger
	Metrics      *Metrics // nil: none
	// Remote names the remote in the state and in messages (never with
	// credentials); the repository's id is what the state is checked by.
	Remote string
	// TakeOverMachine lets this agent write a machine name whose catalog
	// another ompsync wrote (a reinstalled machine, an old disk gone).
	TakeOverMachine bool
	// ConfirmDeletions records the deletions of a pass even when most
	// sessions vanished at once (see recordMissing).
	ConfirmDeletions bool
	// Detected: the store was picked because its folder exists, not named
	// by the user. Its sessions folder missing is then a client not used
	// yet (Claude Code's settings, no session), not a wrong folder: said,
	// but Once does not fail for it.
	Detected bool
	// Home is this machine's home folder, which the catalog records each
	// session's folder relative to. Default: os.UserHomeDir.
	Home string
	// Hostname and HostID describe this host in the catalog. Defaults:
	// os.Hostname, and a hash of the machine-id.
	Hostname, HostID string
	// Progress, if set, is told how the first full pass goes (Once's, or
	// Run's at start): once it knows its files, and after each.
	Progress func(PassProgress)
	// Ready, if set, is called once the agent watches and has made its
	// first pass (systemd readiness).
	Ready func()
	// Notifier, if set, is told the backup's health after every pass
	// and every tick that waits for the remote (package notify).
	Notifier Notifier
	// Now is the clock (tests).
	Now func() time.Time
}

// Notifier is told how the backup is; it must not block.
type Notifier interface {
	Observe(now time.Time, h notify.Health)
}

func (o *Options) setDefaults() {
	orDefault(&o.Interval, 2*time.Second)
	orDefault(&o.ReconcileInterval, 60*time.Second)
	orDefault(&o.Compaction.Idle, compact.DefaultIdle)
	orDefault(&o.Compaction.MaxChunks, compact.DefaultMaxChunks)
	orDefault(&o.PullInterval, 30*time.Second)
	orDefault(&o.AuditInterval, 24*time.Hour)
	orDefault(&o.ChunkSize, 4<<20)
	orDefault(&o.Parallel, 16)
	orDefault(&o.FlushTimeout, 20*time.Second)
	if o.Home == "" {
		o.Home, _ = os.UserHomeDir()
	}
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	o.Store = cmp.Or(o.Store, store.OMP())
	if o.Hostname == "" {
		o.Hostname, _ = os.Hostname()
	}
	if o.HostID == "" {
		o.HostID = hostID()
	}
}

// orDefault sets *v to def when it is not positive (unset).
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// made is *m, made first when it is nil: a map made on first use, or
// loaded from a file that had none.
func made[M ~map[K]V, K comparable, V any](m *M) M {
	if *m == nil {
		*m = M{}
	}
	return *m
}

// Agent backs up one agent dir to one remote.
type Agent struct {
	opts    Options
	repo    *repo.Repo
	log     *slog.Logger
	metrics *Metrics
	lock    *os.File

	state *State
	// byPath is rel path -> stream key, for a stream at its current path
	// while present. Whatever moves a stream off a path deletes that
	// entry (scan.go, pass.go): plan's check of the stream's own path
	// cannot tell a stale entry once the stream moves back there, and would
	// file a new session at that path as it.
	byPath map[string]string
	// catBase is what the catalog last written whole lists, written at
	// catBaseAt; catRecent the recent object last written over it. A nil
	// catBase makes the next put rewrite the catalog whole.
	catBase      *repo.CatalogIndex
	catBaseAt    time.Time
	catBaseBytes int                  // its encoded size
	catBlobs     map[string]time.Time // the blobs it lists, with their mtimes
	catRecent    []byte
	catRecentAt  time.Time // catRecent's stamp
	// catBaseRead is the stamp of the catalog last read back from the
	// remote (confirmCatalog): equal to catBaseAt, it needs no reading.
	catBaseRead time.Time
	// catalogStale: the state changed since the catalog was last checked.
	catalogStale bool
	// batchCatalog: Run's loop is running, so a catalog put may wait
	// (catalogDeferred); off for the first pass, a flush and Once.
	batchCatalog bool
	// catConfirmedAt is when the remote was last seen to hold the catalog;
	// zero after a put, so the next reconcile checks it.
	catConfirmedAt time.Time
	// listed is the current pass's listing of the sessions whose streams
	// it checks before their first upload, when they are many; read-only
	// while the pass's jobs run.
	listed listing
	// blobsToConfirm counts blobs uploaded since the blobs were last listed.
	blobsToConfirm atomic.Int64
	// cataloged are the sessions this machine's remote catalog lists.
	cataloged map[string]bool
	// catWrittenAt is when this agent last put the catalog or its recent
	// object (the heartbeat), ownerCheckedAt when it last read who did.
	catWrittenAt, ownerCheckedAt time.Time
	// problems are the paths that could not be read, reported once and
	// then now and then.
	problems problems
	refused  refusal // uploads the repository's encryption refuses
	// noDelete: the remote refused this machine's key a delete, so
	// maintain leaves compaction and retention to another machine.
	noDelete bool
	// upToDate is when the agent was last up to date (markUpToDate).
	upToDate time.Time
	// watchGaps: a folder could not be watched, so a change in it shows
	// only at a full scan, and a pass that had no event to follow is not
	// up to date; set when the first such folder is said.
	watchGaps atomic.Bool
	// replanned: a pass's planning changed a stream's path or state (a
	// move, a restored file), which is saved even with nothing uploaded.
	replanned atomic.Bool
	// unwatched are the folders that could not be watched, polled every
	// interval instead (under mu).
	unwatched map[string]bool
	// gapsPolled: Run polled the unwatched folders before this pass, so
	// it missed no change for want of an event.
	gapsPolled bool
	// addWatch, when set (tests), replaces the watcher's Add.
	addWatch func(dir string) error
	// unchecked is what the remote's listing failed to let full passes
	// check (confirmUploads).
	unchecked unchecked
	// confirmAll makes the next confirmUploads check everything uploaded,
	// not only what is new or due (Once: a one-shot run is asked whether
	// the remote holds the backup now, not as of the last daily check).
	confirmAll bool
	// sessionsGone: the last full scan found no sessions folder; fsw is
	// the running agent's watcher, to watch the folder again when it is back.
	sessionsGone bool
	fsw          *fsnotify.Watcher
	// scanFound is how many files the last full scan found to back up.
	scanFound int
	// vanishLogged is when a vanished tree was last logged at ERROR.
	vanishLogged time.Time
	tally        tally // for Totals
	fresh        bool  // started without a local state
	progressed   bool  // the first full pass was reported (Options.Progress)
	// pullWaiting are the sessions whose pull waits for a process to
	// release the file (said once at INFO).
	pullWaiting saidOnce
	// pullRefused are the catalog problems pull has warned of: said once,
	// not every pull interval for as long as the remote holds them.
	pullRefused saidOnce
	// pullIncomplete are the sessions a pull merged without all of their
	// blobs or artifacts: warned of once.
	pullIncomplete saidOnce
	// projects are the projects of the folders sessions ran in, found
	// once per folder (a few stats and a small read each).
	projects map[string]project.ID
	// placeNoted: the placement notes said (once per project).
	placeNoted saidOnce

	interval atomic.Int64  // time.Duration, changeable by SetInterval
	reload   chan struct{} // wakes Run to apply a new interval
	fullScan atomic.Bool   // a missed or removal event asks for a scan

	mu    sync.Mutex
	dirty map[string]bool // rel paths the watcher saw change
	// linksSaid are the symlinks the scan said it does not follow.
	linksSaid saidOnce

	outage outage
	// failSince is when passes began to fail (zero while they succeed:
	// the last pass did not fail), failMsg the first failure's error.
	// Run's goroutine only. Before the first pass only an outage is
	// observed, which says the backup is not good.
	failSince time.Time
	failMsg   string

	// beforeRead, when set (tests), runs just before a chunk's bytes are
	// read, after the stat and the checks: where a file can change under
	// the agent.
	beforeRead func(rel string)
}

// PassProgress is how far a pass has come: files looked at, and the bytes
// they held past what was uploaded.
type PassProgress struct {
	Files, FilesTotal int
	Bytes, BytesTotal int64
}

// ErrLocked means another agent holds the state dir.
var ErrLocked = errors.New("another ompsync agent is running")

// New opens the state dir (taking its lock) and loads the state. A damaged
// state file is set aside and rebuilt from the remote.
func New(r *repo.Repo, opts Options) (*Agent, error) {
	opts.setDefaults()
	opts.Metrics.mu.Lock()
	opts.Metrics.now = opts.Now // the gauges' age on the agent's clock (tests)
	opts.Metrics.mu.Unlock()
	if opts.AgentDir == "" || opts.StateDir == "" || opts.Machine == "" {
		return nil, errors.New("agent: agent dir, state dir and machine are required")
	}
	if opts.Pull && opts.Merger == nil {
		return nil, errors.New("agent: pull needs a merger")
	}
	if !safename.Machine(opts.Machine) {
		return nil, fmt.Errorf("machine name %q is not a safe path segment (use letters, digits, '.', '_' and '-')", opts.Machine)
	}
	var err error
	if opts.AgentDir, err = filepath.Abs(opts.AgentDir); err != nil {
		return nil, err
	}
	sessions := filepath.Join(opts.AgentDir, opts.Store.Roots()[0])
	if _, err := os.Stat(sessions); opts.Pull && isNotExist(err) {
		// A new machine that pulls has no sessions folder yet: what the
		// others uploaded goes into it now, not once the agent makes it.
		if err := os.MkdirAll(sessions, 0o700); err != nil {
			return nil, fmt.Errorf("make the folder pulled sessions go to: %w", err)
		}
		opts.Logger.Info("made the agent dir, to pull the other machines' sessions into it", "agent_dir", opts.AgentDir)
	}
	if opts.StateDir, err = filepath.Abs(opts.StateDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	if fi, err := os.Stat(opts.StateDir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		// The state names every session file and its hashes.
		opts.Logger.Warn("the state dir can be read by other users; run chmod 700 on it", "state_dir", opts.StateDir, "mode", fi.Mode().Perm().String())
	}
	lock, err := lockDir(opts.StateDir)
	if err != nil {
		return nil, err
	}
	// A state write cut by a SIGKILL leaves its temp file behind.
	removed, err := atomicfile.SweepStale(opts.StateDir, time.Now())
	for _, p := range removed {
		opts.Logger.Info("removed a temp file an interrupted run left", "path", p)
	}
	if err != nil {
		opts.Logger.Warn("cannot remove a temp file an interrupted run left", "err", err)
	}
	a := &Agent{
		opts: opts, repo: r, log: opts.Logger, metrics: opts.Metrics, lock: lock,
		byPath: map[string]string{}, dirty: map[string]bool{}, reload: make(chan struct{}, 1), cataloged: map[string]bool{}, projects: map[string]project.ID{},
	}
	a.interval.Store(int64(opts.Interval))
	a.outage.remote = cmp.Or(opts.Remote, "the remote")
	// An earlier run's refusal stays recorded until a pass uploads; what
	// its pull left out, until a pull reads it (none without --pull).
	a.refused.file, a.refused.msg = filepath.Join(opts.StateDir, refusedName), Refused(opts.StateDir)
	if !opts.Pull {
		writeNote(filepath.Join(opts.StateDir, unpulledName), "")
	}
	st, err := LoadState(opts.StateDir)
	switch {
	case err != nil:
		a.log.Warn("local state is damaged: setting it aside and rebuilding it from the remote", "err", err)
		aside := filepath.Join(opts.StateDir, stateFile+".damaged")
		if rerr := os.Rename(filepath.Join(opts.StateDir, stateFile), aside); rerr != nil {
			// Left in place, it is read, found damaged and rebuilt at every
			// start: a full check against the remote each time.
			a.log.Warn("cannot set the damaged state aside; it is rebuilt at every start until it is moved",
				"err", rerr, "fix", "remove or move "+filepath.Join(opts.StateDir, stateFile)+" by hand, and check the state dir's permissions")
		}
	case st == nil:
		a.fresh = true // said by start, which knows whether the remote has this machine
		a.log.Debug("no local state", "state_dir", opts.StateDir)
	case st.Machine != opts.Machine:
		a.log.Warn("local state belongs to another machine name: rebuilding it from the remote", "state_machine", st.Machine, "machine", opts.Machine)
		st = nil
	}
	if st == nil {
		st = newState(opts.Machine)
		st.changed.all = true
	}
	if st.Instance == "" {
		st.Instance = repo.NewID()
		st.changed.all = true
	}
	a.state = st
	for k, f := range st.Streams {
		if f.State != repo.StatePresent {
			continue
		}
		a.byPath[f.Path] = k
	}
	return a, nil
}

// Close releases the state dir.
func (a *Agent) Close() error {
	if a.lock == nil {
		return nil
	}
	err := a.lock.Close()
	a.lock = nil
	return err
}

// SetInterval changes the upload interval of a running agent (SIGHUP).
func (a *Agent) SetInterval(d time.Duration) {
	if d > 0 {
		a.interval.Store(int64(d))
		select {
		case a.reload <- struct{}{}:
		default:
		}
	}
}

func (a *Agent) abs(rel string) string {
	return filepath.Join(a.opts.AgentDir, filepath.FromSlash(rel))
}

func (a *Agent) now() time.Time { return a.opts.Now() }

// Once makes one full pass: scan everything, upload everything settled,
// record deletions. It fails if anything could not be uploaded.
func (a *Agent) Once(ctx context.Context) error {
	if _, err := os.Stat(a.opts.AgentDir); err != nil {
		return fmt.Errorf("agent dir %s: %w", a.opts.AgentDir, err)
	}
	if err := checkLayout(a.opts.AgentDir, a.opts.Store); err != nil {
		return err
	}
	a.outage.once = true
	if a.fresh && !a.opts.Detected && !a.opts.ConfirmDeletions {
		// Nothing here and nothing known from before (a wrong agent_dir,
		// say): said before the remote is touched, which would get a
		// marker and a catalog of this machine for nothing.
		// A scan only when the sessions folder is missing: a first run
		// with one scans once, in its pass.
		if _, err := os.Stat(a.abs(a.opts.Store.Roots()[0])); isNotExist(err) {
			if sc, err := a.scan(); err == nil && sc.sessionsGone && len(sc.rels) == 0 && len(sc.unreadable) == 0 {
				return a.noSessionsFolder()
			}
		}
	}
	if err := a.start(ctx); err != nil {
		return err
	}
	a.confirmAll = true
	err := a.pass(ctx, true)
	// What the first pass found lost on the remote (confirmUploads) is
	// marked for upload; a few more passes put it up before exiting.
	for i := 0; i < 3 && err == nil && ctx.Err() == nil && a.hasWork(); i++ {
		err = a.pass(ctx, a.fullScan.Swap(false))
	}
	if err == nil && a.opts.Pull && ctx.Err() == nil {
		// One pull, and a pass that backs up what it wrote (a session
		// placed for this machine's folders is this machine's bytes),
		// also when the pull left some out.
		err = cmp.Or(a.pull(ctx), a.pass(ctx, true))
	}
	if err == nil {
		err = a.unchecked.err()
	}
	if err == nil && a.sessionsGone && a.scanFound == 0 && !a.opts.ConfirmDeletions {
		// Nothing known vanished (that is ErrVanished), but nothing is
		// there either: a wrong agent_dir or a disk not mounted, as well
		// as an agent that never wrote a session. Not "all uploaded".
		if !a.opts.Detected {
			return a.noSessionsFolder()
		}
		a.log.Info("no sessions folder: nothing of "+a.opts.Store.Name()+" to back up yet", "folder", a.abs(a.opts.Store.Roots()[0]))
	}
	return err
}

// hasWork reports whether paths wait for a pass.
func (a *Agent) hasWork() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.dirty) > 0 || a.fullScan.Load()
}

// start checks the repository and loads this machine's catalog, so that a
// lost state is rebuilt from what the remote already holds. Before anything
// is written it refuses a machine name another ompsync writes
// (claimMachine), and stops trusting a state that does not match this
// remote (distrust).
func (a *Agent) start(ctx context.Context) (err error) {
	// A refusal stops the agent before any pass: recorded for status.
	defer func() { a.refused.record(err) }()
	if err := a.checkRemoteHolds(ctx); err != nil {
		return err
	}
	a.repo.SetLog(a.log)
	if err := a.repo.Init(ctx); err != nil {
		return err
	}
	base, recent, err := a.repo.GetCatalogParts(ctx, a.opts.Machine)
	switch {
	case errors.Is(err, repo.ErrNotEncrypted):
		// A plaintext catalog of this machine in an encrypted repository:
		// written before this machine had the key (or by someone else).
		// Its content is not trusted; the next catalog put replaces it,
		// encrypted, from the local state.
		a.log.Warn("this machine's catalog on the remote is not encrypted, as the repository now is; "+
			"it is not read, and is replaced, encrypted, from the local state", "err", err)
		return a.started(catalogUnreadable, nil, time.Time{})
	case errors.Is(err, remote.ErrNotFound):
		if a.fresh {
			a.log.Info("first run: nothing of this machine is on the remote yet; backing up everything in the agent dir",
				"agent_dir", a.opts.AgentDir, "machine", a.opts.Machine)
		}
		return a.started(catalogMissing, nil, time.Time{})
	case errors.Is(err, repo.ErrNoKey):
		// An agent given only the recipients (public keys) can write but
		// not read: it works from its local state alone.
		a.log.Warn("cannot read this machine's catalog without the private key; a lost local state cannot be rebuilt from the remote", "err", err)
		return a.started(catalogUnreadable, nil, time.Time{})
	case err != nil && catalogDamaged(err):
		// The local state is what the catalog said: it is written again
		// from it (verify --repair relies on this). Without one, from a
		// listing of what this machine uploaded: its bytes say nothing.
		if a.fresh {
			a.log.Warn("this machine's catalog on the remote is damaged and there is no local state to write it again from; "+
				"it is written again from a listing of what this machine uploaded", "err", err)
		} else {
			a.log.Warn("this machine's catalog on the remote is damaged; it is not read, and is written again from the local state", "err", err)
		}
		// Who wrote it last the small recent object may still say: the
		// name is claimed as after a catalog read.
		if w, at, werr := a.repo.CatalogWriter(ctx, a.opts.Machine); werr == nil {
			if err := a.claimMachine(w, at); err != nil {
				return err
			}
		}
		err = a.started(catalogUnreadable, nil, time.Time{})
		if a.fresh && err == nil {
			var cat repo.Catalog
			cat, err = a.catalogFromListing(ctx)
			a.seedFromCatalog(cat)
		}
		return err
	case err != nil:
		return fmt.Errorf("read this machine's catalog: %w", err)
	}
	// Just read, so the remote holds them: no reconcile checks them again
	// (a round trip or two per run of agent --once) until they are put.
	a.catConfirmedAt = a.now()
	w, at := repo.LastWrite(base, recent)
	if err := a.claimMachine(w, at); err != nil {
		return err
	}
	if w != nil && w.Instance == a.state.Instance {
		a.catWrittenAt = at
	}
	// Know what the remote lists, so an unchanged state puts nothing.
	a.setCatalogBase(base)
	if len(base.Refused) > 0 {
		a.catBase = nil // rewrite it whole, without the entries refused
	}
	a.catBaseRead = base.Updated
	if recent != nil {
		r := *recent
		r.Updated, r.Refused = time.Time{}, nil
		a.catRecent, a.catRecentAt = repo.EncodeRecent(r, a.catBase), recent.Updated
	}
	cat := repo.Amend(base, recent)
	if a.fresh {
		a.log.Info("no local state: rebuilding it from this machine's catalog on the remote", "sessions", len(cat.Sessions), "state_dir", a.opts.StateDir)
	}
	for _, why := range cat.Refused {
		a.log.Warn("this machine's catalog has an unsafe entry; ignoring it", "problem", why)
	}
	err = a.started(catalogRead, w, at)
	a.seedFromCatalog(cat)
	return err
}

// catalogDamaged says err, reading this machine's catalog, is damage to
// its bytes: not a remote that did not answer, nor a key that cannot open
// it (which must never lead to writing over it).
func catalogDamaged(err error) bool {
	return !remote.Unanswered(err) && !errors.Is(err, repo.ErrNoKey) && !errors.Is(err, repo.ErrEncryptionMismatch) &&
		!errors.Is(err, remote.ErrAccessDenied)
}

// started reconciles a state that cannot be trusted on this remote, given
// what start learnt of its catalog (see distrust), and records the
// repository it describes from now on, saved at once: a run stopped before
// its first pass must not leave a state that says it belongs here without
// having been checked.
func (a *Agent) started(cat catalogSeen, w *repo.Writer, at time.Time) error {
	if why, otherRepo := a.distrust(cat, w, at); why != "" {
		a.reconcileAll(why, otherRepo)
	}
	a.ownerCheckedAt = a.now()
	if a.state.RepoID != a.repo.ID() || a.state.Remote != a.opts.Remote {
		a.state.RepoID, a.state.Remote = a.repo.ID(), a.opts.Remote
		a.state.changed.all = true
	}
	if a.state.changed.all {
		a.saveState("could not save state")
	}
	return nil
}

// Run watches and uploads until ctx ends, then flushes what is settled
// within FlushTimeout: nil only when all of it is on the remote.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.waitForAgentDir(ctx); err != nil {
		return nil // stopped while waiting
	}
	if err := checkLayout(a.opts.AgentDir, a.opts.Store); err != nil {
		return err
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer fw.Close()
	a.fsw = fw
	a.addTree(a.opts.AgentDir)
	go a.watchEvents(ctx)

	if ok, err := a.startRetrying(ctx); !ok {
		return err
	}
	if err := a.firstPass(ctx); err != nil {
		return err
	}
	a.batchCatalog = true
	if a.opts.Ready != nil {
		a.opts.Ready()
	}
	// Starting (the state loaded, the catalog read, every file looked at)
	// leaves garbage several times what the agent holds from then on; the
	// runtime would return it to the system over minutes, while the agent
	// mostly idles.
	debug.FreeOSMemory()
	lastFull, lastPull := a.now(), time.Time{}
	tick := time.NewTicker(time.Duration(a.interval.Load()))
	defer tick.Stop()
	cur := a.interval.Load()
	for {
		select {
		case <-ctx.Done():
			return a.flush(false)
		case <-tick.C:
		case <-a.reload:
		}
		if iv := a.interval.Load(); iv != cur {
			cur = iv
			tick.Reset(time.Duration(iv))
			a.log.Info("upload interval changed", "interval", time.Duration(iv))
		}
		if !a.outage.ready(a.now()) {
			a.updatePending() // what waits grows while the remote is away
			a.observe(nil, false)
			continue
		}
		a.gapsPolled = a.pollUnwatched()
		full := a.fullScan.Swap(false) || a.now().Sub(lastFull) >= a.opts.ReconcileInterval
		if full {
			lastFull = a.now()
		}
		err := a.pass(ctx, full)
		if err != nil && ctx.Err() == nil {
			if errors.Is(err, ErrMachineInUse) {
				return err // another agent took the name: stop writing under it
			}
			a.log.Debug("pass incomplete", "err", err)
		}
		if ctx.Err() == nil {
			a.observe(err, true)
		}
		if down, _, _ := a.outage.state(); !down {
			a.maintain(ctx) // not against a remote that is away
			a.readBack(ctx)
		}
		if full {
			debug.FreeOSMemory() // a full scan leaves the garbage starting does
		}
		if a.opts.Pull && a.now().Sub(lastPull) >= a.opts.PullInterval {
			lastPull = a.now()
			a.pullAndSave(ctx)
		}
	}
}

// startRetrying starts the agent, waiting out an outage of the remote; ok
// says it started, else Run returns err.
func (a *Agent) startRetrying(ctx context.Context) (ok bool, err error) {
	for {
		err := a.start(ctx)
		if err == nil {
			return true, nil
		}
		if ctx.Err() != nil {
			return false, a.flush(true)
		}
		if !remote.IsTransient(err) {
			return false, err
		}
		a.outage.failed(a.log, a.now(), err)
		// No pass has looked at the files yet: every one is looked at.
		a.metrics.setPending(a.pendingBytes(true))
		a.observe(nil, false)
		if !sleepCtx(ctx, a.outage.wait()) {
			return false, a.flush(true)
		}
	}
}

// firstPass looks at every file once started; an error it returns stops Run.
func (a *Agent) firstPass(ctx context.Context) error {
	first := a.pass(ctx, true)
	a.observe(first, true)
	if err := first; err != nil && ctx.Err() == nil {
		if errors.Is(err, ErrMachineInUse) {
			return err
		}
		a.log.Warn("first pass incomplete; will retry", "err", err)
	}
	if a.sessionsGone && a.scanFound == 0 && ctx.Err() == nil && !errors.Is(first, ErrVanished) {
		a.log.Warn(a.noSessionsFolder().Error() + " Watching for it.")
	}
	return nil
}

// pullAndSave pulls, says how that went, and saves the state.
func (a *Agent) pullAndSave(ctx context.Context) {
	if err := a.pull(ctx); errors.Is(err, errNotMerged) {
		a.log.Debug("pull incomplete", "err", err) // each session said at WARN
	} else {
		a.ended(ctx, "pull", "pull failed; it is retried every pull interval", err)
	}
	a.saveState("could not save state")
}

// saveState saves the state; msg says it could not.
func (a *Agent) saveState(msg string) {
	if err := a.state.persist(a.opts.StateDir); err != nil {
		a.log.Error(msg, "err", err)
	}
}

// observe tells the notifier how the backup is after a pass (passed) that
// ended with err, or a tick that waited for the remote.
func (a *Agent) observe(err error, passed bool) {
	now := a.now()
	if passed && err == nil {
		// An idle pass looks at nothing: what only a full pass finds
		// (a path that cannot be read, sessions that vanished) still is.
		if perr := a.problems.err(); perr != nil {
			err = perr
		} else if !a.vanishLogged.IsZero() {
			err = ErrVanished
		}
	}
	switch {
	case passed && err == nil:
		a.failSince, a.failMsg = time.Time{}, ""
	case passed && a.failSince.IsZero():
		a.failSince, a.failMsg = now, err.Error()
	}
	if a.opts.Notifier == nil {
		return
	}
	h := notify.Health{Good: a.failSince.IsZero()}
	h.Pending, h.PendingSince, _ = a.metrics.pending()
	if !a.failSince.IsZero() {
		h.Failing, h.FailingSince = a.failMsg, a.failSince
	}
	if down, since, why := a.outage.state(); down {
		h.Good = false
		h.Failing = "remote " + a.outage.remote + " unreachable: " + why
		if h.FailingSince.IsZero() || since.Before(h.FailingSince) {
			h.FailingSince = since
		}
	}
	a.opts.Notifier.Observe(now, h)
}

// flush uploads everything settled after a stop signal, within
// FlushTimeout. A signal that came before start-up was done (starting), as
// when a service manager stops the agent while it starts, finishes
// start-up first or, when the remote does not answer in time, abandons it.
// Nothing uploaded is lost, but an abandoned start is an error: exit 0 says
// everything settled is up.
func (a *Agent) flush(starting bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.FlushTimeout)
	defer cancel()
	if starting {
		if err := a.start(ctx); err != nil {
			return fmt.Errorf("stopped during start-up, before anything was uploaded: %w; the next start uploads it", err)
		}
	}
	a.batchCatalog = false // what the catalog lacks goes up now
	if err := a.pass(ctx, true); err != nil {
		return fmt.Errorf("stopped before everything was uploaded: %w; the next start uploads the rest", err)
	}
	a.log.Info("stopped; everything settled is uploaded")
	return nil
}

// waitForAgentDir waits for a missing agent dir, saying once what it waits
// for. (An agent that pulls made it in New: on a new machine the other
// machines' sessions are what it is for.)
func (a *Agent) waitForAgentDir(ctx context.Context) error {
	said := false
	for {
		if fi, err := os.Stat(a.opts.AgentDir); err == nil && fi.IsDir() {
			return nil
		}
		if !said {
			a.log.Info("waiting for the agent dir to appear ("+a.opts.Store.Name()+" makes it when first used); to bring this machine's and the others' sessions here now, run 'ompsync restore --all', or set sync.pull", "agent_dir", a.opts.AgentDir)
			said = true
		}
		if !sleepCtx(ctx, time.Second) {
			return ctx.Err()
		}
	}
}

// inParallel calls fn for each item, at most n at once, in their order,
// and returns when every call has.
func inParallel[T any](n int, items []T, fn func(T)) {
	var g errgroup.Group
	g.SetLimit(n)
	for _, it := range items {
		g.Go(func() error { fn(it); return nil })
	}
	g.Wait()
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d): // collected once it fires or is dropped
		return true
	}
}

func (a *Agent) markDirty(rel string) {
	a.mu.Lock()
	a.dirty[rel] = true
	a.mu.Unlock()
}

// takeDirty empties the dirty set and returns its paths, in order.
func (a *Agent) takeDirty() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := slices.Sorted(maps.Keys(a.dirty))
	clear(a.dirty)
	return out
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
