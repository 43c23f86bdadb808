package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ompsync/ompsync/progress"
	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
	"github.com/ompsync/ompsync/store"
)

const restoreLong = `Restore sessions from the remote, by session id prefix as omp's --resume
matches it (case-insensitive), or by the session file's name or path, or all
of them. Each goes where the agent that wrote it looks for it: omp's into
agent_dir, pi's into pi.dir, Claude Code's into claude.dir, Codex's into
codex.dir (--to DIR: one agent's folder instead; --agent narrows to one
agent). A prefix that several sessions start with lists them, newest first;
on a terminal it asks which one, and --latest takes the newest, as omp's
--resume does.

Each session is merged with the local file of the same id:
  - no local file: the copy is written whole, with the mtime it had when
    last uploaded (mode 0600, folders 0700), where this machine's agent
    looks for its project (see below);
  - the local file is a prefix of the copy: the missing bytes are appended;
  - the copy is a prefix of the local file: nothing to do;
  - they diverged: merged by entry id, every line of both kept; the old local
    file is kept beside it as a hidden .<name>.jsonl.pre-merge-<time> file
    for 30 days (then a restore or pull removes it, saying so). Codex's lines carry no entry ids: the local file stays as it is and the
    other machine's copy is written beside it as <name>.jsonl.<machine>.
A machine's copy is its newest generation (--generation picks an older one;
--at TIME the one current at that time, with the bytes uploaded by then);
copies from several machines are combined the same way (--machine picks
one). A file omp may be writing (a .lock sidecar, or changed in the last few
seconds) is skipped unless --force. Blobs and artifact folders come back with
their session; archived sessions come back into sessions/.

A session from another machine goes where its agent looks for the project
on this one: its recorded folder when it is here; else this machine's
checkout of the same git repository (by origin URL, found under
projects.roots and in this machine's own sessions; the one used most
recently of several), the same folder inside it; else the same folder under
this home; else a path_map or --path-map pair; else where it was recorded,
with a note on what to set. The folder the session records (omp's and pi's
header, Claude Code's lines, Codex's session meta) is rewritten for this
machine, and back when the other machine pulls it: the copies stay one
session. --dry-run shows where each would go and why.

Every chunk is verified before anything is written for a session; a session
whose copy fails a check is refused and the others go on. An ambiguous or
unknown prefix restores nothing. Exit status 1 when any session was not
restored.`

const restoreExample = `  # restore one session by the start of its id
  ompsync restore 01a113d2

  # everything, each agent's sessions into its own folder, on a new machine
  ompsync restore --all

  # omp's sessions alone, into another folder
  ompsync restore --all --agent omp --to /mnt/new/.omp/agent

  # what would happen, as JSON lines
  ompsync restore --all --include-deleted --dry-run --json

  # where each session would go on this machine, and why
  ompsync restore --all --dry-run

  # sessions recorded on a Mac, in folders no checkout here matches
  ompsync restore --all --path-map /Users/ana=/home/ana`

// restoreFlags are restore's flags: those restore itself takes set its
// options directly.
type restoreFlags struct {
	restore.Options
	asJSON        bool
	to, at, agent string
	pathMap       []string
}

func newRestoreCmd(a *app) *cobra.Command {
	var f restoreFlags
	cmd := &cobra.Command{
		Use:     "restore ID-PREFIX... | --all",
		Short:   "Restore sessions from the remote, merging with local files",
		Long:    restoreLong,
		Example: restoreExample,
		Args: idPrefixes(0, func(cmd *cobra.Command, args []string) error {
			switch {
			case f.All && len(args) > 0:
				return usagef("give session id prefixes or --all, not both")
			case !f.All && len(args) == 0:
				return usagef("give a session id prefix (see 'ompsync ls') or --all")
			case f.IncludeDeleted && !f.All:
				return usagef("--include-deleted goes with --all (a prefix finds deleted sessions anyway)")
			case f.Latest && f.All:
				return usagef("--latest goes with an id prefix, not --all")
			}
			return nil
		}),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runRestore(cmd.Context(), f, args)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.All, "all", false, "restore every session not recorded as deleted")
	fl.BoolVar(&f.IncludeDeleted, "include-deleted", false, "with --all, also sessions recorded as deleted")
	fl.StringVar(&f.to, "to", "", "restore into this folder instead of the agent's own (one agent's; created if missing)")
	addAgentFlag(fl, &f.agent)
	fl.StringVar(&f.Machine, "machine", "", "use only this machine's copy")
	fl.BoolVar(&f.DryRun, "dry-run", false, "fetch and verify, say what would be done, write nothing")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object per session per line")
	fl.BoolVar(&f.Force, "force", false, "also touch files omp may be writing right now")
	fl.StringArrayVar(&f.pathMap, "path-map", nil, "FROM=TO: a session recorded in folder FROM or below runs in the same folder under TO here, when no checkout of its repository is found (repeatable; adds to path_map)")
	addLatestFlag(fl, &f.Latest)
	addAtFlag(fl, &f.at)
	fl.StringVar(&f.Generation, "generation", "", "restore this generation instead of the newest (16 hex digits, see 'ompsync verify --json')")
	return cmd
}

