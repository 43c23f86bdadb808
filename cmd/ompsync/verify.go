package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/notify"
	"github.com/ompsync/ompsync/progress"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
)

const verifyLong = `Reassemble every generation of the given sessions (all sessions, deleted ones
too, when none are given) from the remote, check every chunk's hash, the
running stream hashes and that no stream has a gap, check the blobs the
sessions reference, and compare the newest copies with the local files
(same, behind: the remote has more, ahead: not yet uploaded, diverged, or
missing). Changes nothing, locally or on the remote, unless --repair.

With --repair, what is damaged or missing of this machine's backup is put
again from the local files when their bytes still hash to what the remote
records: a chunk of a session or an artifact flipped or deleted (an intact
later chunk's stream hash proves the bytes), a blob (its bytes hash to its
name), and, through one 'agent --once' pass, a damaged or lost first or
last chunk (the agent's state proves the bytes) and this machine's
catalog, damaged or lost (written again from the agent's state, or with
none from a listing of what this machine uploaded). Then everything is
verified again. What cannot be repaired (the local file changed too,
another machine's copy, an older copy) is one NOT REPAIRED line saying
what to do; nothing is written over it.

Exit status 1 when anything on the remote is damaged or missing (DAMAGED), or
could not be read because the remote did not answer (UNCHECKED: nothing is
known of it, so run verify again once the remote is reachable).`

type verifyOptions struct {
	asJSON, repair bool
	machine, agent string
	prefixes       []string
}

