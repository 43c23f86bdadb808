package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ompsync/ompsync/restore"
	"github.com/ompsync/ompsync/transcript"
)

// catFlags are cat's flags: those restore takes set its options directly.
type catFlags struct {
	restore.Options
	text, thinking bool
	at, agent      string
}

func newCatCmd(a *app) *cobra.Command {
	var f catFlags
	cmd := &cobra.Command{
		Use:   "cat ID-PREFIX",
		Short: "Print a session from the remote, verified, writing nothing",
		Long: `Print a session's bytes as the remote holds them, after checking every hash:
exactly what 'ompsync restore' would write into an empty agent dir (every
machine's copy merged; --machine takes one machine's, --generation an older
generation, see 'ompsync history'; --at TIME the session as the backup held it
then). Nothing is printed until every byte is verified: a damaged copy prints
nothing and exits 1. A copy past its first MiB waits in a temp file in $TMPDIR
(memory stays a few MiB whatever the session's size), removed when done;
nothing else is written anywhere.

--text prints a readable transcript instead: each entry's time, role and
text, tool calls and their results summed up in a line each, the model's
reasoning left out unless --thinking.`,
		Example: `  ompsync cat 01a113d2 > session.jsonl
  ompsync cat 01a113d2 --text | less
  ompsync cat 01a113d2 --at 3h > three-hours-ago.jsonl
  ompsync cat 01a113d2 --machine laptop --generation 18ecbc17b1295105 | wc -c`,
		Args: idPrefixes(0, cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runCat(cmd.Context(), f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Machine, "machine", "", "that machine's copy alone")
	addAgentFlag(fl, &f.agent)
	fl.StringVar(&f.Generation, "generation", "", "that generation instead of the newest (16 hex digits, see 'ompsync history')")
	fl.BoolVar(&f.text, "text", false, "a readable transcript: time, role and text of each entry")
	fl.BoolVar(&f.thinking, "thinking", false, "with --text, also the model's reasoning")
	addLatestFlag(fl, &f.Latest)
	addAtFlag(fl, &f.at)
	return cmd
}

func (a *app) runCat(ctx context.Context, f catFlags, prefix string) error {
	if f.thinking && !f.text {
		return usagef("--thinking goes with --text")
	}
	opts := f.Options
	opts.Choose = a.chooser()
	if err := pickCopy(&opts, f.Generation, f.at); err != nil {
		return err
	}
	cfg, places, problems, err := a.readPlaces(ctx, f.Machine, f.agent)
	if err != nil {
		return err
	}
	opts.Parallel, opts.MaxMergeSize = cfg.Transfers, cfg.Restore.MaxMergeSize.Bytes()
	pl, id, err := restore.Find(ctx, places, prefix, opts)
	if err != nil {
		return err
	}
	opts.Store = pl.Store
	pr, more, err := restore.Cat(ctx, pl.Repo, id, opts)
	problems = append(problems, more...)
	a.warn(problems)
	if err != nil {
		return err
	}
	defer pr.Close()
	// The verified session, or with --text its transcript.
	if f.text {
		err = pr.Transcript(a.stdout, transcript.RenderOptions{Thinking: f.thinking, Location: time.Local})
	} else {
		_, err = pr.WriteTo(a.stdout)
	}
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("some catalogs could not be read; a machine's copy may be missing from what was printed")
	}
	return nil
}