func (a *app) runRestore(ctx context.Context, f restoreFlags, args []string) error {
	opts, err := restoreOptions(a, f)
	if err != nil {
		return err
	}
	places, args, unknown, err := a.restorePlaces(ctx, f, args, &opts)
	if err != nil {
		return err
	}
	// A restore trades memory for speed, a short run whose garbage is
	// mostly the sessions it has written: the GC runs at 5x the live heap,
	// not 2x (a quarter of the restore's CPU before), within a soft limit
	// of 512 MiB. The limit is twice the most a merge's index may hold by
	// default (restore.max_merge_size): at 1 GiB a large merge's garbage
	// grew the heap to it (a 1 GiB merge: 1,098 MiB RSS in 88.7 s, against
	// 542 MiB in 48.5 s at 512 MiB). GOGC and GOMEMLIMIT override either.
	a.memoryLimits(400, 512<<20)
	bar := a.sessionBar(f.asJSON, "")
	opts.Progress = bar.restoreProgress
	rep, err := restore.RunAll(ctx, places, args, opts)
	bar.done()
	if err != nil {
		return err
	}
	rep.Problems = append(rep.Problems, unknown...)
	stopped := markInterrupted(ctx, rep)
	if err := a.writeRestore(rep, opts, f); err != nil {
		return err
	}
	if stopped > 0 {
		return interruptedRestore(rep, stopped)
	}
	return restoreFailure(rep)
}

// restorePlaces reads the remote's places to restore from, and where each
// session goes: the placer, the settings and --to in opts, and the ids
// --to found for the prefixes. unknown are the remote's problems so far.
func (a *app) restorePlaces(ctx context.Context, f restoreFlags, args []string, opts *restore.Options) (places []restore.Place, ids, unknown []string, err error) {
	cfg, places, unknown, err := a.readPlaces(ctx, f.Machine, f.agent)
	if err != nil {
		return nil, nil, nil, err
	}
	pl, scanned, err := placer(ctx, cfg, f.pathMap)
	if err != nil {
		return nil, nil, nil, err
	}
	opts.Placer = pl
	// Where the search for checkouts stopped short: worth knowing, not a
	// failure of the restore.
	under(a.stderr, "ompsync: note: ", scanned)
	opts.Parallel = cfg.Transfers
	opts.MaxMergeSize = cfg.Restore.MaxMergeSize.Bytes()
	if f.to == "" {
		return places, args, unknown, nil
	}
	to, err := filepath.Abs(f.to)
	if err != nil {
		return nil, nil, nil, err
	}
	if places, args, err = placeOf(ctx, places, args, *opts); err != nil {
		return nil, nil, nil, err
	}
	places[0].Dir = to
	return places, args, unknown, nil
}

// restoreOptions checks the flags that need no remote and turns them into
// restore's options.
func restoreOptions(a *app, f restoreFlags) (restore.Options, error) {
	opts := f.Options
	opts.Choose = a.chooser()
	if err := pickCopy(&opts, f.Generation, f.at); err != nil {
		return opts, err
	}
	for _, s := range f.pathMap {
		if _, err := project.ParseMap(s); err != nil {
			return opts, usagef("--path-map: %v", err)
		}
	}
	return opts, nil
}

// writeRestore prints a restore's report: its sessions (or JSON lines),
// totals, hint, cleanup notes and problems.
func (a *app) writeRestore(rep *restore.Report, opts restore.Options, f restoreFlags) error {
	notes := a.notes(f.asJSON)
	if err := printList(a.stdout, f.asJSON, rep.Results, func() { printRestore(a.stdout, rep, opts, a.quiet) }); err != nil {
		return err
	}
	fmt.Fprintln(notes, restoreTotals(rep, opts))
	if hint := resumeHint(rep, opts); hint != "" && f.to == "" && !f.asJSON {
		fmt.Fprintln(notes, hint)
	}
	for _, c := range rep.Cleanup {
		fmt.Fprintln(notes, c)
	}
	a.warn(rep.Problems)
	return nil
}

