// Package restore brings sessions back from the remote into an agent dir,
// merging them with what is there by session id, and never losing a byte that
// either side had.
//
// Data flows one way: the planner reads the catalogs and decides which
// sessions to restore and where (plan.go); fetch reassembles and verifies
// every copy a session needs, with its artifact files and blobs (fetch.go);
// the merger combines the copies with the local files by the merge rule and
// writes the result (merge.go). Nothing is written for a session until all
// of it has been fetched and verified.
package restore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/ompsync/ompsync/atomicfile"
	"github.com/ompsync/ompsync/openfiles"
	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// Options configure Run. Zero values take the defaults noted.
type Options struct {
	// AgentDir is where sessions go: the configured agent dir or --to
	// (created, mode 0700, when missing). Required.
	AgentDir string
	// Store is the agent whose sessions AgentDir holds. Default omp.
	Store *store.Store
	// Machine restricts restore to that machine's copy ("" = all).
	Machine string
	// All restores every session not recorded as deleted; IncludeDeleted
	// adds those.
	All, IncludeDeleted bool
	// DryRun fetches and verifies but writes nothing.
	DryRun bool
	// Force also touches a file that is locked or changed recently, but
	// never one a process holds open.
	Force bool
	// OpenFiles says which processes hold files open, as scanned just
	// before Run (sync scans once per pull); nil scans at the start. A
	// scan older than a second is taken again before a session is
	// written.
	OpenFiles *openfiles.Snapshot
	// Local is the agent dir's session files by id, as scanned before Run
	// (sync scans once per pull, not once per session); nil scans at the
	// start. Run adds the files it creates.
	Local *store.Local
	// Placer places a session that has no file here in this machine's
	// folder for its project (and rewrites the folders its copies record
	// for it); nil keeps every session where it was recorded.
	Placer *project.Placer
	// Generation picks that generation instead of the newest.
	Generation string
	// At, when set, restores each stream as the backup held it then: the
	// generation current at that time, with the bytes uploaded by then
	// (docs/FORMAT.md, "upload marks").
	At time.Time
	// Latest settles an ambiguous id prefix on the newest session it
	// matches, as omp's --resume does; else Choose, when set, is asked to
	// pick one of the candidates (a prompt on a terminal) and returns its
	// id. Without either an ambiguous prefix is an *AmbiguousError.
	Latest bool
	Choose func(*AmbiguousError) (string, error)
	// sessionOnly fetches the session stream alone, without artifacts or
	// blobs (cat, grep).
	sessionOnly bool
	// blobMtimes is each blob's mtime as the catalogs give it (Run sets it
	// from the planner's).
	blobMtimes map[string]time.Time
	// beforeWrite, in tests, runs right before a session's files are
	// written (after its copies were fetched and merged), with its path.
	beforeWrite func(rel string)
	// mergeMu lets one session at a time merge diverged copies line by
	// line (Run and Cat set it).
	mergeMu *sync.Mutex
	// buffers holds the in-memory copies' buffers for reuse (Run sets it).
	buffers *buffers
	// Parallel bounds sessions restored at once. Default 16, the config's
	// transfers.
	Parallel int
	// LiveWindow: a file changed more recently than this is taken to be
	// in use by omp. Default 5s.
	LiveWindow time.Duration
	// MaxBlobSize bounds one blob. Default 512 MiB.
	MaxBlobSize int64
	// MaxStreamSize bounds any stream, whatever a catalog records: a
	// session file, an artifact file, an older generation. Default 1 GiB.
	MaxStreamSize int64
	// MaxMergeSize bounds the index a line-by-line merge of diverged
	// copies keeps of their lines (session.Index: session.LineCost a line
	// of every copy, the local file's among them, and the longest line;
	// never the copies, which it reads through); past it the session
	// fails, saying so. One session merges at a time. Default 256 MiB
	// (restore.max_merge_size's).
	MaxMergeSize int64
	// Catalogs, when not nil, are used instead of reading them from the
	// remote (sync reads them once per pull for all its sessions).
	Catalogs []repo.Catalog
	// HashWritten gives in each Result the range of the session file's
	// bytes a restore added and their hash (Added): sync records what it
	// pulled from what was written, not from the file, which omp may
	// change the moment it appears.
	HashWritten bool
	// Progress, when set, is called with the totals once the sessions are
	// known, then after each session.
	Progress func(Progress)
	Logger   *slog.Logger
	// Now is the clock (tests).
	Now func() time.Time
}

