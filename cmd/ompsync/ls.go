package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ompsync/ompsync/progress"
	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/restore"
)

const lsLong = `List every session the remote holds, newest first: its id, the agent that
wrote it (omp, pi, claude, codex), title, project (its git repository and
the folder in it, or its folder under the home), working folder, the
machines that hold it, its size, when it last changed, and its state
(present, archived, or deleted: a deleted session stays on the remote and
can be restored). Long titles and folders are cut to keep a line within 200
columns; --wide prints them whole, with each session's file path.

Reads only the machines' catalogs: one LIST and one GET per machine, however
many sessions there are.`

type lsFlags struct {
	asJSON, wide   bool
	machine, agent string
}

func newLsCmd(a *app) *cobra.Command {
	var f lsFlags
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the sessions the remote holds, newest first",
		Long:  lsLong,
		Example: `  ompsync ls
  ompsync ls --machine laptop --json | jq -r .id`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runLs(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print one JSON object per session per line")
	cmd.Flags().BoolVar(&f.wide, "wide", false, "print every column whole, and each session's file path (a line may then be wider than the terminal)")
	cmd.Flags().StringVar(&f.machine, "machine", "", "only the sessions this machine holds")
	addAgentFlag(cmd.Flags(), &f.agent)
	return cmd
}

func (a *app) runLs(ctx context.Context, f lsFlags) error {
	_, places, problems, err := a.readPlaces(ctx, f.machine, f.agent)
	if err != nil {
		return err
	}
	list, more, err := restore.ListAll(ctx, places, f.machine)
	if err != nil {
		return err
	}
	problems = append(problems, more...)
	if err := printList(a.stdout, f.asJSON, list, func() { printSessions(a.stdout, list, f.wide) }); err != nil {
		return err
	}
	a.warn(problems)
	if len(problems) > 0 {
		return fmt.Errorf("some catalogs could not be read; the list is incomplete")
	}
	return nil
}

// projectText is a session's project as ls and history show it: its
// repository and the folder inside it, or its folder under the home; "-"
// when none was recorded.
func projectText(p *project.ID) string {
	if p == nil || p.String() == "" {
		return "-"
	}
	return p.String()
}

// printSessions is ls's table: a line per session, columns clipped to keep
// a line within 200 columns unless wide.
func printSessions(w io.Writer, list []restore.Listing, wide bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "ID\tAGENT\tLAST CHANGE\tSTATE\tSIZE\tMACHINES\tTITLE\tPROJECT\tCWD"
	if wide {
		head += "\tPATH"
	}
	fmt.Fprintln(tw, head)
	for _, l := range list {
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", l.ID, l.Agent, l.Mtime.Local().Format(time.DateTime), l.State,
			progress.Size(l.Size), clip(strings.Join(l.Machines, ","), machinesWidth, wide), clip(oneLine(cmp.Or(l.Title, "-")), titleWidth, wide),
			clipPath(projectText(l.Project), projectWidth, wide), clipPath(cmp.Or(l.Cwd, "-"), folderWidth, wide))
		if wide {
			line += "\t" + l.Path
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}