// restoreFailure is the error a restore ends with when a session was not
// restored whole, or the remote has problems; nil when all went well.
func restoreFailure(rep *restore.Report) error {
	bad, incomplete, unanswered := 0, 0, 0
	for _, res := range rep.Results {
		switch {
		case len(res.Missing) > 0 && res.Error == "":
			incomplete++
		case !res.OK():
			bad++
			if res.Action == restore.NotFetched {
				unanswered++
			}
		}
	}
	switch {
	case bad > 0 && unanswered == bad:
		return fmt.Errorf("%d of %d sessions not restored: the remote did not answer (see above); run the restore again once it is reachable", bad+incomplete, len(rep.Results))
	case bad > 0:
		return fmt.Errorf("%d of %d sessions not restored (see above)", bad+incomplete, len(rep.Results))
	case incomplete > 0:
		return fmt.Errorf("%d of %d sessions restored incomplete: part of what the backup holds was not written (see above)", incomplete, len(rep.Results))
	case len(rep.Problems) > 0:
		return fmt.Errorf("the remote has problems (see above)")
	}
	return nil
}

// placeOf is the one place --to writes into: the only agent the remote
// holds, the one --agent names, or the one the prefixes find (then given
// back as the ids they found, so that an ambiguous one is asked once).
func placeOf(ctx context.Context, places []restore.Place, prefixes []string, opts restore.Options) ([]restore.Place, []string, error) {
	if len(places) == 1 {
		return places, prefixes, nil
	}
	var names []string
	for _, pl := range places {
		names = append(names, pl.Store.Name())
	}
	if len(prefixes) == 0 {
		return nil, nil, usagef("--to names one agent's folder, and the remote holds sessions of %s: add --agent", strings.Join(names, ", "))
	}
	var one *restore.Place
	var ids []string
	for _, pre := range prefixes {
		pl, id, err := restore.Find(ctx, places, pre, opts)
		if err != nil {
			return nil, nil, err
		}
		if one != nil && one.Store.Name() != pl.Store.Name() {
			return nil, nil, usagef("--to names one agent's folder, and the sessions asked for are %s's and %s's: restore them apart, each with --agent", one.Store.Name(), pl.Store.Name())
		}
		one = &pl
		ids = append(ids, id)
	}
	return []restore.Place{*one}, ids, nil
}

// interrupted is the action of a session a signal stopped before it was
// restored.
const interrupted restore.Action = "interrupted"

// markInterrupted gives the sessions a stop signal cut off (refused with
// the context's error) their own action, and returns how many there are.
func markInterrupted(ctx context.Context, rep *restore.Report) int {
	if ctx.Err() == nil {
		return 0
	}
	n := 0
	for i, res := range rep.Results {
		if (res.Action == restore.NotFetched || res.Action == restore.Refused) && strings.Contains(res.Error, ctx.Err().Error()) {
			rep.Results[i].Action, rep.Results[i].Error = interrupted, "not restored: interrupted"
			n++
		}
	}
	return n
}

// interruptedRestore says what a stopped restore did and did not do.
func interruptedRestore(rep *restore.Report, stopped int) error {
	done, other := 0, 0
	var ids []string
	for _, res := range rep.Results {
		switch {
		case res.OK():
			done++
		case res.Action == interrupted:
			if len(ids) < 3 {
				ids = append(ids, res.ID)
			}
		default:
			other++
		}
	}
	msg := fmt.Sprintf("%d of %d sessions restored or already up to date; %d not restored (%s", done, len(rep.Results), stopped, strings.Join(ids, ", "))
	if stopped > len(ids) {
		msg += fmt.Sprintf(" and %d more", stopped-len(ids))
	}
	msg += ")" + tally(counted{other, "not restored for another reason (see above)"})
	return &interruptedError{msg + "; what was written is complete: run the same command again to finish"}
}

