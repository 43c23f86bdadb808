package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
)

const pruneLong = `Delete from the remote what retention no longer keeps of this machine's
sessions (the machine setting):

  - generations superseded longer than retention.generations ago (an older
    copy of a session omp rewrote); the newest generation always stays, and
    so does an older one holding entries the newest lacks (the file was cut
    short or edited: 'ompsync restore --generation GEN ID' brings it back);
  - every object of sessions deleted on this machine longer than
    retention.deleted ago (0, the default, keeps them forever).

A generation another machine's copy still refers to stays. The agent prunes
once a day by itself. Each line names a generation and how many objects and
bytes go; --dry-run prints the same lines and deletes nothing. While the
agent (or another compact, prune or rekey) is compacting or pruning this
machine's backups, it waits for it, saying so.`

func newPruneCmd(a *app) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete what retention no longer keeps of this machine's backups",
		Long:  pruneLong,
		Example: `  ompsync prune --dry-run
  ompsync prune --retention-generations 168h`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runPrune(cmd.Context(), dryRun)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be deleted; delete nothing")
	config.AddFlags(cmd.Flags(), "retention.generations", "retention.deleted")
	return cmd
}

func (a *app) runPrune(ctx context.Context, dryRun bool) error {
	cfg, r, places, err := a.maintainedPlaces(ctx)
	if err != nil {
		return err
	}
	ret := cfg.Retention
	if ret.Generations > 0 || ret.Deleted > 0 {
		if err := machineCataloged(ctx, r, places, cfg.Machine); err != nil {
			return err
		}
	}
	var left []string
	for _, pl := range places {
		prefix := agentPrefix(pl.Store.Name(), len(places))
		why, err := a.pruneAgent(ctx, cfg, pl.Repo, pl.Store, stateDirOf(cfg, pl.Store.Name()), prefix, ret, dryRun)
		if err != nil {
			return fmt.Errorf("%s%w", prefix, noDelete(err))
		}
		if why != "" {
			left = append(left, prefix+why)
		}
	}
	if len(left) > 0 {
		// Exit 0 says retention was applied; it was not all.
		return errors.New(strings.Join(left, "; "))
	}
	return nil
}

// machineCataloged fails when no agent's repository holds a catalog of
// machine: a typo in the machine setting would otherwise prune nothing and
// exit 0.
func machineCataloged(ctx context.Context, r *repo.Repo, places []restore.Place, machine string) error {
	for _, pl := range places {
		_, _, err := pl.Repo.GetCatalogParts(ctx, machine)
		if err == nil || errors.Is(err, repo.ErrNoKey) {
			return nil
		}
		if !errors.Is(err, remote.ErrNotFound) {
			return fmt.Errorf("read the catalog of %s: %w", machine, err)
		}
	}
	known, err := r.Machines(ctx)
	if err != nil {
		return fmt.Errorf("machine %q has no catalog on the remote: nothing to prune; is the machine setting right?", machine)
	}
	return fmt.Errorf("machine %q has no catalog on the remote: nothing to prune; is the machine setting right? The remote holds machines %s",
		machine, strings.Join(known, ", "))
}

// pruneAgent prunes this machine's sessions of one agent (its repository
// r, its store st, its agent's state dir); prefix names the agent in each
// line. why, when not empty, is what of retention could not be done.
func (a *app) pruneAgent(ctx context.Context, cfg *config.Config, r *repo.Repo, st compact.Lines, stateDir, prefix string, ret compact.Retention, dryRun bool) (why string, err error) {
	if !dryRun {
		unlock, err := a.lockMaintenance(ctx, stateDir)
		if err != nil {
			return "", err
		}
		defer unlock()
	}
	rep, err := compact.Prune(ctx, r, st, cfg.Machine, ret, time.Now(), dryRun)
	printPrune(a.report(), rep, prefix)
	if err != nil {
		return "", err
	}
	if dryRun {
		fmt.Fprintf(a.report(), "%sdry run: would delete %d objects, %s, of %d generations; nothing deleted\n", prefix, rep.Objects, progress.Size(rep.Bytes), len(rep.Items))
		return "", nil
	}
	fmt.Fprintf(a.report(), "%sdeleted %d objects, %s, of %d generations\n", prefix, rep.Objects, progress.Size(rep.Bytes), len(rep.Items))
	if len(rep.Sessions) == 0 {
		return "", nil
	}
	// The agent replaces the catalog from its state: only while no
	// agent runs may the catalog be changed behind its back.
	unlock, err := agent.TryLockState(stateDir)
	if err != nil {
		return fmt.Sprintf("%d expired deleted sessions stay listed in the catalog (%v): the agent's daily prune drops them, or stop the agent and run prune again", len(rep.Sessions), err), nil
	}
	defer unlock()
	if err := compact.DropSessions(ctx, r, cfg.Machine, rep.Sessions, time.Now()); err != nil {
		return "", err
	}
	fmt.Fprintf(a.report(), "%sremoved %d deleted sessions from the catalog\n", prefix, len(rep.Sessions))
	return "", nil
}

// printPrune is a line per generation prune deletes or keeps.
func printPrune(w io.Writer, rep *compact.PruneReport, prefix string) {
	if rep == nil {
		return
	}
	for _, it := range rep.Items {
		fmt.Fprintf(w, "%s%s %s generation %s: %s %s: %d objects, %s\n", prefix, it.Stream.SessionID, it.Stream.Name,
			it.Generation, it.Reason, it.Since.Local().Format(time.DateOnly), len(it.Keys), progress.Size(it.Bytes))
	}
	for _, k := range rep.Kept {
		fmt.Fprintf(w, "%s%s %s generation %s: kept, %s\n", prefix, k.Stream.SessionID, k.Stream.Name, k.Generation, k.Why)
	}
}