func newVerifyCmd(a *app) *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify [ID-PREFIX...]",
		Short: "Check the backup: reassemble, verify hashes, compare with local files",
		Long:  verifyLong,
		Example: `  ompsync verify
  ompsync verify 01a113d2 --json`,
		Args: idPrefixes(0, cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.prefixes = args
			return a.runVerify(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print one JSON object per session per line")
	cmd.Flags().StringVar(&o.machine, "machine", "", "check only this machine's copies")
	cmd.Flags().BoolVar(&o.repair, "repair", false, "put damaged or missing objects of this machine (chunks, blobs, its catalog) back from the local files, then verify again")
	addAgentFlag(cmd.Flags(), &o.agent)
	return cmd
}

// runVerify checks the sessions, repairs with --repair and verifies again,
// then says what the remote holds.
func (a *app) runVerify(ctx context.Context, o verifyOptions) error {
	cfg, places, unknown, err := a.readPlaces(ctx, o.machine, o.agent)
	if err != nil {
		return err
	}
	bar := a.sessionBar(o.asJSON, "checked")
	opts := restore.Options{Machine: o.machine, Parallel: cfg.Transfers}
	first := opts
	first.Progress = bar.restoreProgress
	checks, problems, err := restore.VerifyAll(ctx, places, o.prefixes, first)
	bar.done()
	problems = append(problems, unknown...)
	// Every catalog refused is an error: with --repair, this machine's is
	// written again before it is one.
	if err != nil && (!o.repair || remote.Unanswered(err)) {
		return err
	}
	if verdict := repairDamage(ctx, a, o, cfg, places, checks, err != nil || len(problems) > 0); verdict != nil {
		// Verified again: the exit status and NOT REPAIRED say what the
		// remote holds now (what the first verify found, if it cannot).
		again, more, err := restore.VerifyAll(ctx, places, o.prefixes, opts)
		if err != nil {
			verdict(checks)
			return err
		}
		checks, problems = again, more
		problems = append(problems, unknown...)
		verdict(checks)
	}
	if err := printList(a.stdout, o.asJSON, checks, func() { printChecks(a, checks) }); err != nil {
		return err
	}
	return verifyOutcome(a, cfg, checks, problems, o.asJSON)
}

// verifyOutcome prints the totals and the problems, alerts when anything
// is damaged, and is the exit status.
func verifyOutcome(a *app, cfg *config.Config, checks []restore.Check, problems []string, asJSON bool) error {
	n := map[string]int{}
	for _, c := range checks {
		n[checkStatus(c)]++
	}
	bad, unchecked := n["DAMAGED"], n["UNCHECKED"]
	fmt.Fprintf(a.notes(asJSON), "%d sessions checked: %d ok%s\n", len(checks), n["ok"],
		tally(counted{bad, "DAMAGED (see above)"}, counted{unchecked, "not checked: the remote did not answer (see above)"}))
	a.warn(problems)
	if bad > 0 {
		notifyDamaged(cfg, a.logger(cfg), fmt.Sprintf("verify found %d of %d sessions damaged on the remote; run 'ompsync verify' to see which", bad, len(checks)))
	}
	switch {
	case bad > 0:
		return fmt.Errorf("%d of %d sessions have problems on the remote (see above)", bad, len(checks))
	case unchecked > 0:
		return fmt.Errorf("%d of %d sessions could not be checked: the remote did not answer (see above); nothing was found damaged: run 'ompsync verify' again once it is reachable", unchecked, len(checks))
	case len(problems) > 0:
		return fmt.Errorf("some catalogs could not be read")
	}
	return nil
}

func printChecks(a *app, checks []restore.Check) {
	for _, c := range checks {
		if a.quiet && c.OK() {
			continue // -q: the damaged ones only
		}
		fmt.Fprintln(a.stdout, checkLine(c))
		under(a.stdout, "          problem: ", c.Problems)
		under(a.stdout, "          not checked: ", c.Unchecked)
		under(a.stdout, "          note: ", c.Notes)
	}
}

// checkStatus is a session's status in verify's report.
func checkStatus(c restore.Check) string {
	switch {
	case c.Damaged():
		return "DAMAGED"
	case !c.OK():
		return "UNCHECKED"
	}
	return "ok"
}

// checkLine is a session's first line in verify's report: its status, the
// generations and bytes checked, and how the newest copies compare with
// the local files.
func checkLine(c restore.Check) string {
	var bytes int64
	local := map[string]bool{}
	for _, cc := range c.Copies {
		bytes += cc.Bytes
		if cc.Newest && cc.Stream == repo.SessionStream && cc.Local != "" {
			local[cc.Machine+": local "+cc.Local] = true
		}
	}
	line := fmt.Sprintf("%-9s %s  %s  %s, %s checked", checkStatus(c), c.ID, c.Path, count(len(c.Copies), "generation", "generations"), progress.Size(bytes))
	if len(local) > 0 {
		line += "; " + strings.Join(slices.Sorted(maps.Keys(local)), ", ")
	}
	return line
}

// notifyDamaged tells notify.url and notify.command (when set) that part of
// the backup is damaged: a verify run from cron then alerts as the agent
// does. Delivery is bounded by the notifier's timeout.
func notifyDamaged(cfg *config.Config, log *slog.Logger, msg string) {
	n := notify.New(notify.Options{URL: cfg.Notify.URL, Command: cfg.Notify.Command, Machine: cfg.Machine, Logger: log})
	if n == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	n.Report(notify.Damaged, msg)
	n.Flush(notify.DefaultTimeout + time.Second)
}

// repairDamage, with --repair, puts back what it can of this machine's
// damaged objects and says what it put. When it tried anything it returns
// the verdict, to run on the checks of the verify after it: a NOT
// REPAIRED line for each damage still there (a put mends every copy that
// shares the object, another machine's too). A damaged chunk and a
// damaged or missing blob are put from the local file when its bytes are
// proven (restore.RepairChunks, RepairBlob); what the remote lost (a
// chunk, the catalog) is put by one agent pass, which checks every upload
// against a listing and rewinds to the first missing byte when the local
// file still hashes to what was uploaded, and writes a damaged catalog
// again from its state.
func repairDamage(ctx context.Context, a *app, o verifyOptions, cfg *config.Config, places []restore.Place, checks []restore.Check, catalogProblems bool) func([]restore.Check) {
	out := a.stdout
	if !o.repair {
		return nil
	}
	if o.asJSON {
		out = a.stderr // standard output stays one object per session
	}
	damaged := catalogProblems
	unproven := map[string]bool{} // damaged chunks nothing later proves: the agent's pass
	var recheck []func()          // what the pass is to have put, read again after it
	for _, c := range checks {
		if !c.Damaged() {
			continue
		}
		damaged = true
		for _, pl := range places {
			if pl.Store.Name() == c.Agent {
				recheck = append(recheck, a.repairSession(ctx, out, cfg.Machine, pl, c, unproven)...)
			}
		}
	}
	if !damaged {
		return nil
	}
	// The agent pass reports on stderr, as its log does: standard output
	// stays verify's.
	pass := *a
	pass.stdout = a.stderr
	if err := runAgentOnce(ctx, &pass, cfg, identityFlags{damaged: unproven}); err != nil {
		fmt.Fprintf(a.stderr, "ompsync: repair what the remote lost: %v\n", err)
	}
	return func(final []restore.Check) {
		for _, f := range recheck {
			f()
		}
		unrepairable(out, final, cfg.Machine)
	}
}

// repairSession puts back what the local files prove of c's damaged
// objects in pl, adds to unproven the chunks nothing proves (the agent's
// pass is to put them), and returns for each damage it did not put a
// check to run after the final verify.
func (a *app) repairSession(ctx context.Context, out io.Writer, machine string, pl restore.Place, c restore.Check, unproven map[string]bool) []func() {
	ds, err := restore.RepairChunks(ctx, pl.Repo, pl.Store, pl.Dir, machine, c.ID, c.Path)
	if err != nil {
		fmt.Fprintf(a.stderr, "ompsync: repair session %s: %v\n", c.ID, err)
	}
	for _, n := range c.Blobs {
		ds = append(ds, restore.RepairBlob(ctx, pl.Repo, pl.Dir, n))
	}
	var recheck []func()
	for _, d := range ds {
		if d.Repaired {
			fmt.Fprintf(out, "repaired  %s: put %s back from the local file\n", c.ID, d.Key)
			continue
		}
		if d.Unproven {
			unproven[d.Key] = true
			d.Why = "nothing proves the local bytes (the local copy changed too since it was uploaded, or is gone); nothing was written over it; the agent backs the local file up as a new copy"
		}
		recheck = append(recheck, func() {
			if !restore.Mended(ctx, pl.Repo, d.Key) {
				fmt.Fprintf(out, "NOT REPAIRED %s: %s: %s\n", c.ID, d.Key, d.Why)
			}
		})
	}
	return recheck
}

// unrepairable prints a NOT REPAIRED line for each damaged copy in checks
// that no local file can prove: another machine's, or an older copy of
// this machine's, whose bytes the local file no longer holds.
func unrepairable(out io.Writer, checks []restore.Check, machine string) {
	for _, c := range checks {
		for _, cc := range c.Copies {
			if cc.Error == "" || slices.Contains(c.Unchecked, cc.Error) || (cc.Machine == machine && cc.Newest) {
				continue
			}
			what := fmt.Sprintf("machine %s's copy of %s (generation %s)", cc.Machine, cc.Stream, cc.Generation)
			why := "only that machine holds its bytes; run 'ompsync verify --repair' there"
			if cc.Machine == machine {
				what = fmt.Sprintf("an older copy of %s (generation %s)", cc.Stream, cc.Generation)
				why = "the local file no longer holds its bytes, so nothing proves them; nothing was written; 'ompsync prune' drops it when retention allows"
			}
			fmt.Fprintf(out, "NOT REPAIRED %s: %s: %s\n", c.ID, what, why)
		}
	}
}