// resumeHint is how to go on with the one session a restore wrote, in the
// agent that wrote it; "" when it wrote none or several.
func resumeHint(rep *restore.Report, opts restore.Options) string {
	if opts.DryRun || len(rep.Results) != 1 {
		return ""
	}
	res := rep.Results[0]
	switch res.Action {
	case restore.Created, restore.Appended, restore.Merged:
	default:
		return ""
	}
	st, err := store.ByName(cmp.Or(res.Agent, repo.DefaultAgent))
	if err != nil {
		return ""
	}
	switch {
	case res.Cwd == "":
		return "resume it with: " + st.Resume(res.ID)
	case !isDir(res.Cwd):
		hint := fmt.Sprintf("resume it with: %s, once its folder %s is on this machine", st.Resume(res.ID), res.Cwd)
		if len(res.Notes) > 0 { // what to set, said above
			hint += " (or set path_map: see the note above)"
		}
		return hint
	}
	return fmt.Sprintf("resume it with: cd %s && %s", shellQuote(res.Cwd), st.Resume(res.ID))
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// shellQuote quotes p for a POSIX shell when it needs it.
func shellQuote(p string) string {
	if p != "" && strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+~") == "" {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}

// restoreVerbs name each action in printRestore's lines.
func restoreVerbs(dryRun bool) map[restore.Action]string {
	verb := map[restore.Action]string{
		restore.Created: "created", restore.Appended: "appended", restore.Unchanged: "unchanged",
		restore.Retitled: "retitled",
		restore.Merged:   "merged", restore.SkippedLive: "skipped", restore.Refused: "refused", restore.Failed: "failed",
		restore.NotFetched: "not fetched",
		restore.NoCopy:     "no copy then",
		interrupted:        "interrupted",
	}
	if dryRun {
		verb[restore.Created], verb[restore.Appended], verb[restore.Merged] = "would create", "would append", "would merge"
		verb[restore.Retitled] = "would retitle"
	}
	return verb
}

// printRestore prints a line per session, with its notes; with quiet
// (-q), only the sessions not restored.
func printRestore(w io.Writer, rep *restore.Report, opts restore.Options, quiet bool) {
	verb := restoreVerbs(opts.DryRun)
	said := map[string]bool{} // a note on a project's placement is said once
	for _, res := range rep.Results {
		if res.Action == interrupted || (quiet && res.OK()) {
			continue // the error line names the interrupted ones, once
		}
		fmt.Fprintln(w, restoreLine(res, verb[res.Action], opts.DryRun))
		if res.Backup != "" {
			fmt.Fprintf(w, "             the local file before the merge is kept as %s\n", res.Backup)
		}
		if res.Error != "" {
			fmt.Fprintf(w, "             %s\n", res.Error)
		}
		under(w, "             not restored: ", res.Missing)
		for _, n := range res.Notes {
			if !said[n] {
				said[n] = true
				fmt.Fprintf(w, "             note: %s\n", n)
			}
		}
	}
	if rep.Blobs > 0 && !quiet {
		fmt.Fprintf(w, "%d more blobs restored\n", rep.Blobs)
	}
}

// restoreLine is a session's first line in printRestore.
func restoreLine(res restore.Result, verb string, dryRun bool) string {
	line := fmt.Sprintf("%-12s %s", verb, res.ID)
	if res.Path != "" {
		line += "  " + res.Path
	}
	if dryRun && res.Cwd != "" {
		line += fmt.Sprintf("  in %s (%s)", res.Cwd, res.Placed)
	}
	if res.Agent != "" && res.Agent != repo.DefaultAgent {
		line += "  (" + res.Agent + ")"
	}
	switch res.Action {
	case restore.Created, restore.Appended, restore.Merged:
		line += fmt.Sprintf("  %s from %s", progress.Size(res.Bytes), strings.Join(res.Machines, ", "))
	}
	if res.Artifacts > 0 || res.Blobs > 0 {
		line += fmt.Sprintf(" (+%d artifact files, %d blobs)", res.Artifacts, res.Blobs)
	}
	return line
}

// restoreTotals is the line a restore ends with, so one that restores
// nothing says why: "0 restored; 6 recorded as deleted (add
// --include-deleted)".
func restoreTotals(rep *restore.Report, opts restore.Options) string {
	n := map[restore.Action]int{}
	incomplete := 0
	for _, res := range rep.Results {
		n[res.Action]++
		if len(res.Missing) > 0 {
			incomplete++
		}
	}
	wrote := []restore.Action{restore.Created, restore.Appended, restore.Merged, restore.Retitled}
	restored := 0
	for _, w := range wrote {
		restored += n[w]
	}
	verb := "restored"
	if opts.DryRun {
		verb = "would be restored"
	}
	line := fmt.Sprintf("%d %s", restored, verb)
	var how []string
	for _, w := range wrote {
		if n[w] > 0 && n[w] < restored {
			how = append(how, fmt.Sprintf("%d %s", n[w], restoreVerbs(false)[w]))
		}
	}
	if len(how) > 0 {
		line += " (" + strings.Join(how, ", ") + ")"
	}
	return line + restoreLeft(n, incomplete, rep.DeletedLeft)
}

// restoreLeft is the end of restoreTotals' line: the sessions not
// restored, and why.
func restoreLeft(n map[restore.Action]int, incomplete, deletedLeft int) string {
	return tally(
		counted{n[restore.Unchanged], "already up to date"},
		counted{n[restore.SkippedLive], "skipped: in use (omp or another process has the file, or it changed seconds ago; see above)"},
		counted{n[restore.Refused], "refused: the remote copy failed a check (see above)"},
		counted{n[restore.NoCopy], "had no copy on the remote at that time (they began later; see 'ompsync history')"},
		counted{n[restore.NotFetched], "not fetched: the remote did not answer, so nothing was written for them (restore again once it is reachable)"},
		counted{n[restore.Failed], "failed to write here (see above)"},
		counted{incomplete, "incomplete: part of what the backup holds was not written (see above)"},
		counted{deletedLeft, "recorded as deleted (add --include-deleted)"},
	)
}
