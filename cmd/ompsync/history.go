package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ompsync/ompsync/progress"
	"github.com/ompsync/ompsync/restore"
)

// historyFlags are history's flags: those restore takes set its options
// directly.
type historyFlags struct {
	restore.Options
	asJSON, wide bool
	agent        string
}

func newHistoryCmd(a *app) *cobra.Command {
	var f historyFlags
	cmd := &cobra.Command{
		Use:   "history ID-PREFIX",
		Short: "Every copy of a session the remote holds, per machine and generation",
		Long: `List every copy the remote holds of one session: for each machine, each
generation (a run in which the file only grew; omp's rewrites, a file that
shrank or changed in place begin a new one, and the old one is kept until
retention removes it), with when it began and why, its size, title and path,
when its last bytes were uploaded (as the upload marks say: a rekey or a
compaction that rewrote the objects since does not change it),
and whether it is the machine's current copy and what that machine's catalog
says of the session (present, deleted, archived).

A copy is restored or printed with 'ompsync restore --machine M --generation G'
or 'ompsync cat --machine M --generation G'. Changes nothing.`,
		Example: `  ompsync history 01a113d2
  ompsync history 01a113d2 --json | jq -r '.copies[] | .machine + " " + .generation'`,
		Args: idPrefixes(0, cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runHistory(cmd.Context(), f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.asJSON, "json", false, "print the history as one JSON object")
	fl.BoolVar(&f.wide, "wide", false, "print long titles, folders and paths whole")
	fl.StringVar(&f.Machine, "machine", "", "only this machine's copies")
	addAgentFlag(fl, &f.agent)
	addLatestFlag(fl, &f.Latest)
	return cmd
}

func (a *app) runHistory(ctx context.Context, f historyFlags, prefix string) error {
	_, places, problems, err := a.readPlaces(ctx, f.Machine, f.agent)
	if err != nil {
		return err
	}
	opts := f.Options
	opts.Choose = a.chooser()
	pl, id, err := restore.Find(ctx, places, prefix, opts)
	if err != nil {
		return err
	}
	opts.Store = pl.Store
	h, more, err := restore.History(ctx, pl.Repo, id, opts)
	problems = append(problems, more...)
	a.warn(problems)
	if err != nil {
		return err
	}
	// With --json, the history is one object.
	if err := printList(a.stdout, f.asJSON, []*restore.SessionHistory{h}, func() { printHistory(a.stdout, h, f.wide) }); err != nil {
		return err
	}
	a.warn(h.Problems)
	if len(h.Problems) > 0 || len(problems) > 0 {
		return fmt.Errorf("the remote has problems (see above); the history is incomplete")
	}
	return nil
}

func printHistory(w io.Writer, h *restore.SessionHistory, wide bool) {
	fmt.Fprintf(w, "session %s: %s\n", h.ID, count(len(h.Copies), "copy", "copies"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tGENERATION\tSTARTED\tWHY\tSIZE\tLAST UPLOAD\tSTATE\tTITLE\tPROJECT\tCWD\tPATH")
	for _, c := range h.Copies {
		state := "superseded"
		switch {
		case c.Incomplete:
			state = "incomplete (no meta)"
		case c.Current && (c.State == "" || c.State == "present"):
			state = "current"
		case c.Current:
			state = "current, " + c.State
		}
		why, title, path, cwd := cmp.Or(c.Reason, "-"), cmp.Or(oneLine(c.Title), "-"), cmp.Or(c.Path, "-"), cmp.Or(c.Cwd, "-")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Machine, c.Generation, localTime(c.Started), why,
			progress.Size(c.Bytes), localTime(c.LastUpload), state, clip(title, titleWidth, wide), clipPath(projectText(c.Project), projectWidth, wide),
			clipPath(cwd, folderWidth, wide), clipPath(path, pathWidth, wide))
	}
	tw.Flush()
}

func localTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}