func (o *Options) setDefaults() {
	if o.Parallel <= 0 {
		o.Parallel = 16
	}
	if o.LiveWindow <= 0 {
		o.LiveWindow = 5 * time.Second
	}
	if o.MaxBlobSize <= 0 {
		o.MaxBlobSize = repo.MaxBlobSize
	}
	if o.MaxStreamSize <= 0 {
		o.MaxStreamSize = repo.MaxStreamSize
	}
	if o.MaxMergeSize <= 0 {
		o.MaxMergeSize = 256 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Store == nil {
		o.Store = store.OMP()
	}
}

// Progress is how far a restore has come.
type Progress struct {
	Sessions, SessionsTotal int
	// Bytes counts the recorded sizes of the sessions done.
	Bytes, BytesTotal int64
}

// Action is what a restore did to one session.
type Action string

const (
	// Created: there was no local file; the copy was written whole.
	Created Action = "created"
	// Appended: the local file was a prefix of the remote copy.
	Appended Action = "appended"
	// Retitled: the local file held every line; its title slot was
	// replaced by another copy's newer one.
	Retitled Action = "retitled"
	// Unchanged: the local file already holds the remote copy.
	Unchanged Action = "unchanged"
	// Merged: the two had diverged; merged by entry id, the old local
	// file kept as Backup.
	Merged Action = "merged"
	// SkippedLive: a process holds the file open, or omp may be writing
	// it; nothing done.
	SkippedLive Action = "skipped-live"
	// Refused: the remote copy failed a check; nothing written.
	Refused Action = "refused"
	// NotFetched: the remote did not answer (down, unreachable, failing
	// past the retries) or the run was stopped: nothing is known of its
	// copy, and nothing was written.
	NotFetched Action = "not-fetched"
	// Failed: writing locally failed.
	Failed Action = "failed"
	// NoCopy: with At, no machine held a copy of the session then (it
	// began later); nothing written.
	NoCopy Action = "no-copy"
)

// Result is the outcome for one session.
type Result struct {
	// Agent wrote the session: omp, pi, claude or codex.
	Agent  string `json:"agent"`
	ID     string `json:"id"`
	Action Action `json:"action"`
	// Path is the session file, relative to the agent dir.
	Path string `json:"path,omitempty"`
	// Bytes is how much was (or, in a dry run, would be) written to the
	// session file.
	Bytes int64 `json:"bytes"`
	// Added is what a create or an append wrote after the title slot
	// (with HashWritten).
	Added *Span `json:"-"`
	// Backup is the pre-merge local file, relative to the agent dir.
	Backup string `json:"backup,omitempty"`
	// Cwd is the folder the session runs in on this machine, and Placed
	// how it was found (project.SamePath, ..., LocalFile); a note on the
	// placement is among Notes.
	Cwd    string `json:"cwd,omitempty"`
	Placed string `json:"placed,omitempty"`
	// Machines are the copies used.
	Machines []string `json:"machines,omitempty"`
	// Sources are the copies the written bytes came from (for created and
	// appended: one), by machine and generation.
	Sources   []Source `json:"sources,omitempty"`
	Artifacts int      `json:"artifacts,omitempty"` // artifact files written
	Blobs     int      `json:"blobs,omitempty"`     // blobs written
	DryRun    bool     `json:"dry_run,omitempty"`
	// Notes say what else the user should know (a blob missing from the
	// remote, an artifact that differs and was left alone).
	Notes []string `json:"notes,omitempty"`
	// Missing is what the backup holds of the session that this restore
	// did not write (a blob a catalog lists that the remote lost, an
	// artifact that could not be placed, another machine's copy that could
	// be neither merged nor put beside): the session is incomplete.
	Missing []string `json:"missing,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// OK reports whether the session was restored, whole, or needed nothing.
func (r Result) OK() bool {
	switch r.Action {
	case Created, Appended, Retitled, Unchanged, Merged:
		return len(r.Missing) == 0
	}
	return false
}

// Span is a range of a file's bytes and their SHA-256 (hex).
type Span struct {
	Start, End int64
	SHA256     string
}

// Source is one machine's generation of a session.
type Source struct {
	Machine    string `json:"machine"`
	Generation string `json:"generation"`
}

// Report is what Run did.
type Report struct {
	Results []Result `json:"results"`
	// Blobs restored by an --all restore beyond those sessions reference.
	Blobs int `json:"blobs,omitempty"`
	// Problems with the remote that are not one session's (an unreadable
	// catalog).
	Problems []string `json:"problems,omitempty"`
	// DeletedLeft counts the sessions --all left out because every machine
	// records them as deleted (IncludeDeleted restores them).
	DeletedLeft int `json:"deleted_left,omitempty"`
	// Cleanup says which temp files an interrupted restore left were
	// removed, or could not be (sweepStale).
	Cleanup []string `json:"cleanup,omitempty"`
}

// Run restores the sessions whose ids start with one of prefixes (case
// insensitive), or every session with opts.All. An ambiguous or unknown
// prefix is an error before anything is written. A session whose remote copy
// fails a check is refused (its Result says why) and the others go on.
func Run(ctx context.Context, r *repo.Repo, prefixes []string, opts Options) (*Report, error) {
	opts.setDefaults()
	if err := opts.checkRun(prefixes); err != nil {
		return nil, err
	}
	var early *earlyListing
	blobs := make(chan blobListing, 1) // read once, with opts.All
	if opts.All {
		// Every session's objects and every blob are listed while the
		// catalogs are read: on a line, three round trips sooner, and the
		// blobs' one is not left for the end.
		early = startListing(ctx, r, opts.Machine)
		defer early.stop()
		bctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { blobs <- listBlobs(bctx, r) }()
	}
	p, targets, err := planTargets(ctx, r, opts, prefixes)
	if err != nil {
		return nil, err
	}
	opts.blobMtimes = p.blobMtimes()
	if opts.Placer != nil {
		opts.Placer = opts.Placer.Learn(p.uses(opts.Placer.Machine))
	}
	rep := &Report{Problems: p.problems, DeletedLeft: p.deletedLeft}
	open := &openScan{store: opts.Store, snap: opts.OpenFiles, taken: opts.Now(), now: opts.Now}
	if _, err := open.get(); err != nil {
		return nil, err
	}
	local, err := opts.local()
	if err != nil {
		return nil, err
	}
	if !opts.DryRun {
		rep.Cleanup = sweepStale(opts, local)
	}
	opts.mergeMu = &sync.Mutex{}
	opts.buffers = &buffers{}
	rep.Results = restoreTargets(ctx, r, targets, len(p.sessions), opts, early, open, local)
	if opts.All && ctx.Err() == nil {
		n, err := restoreAllBlobs(ctx, r, <-blobs, opts)
		rep.Blobs = n
		if err != nil {
			rep.Problems = append(rep.Problems, err.Error())
		}
	}
	return rep, nil
}

// checkRun refuses what Run cannot do, before anything is read.
func (opts *Options) checkRun(prefixes []string) error {
	if opts.AgentDir == "" {
		return errors.New("restore: no agent dir")
	}
	if opts.All == (len(prefixes) > 0) {
		return errors.New("restore: give session id prefixes or --all, not both")
	}
	if opts.Generation != "" && !repo.ValidGeneration(opts.Generation) {
		return fmt.Errorf("--generation %q: want 16 hex digits, as 'ompsync verify' shows", opts.Generation)
	}
	return nil
}

// local is the index of the agent dir's sessions: opts.Local, or scanned.
func (opts *Options) local() (*store.Local, error) {
	if opts.Local != nil {
		return opts.Local, nil
	}
	return store.ScanLocal(opts.Store, opts.AgentDir)
}

// restoreTargets restores each target, opts.Parallel at a time, and
// returns their results once the sessions created are placed and their
// folders synced.
func restoreTargets(ctx context.Context, r *repo.Repo, targets []*target, sessions int, opts Options, early *earlyListing, open *openScan, local *store.Local) []Result {
	results := make([]Result, len(targets))
	var total int64
	for _, t := range targets {
		total += t.recordedSize()
	}
	done := counted(opts.Progress, Progress{SessionsTotal: len(targets), BytesTotal: total})
	// New session files are synced and linked into place by the placer,
	// off the transfers' path, and made durable by one sync of their
	// folder at the end, not one per file (a thousand sessions sit in a
	// few folders). Blobs and artifacts are synced before the session that
	// needs them.
	pl := startPlacer()
	eachTarget(ctx, r, targets, sessions, opts, early, func(i int, t *target, listed *repo.SessionObjects) {
		if ctx.Err() != nil {
			results[i] = Result{Agent: opts.Store.Name(), ID: t.id, Action: Refused, Error: ctx.Err().Error()}
			return
		}
		res := restoreOne(ctx, r, t, local.Find(t.id), opts, open, listed, &later{pl: pl, i: i})
		// A session in use is the caller's to report: sync waits for it
		// quietly, the restore command lists it.
		if res.Error != "" && res.Action != SkippedLive {
			opts.Logger.Warn("session not restored", "session", t.id, "action", res.Action, "err", res.Error)
		}
		results[i] = res
		done(t.recordedSize())
	})
	for i, err := range pl.wait() {
		opts.Logger.Warn("session not restored", "session", targets[i].id, "action", Failed, "err", err)
		results[i].Action, results[i].Error = Failed, failure(err)
	}
	for i, res := range results {
		if res.Action == Created && !opts.DryRun {
			local.Add(targets[i].id, res.Path) // the next Run sharing local finds it
		}
	}
	return results
}

// restoreOne fetches, verifies and merges one session. A session file it
// creates is in place and durable once later has placed it and synced its
// folder.
func restoreOne(ctx context.Context, r *repo.Repo, t *target, localRel string, opts Options, open *openScan, listed *repo.SessionObjects, later *later) Result {
	res := Result{Agent: opts.Store.Name(), ID: t.id, DryRun: opts.DryRun}
	dest, place, err := t.destination(opts, localRel)
	if err != nil {
		res.Action, res.Error = Refused, err.Error()
		return res
	}
	res.Path, res.Cwd, res.Placed = dest, place.Cwd, place.How
	if place.Note != "" {
		res.Notes = append(res.Notes, place.Note)
	}
	t.cwd, t.local = place.Cwd, localRel
	// Live before the fetch: nothing to fetch. Live after it (omp opened
	// the session meanwhile): nothing written.
	live := func() bool {
		snap, err := open.get()
		if err != nil {
			res.Action, res.Error = SkippedLive, err.Error()
			return true
		}
		if why, held := liveReason(opts.Store, opts.AgentDir, dest, opts.Now(), opts.LiveWindow, snap); why != "" && (held || !opts.Force) {
			res.Action, res.Error = SkippedLive, why
			return true
		}
		return false
	}
	if live() {
		return res
	}
	f, err := fetch(ctx, r, t, opts, listed)
	if err != nil {
		res.Action, res.Error = Refused, err.Error()
		switch {
		case noSpace(err):
			// The copies stream to temp files beside the agent's: this
			// disk, not the remote, is the trouble.
			res.Action, res.Error = Failed, err.Error()+" (no local file was touched; each was left as it was: free some space and restore again)"
		case remote.Unanswered(err):
			res.Action = NotFetched
		case errors.Is(err, errNoCopy):
			res.Action = NoCopy
		}
		return res
	}
	defer f.discard() // the temp files the merger did not place
	if live() {
		return res
	}
	for _, c := range f.session {
		res.Machines = append(res.Machines, c.machine)
	}
	res.Notes = append(res.Notes, f.notes...)
	res.Missing = append(res.Missing, f.missing...)
	fetched := opts.Now()
	m := &merger{Options: opts, later: later,
		live: func() bool {
			if opts.beforeWrite != nil {
				opts.beforeWrite(dest)
			}
			if opts.Now().Sub(fetched) >= maxScanAge {
				open.expire() // the merge took long: a scan of before it is too old
			}
			return live()
		}}
	if err := m.apply(f, dest, localRel != "", &res); err != nil {
		res.Action, res.Error = Failed, failure(err)
	}
	if slices.ContainsFunc(f.session, func(c copyData) bool { return c.mapped }) {
		// The bytes written are the copy's with this machine's folders:
		// no machine's stream holds them as they are here.
		res.Sources = nil
	}
	return res
}

// PreMergeKeep is how long the local file a merge replaced is kept beside
// the merged session (.<name>.pre-merge-<time>), for the user to compare
// or go back: a merge keeps every line of both, so after that it only
// takes space. Said in README.
const (
	PreMergeKeep     = 30 * 24 * time.Hour
	PreMergeKeepText = "30 days"
)

// sweepStale removes the temp files a killed restore or pull left in the
// agent dir and its session folders (hidden and never backed up, but each
// up to a session's size), once they are atomicfile.StaleAfter old, and
// says what it did; and the pre-merge files older than PreMergeKeep. The
// file system's clock is the one to compare with, not opts.Now.
func sweepStale(opts Options, local *store.Local) []string {
	now := time.Now()
	removed, err := atomicfile.SweepStale(opts.AgentDir, now)
	for _, rel := range local.Temps() {
		p := filepath.Join(opts.AgentDir, filepath.FromSlash(rel))
		ok, rerr := atomicfile.RemoveStale(p, now)
		if ok {
			removed = append(removed, p)
		}
		err = cmp.Or(err, rerr)
	}
	var said []string
	for _, p := range removed {
		opts.Logger.Info("removed a temp file an interrupted restore left", "path", p)
		said = append(said, "removed a temp file an interrupted restore left: "+p)
	}
	for _, rel := range local.PreMerges() {
		name := path.Base(rel)
		at, _ := store.PreMergeTime(name)
		if now.Sub(at) < PreMergeKeep {
			continue
		}
		p := filepath.Join(opts.AgentDir, filepath.FromSlash(rel))
		if rerr := os.Remove(p); rerr == nil {
			opts.Logger.Info("removed the local copy a merge kept, past its "+PreMergeKeepText, "path", p)
			said = append(said, fmt.Sprintf("removed %s, the local copy a merge kept on %s (kept %s)", rel, at.Format(time.DateOnly), PreMergeKeepText))
		} else if !errors.Is(rerr, fs.ErrNotExist) {
			err = cmp.Or(err, rerr)
		}
	}
	if err != nil {
		opts.Logger.Warn("cannot remove a temp file an interrupted restore left", "err", err)
		said = append(said, "cannot remove a temp file an interrupted restore left: "+err.Error())
	}
	return said
}

// failure is a failed write's message, with what to do when the trouble is
// this disk's space: the remote holds the session still.
func failure(err error) string {
	if noSpace(err) {
		return err.Error() + " (free some space and restore again)"
	}
	return err.Error()
}

// noSpace reports whether err is this disk's (or quota's) want of space.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
