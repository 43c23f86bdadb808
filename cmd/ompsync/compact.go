package main

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/compact"
	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/progress"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
	"github.com/ompsync/ompsync/safename"
)

func newCompactCmd(a *app) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "compact [ID-PREFIX...]",
		Short: "Merge this machine's small chunks on the remote into a few large ones",
		Long: `Merge the many small chunks the agent uploads (one per interval while a
session is written) into a few large ones, so that restoring or listing a
session takes a few requests. The agent does this by itself (see
compaction.idle and compaction.max_chunks); this command does it on demand:
from cron, or for a remote written by an older version.

Only this machine's sessions (the machine setting) are compacted, of every
agent, every generation of them, or those whose id starts with one of the
given prefixes.
A merged chunk is read back and checked against the chunks it replaces
before they are deleted; interrupting the command at any point loses
nothing, and running it again finishes the job. While the agent (or another
compact, prune or rekey) is compacting this machine's backups, it waits for
it, saying so.`,
		Example: `  ompsync compact --dry-run
  ompsync compact 0199a3f2`,
		Args: idPrefixes(0, func(cmd *cobra.Command, args []string) error {
			for _, p := range args {
				if !safename.SessionID(p) {
					return usagef("%q is not a session id prefix (letters, digits, - and _)", p)
				}
			}
			return nil
		}),
		RunE: func(cmd *cobra.Command, args []string) error { return a.runCompact(cmd.Context(), args, dryRun) },
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be merged; change nothing")
	config.AddFlags(cmd.Flags(), "compaction.idle", "compaction.max_chunks")
	return cmd
}

func (a *app) runCompact(ctx context.Context, prefixes []string, dryRun bool) error {
	cfg, _, places, err := a.maintainedPlaces(ctx)
	if err != nil {
		return err
	}
	p := compact.Policy{Idle: cfg.Compaction.Idle, MaxChunks: cfg.Compaction.MaxChunks}
	if cfg.Source("compaction.idle").Kind != config.FromFlag {
		// Asked for by hand: the sessions are taken as finished, whenever
		// they were last written (--compaction-idle applies the agent's
		// rule instead).
		p.Idle = time.Nanosecond
	}
	rep, err := a.compactAgents(ctx, places, cfg, prefixes, p, dryRun)
	if err != nil {
		return err
	}
	var unmatched error
	if len(rep.Unmatched) > 0 {
		unmatched = fmt.Errorf("no session of machine %s starts with %q", cfg.Machine, rep.Unmatched[0])
	}
	return a.printCompaction(rep, dryRun, unmatched)
}

// printCompaction prints a line per generation and, unless something
// failed, the totals (a failed run's read as done); its error says what
// could not be done, unmatched the prefixes that matched nothing.
func (a *app) printCompaction(rep *compact.MachineReport, dryRun bool, unmatched error) error {
	var before, after, streams, failed, skipped, denied int
	var uploaded int64
	merging := map[string]bool{} // the sessions a dry run would merge chunks of
	for _, s := range rep.Streams {
		where := fmt.Sprintf("%s %s generation %s", s.Stream.SessionID, s.Stream.Name, s.Generation)
		switch {
		case remote.DeleteDenied(s.Err):
			denied++
		case s.Err != nil:
			failed++
			fmt.Fprintf(a.stderr, "ompsync: %s\n", oneLine(s.Err.Error()))
		case s.Skipped != "":
			skipped++
			fmt.Fprintf(a.report(), "%s: %s\n", where, s.Skipped)
		case dryRun:
			merging[s.Stream.SessionID] = true
			fmt.Fprintf(a.report(), "%s: %s\n", where, planText(s.Plan))
		default:
			streams++
			res := s.Result
			fmt.Fprintf(a.report(), "%s: %d chunks -> %d, uploaded %s\n", where, res.Before, res.After, progress.Size(res.Uploaded))
			before, after, uploaded = before+res.Before, after+res.After, uploaded+res.Uploaded
		}
	}
	switch {
	case denied > 0:
		return errNoDelete
	case failed > 0:
		return fmt.Errorf("%d generations could not be compacted (see above); what was merged is safe", failed)
	case unmatched != nil:
		return unmatched
	case dryRun:
		fmt.Fprintf(a.report(), "dry run: %d of %d sessions have chunks to merge; nothing changed\n", len(merging), rep.Sessions)
	default:
		fmt.Fprintf(a.report(), "compacted %d generations of %d sessions: %d chunks -> %d, uploaded %s; %d generations had nothing to merge\n",
			streams, rep.Sessions, before, after, progress.Size(uploaded), skipped)
	}
	return nil
}

// planText is what a dry run would do to one generation.
func planText(pl compact.Plan) string {
	s := fmt.Sprintf("would merge %d of %d chunks (%s)", pl.Merge.Chunks, pl.Chunks, progress.Size(pl.Merge.End-pl.Merge.Start))
	if pl.Redundant > 0 {
		s += fmt.Sprintf(", remove %d redundant", pl.Redundant)
	}
	return s
}

// compactAgents compacts this machine's sessions of every agent the
// remote holds, as one report: a prefix is unmatched when no agent's
// session starts with it.
func (a *app) compactAgents(ctx context.Context, places []restore.Place, cfg *config.Config, prefixes []string, p compact.Policy, dryRun bool) (*compact.MachineReport, error) {
	all := &compact.MachineReport{}
	unmatched := map[string]int{}
	var first error
	found := 0
	for _, pl := range places {
		rep, err := a.compactPlace(ctx, cfg, pl, prefixes, p, dryRun)
		if err != nil {
			if len(places) > 1 && strings.Contains(err.Error(), "has no catalog") {
				first = cmp.Or(first, err)
				continue // this machine backs up other agents only
			}
			return nil, err
		}
		found++
		all.Sessions += rep.Sessions
		all.Streams = append(all.Streams, rep.Streams...)
		for _, u := range rep.Unmatched {
			unmatched[u]++
		}
	}
	if found == 0 && first != nil {
		return nil, first
	}
	for _, pre := range prefixes {
		if unmatched[pre] == found {
			all.Unmatched = append(all.Unmatched, pre)
		}
	}
	return all, nil
}

// compactPlace compacts this machine's sessions of one agent, holding its
// maintenance lock unless dryRun.
func (a *app) compactPlace(ctx context.Context, cfg *config.Config, pl restore.Place, prefixes []string, p compact.Policy, dryRun bool) (*compact.MachineReport, error) {
	if !dryRun {
		unlock, err := a.lockMaintenance(ctx, stateDirOf(cfg, pl.Store.Name()))
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	return compact.Machine(ctx, pl.Repo, cfg.Machine, prefixes, p, dryRun)
}

// maintainedPlaces is how compact and prune start: the configuration, the
// remote checked to hold a repository, and the agents it holds.
func (a *app) maintainedPlaces(ctx context.Context) (*config.Config, *repo.Repo, []restore.Place, error) {
	cfg, err := a.config()
	if err != nil {
		return nil, nil, nil, err
	}
	r, places, _, err := readRepo(ctx, cfg, &meter{})
	return cfg, r, places, err
}

// lockMaintenance takes the maintenance lock of an agent's state dir, which
// its agent holds while it compacts or prunes: two maintainers deleting at
// once could each delete a chunk the other relies on. It waits, saying so.
func (a *app) lockMaintenance(ctx context.Context, stateDir string) (unlock func(), err error) {
	return agent.LockMaintenance(ctx, stateDir, func(pid string) {
		fmt.Fprintf(a.stderr, "ompsync: waiting for ompsync (pid %s) to finish compacting or pruning this machine's backups\n", pid)
	})
}
