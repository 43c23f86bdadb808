package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/repo"
)

type statusOptions struct {
	json, wide bool
	maxLag     time.Duration
}

func newStatusCmd(a *app) *cobra.Command {
	var o statusOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show how far the backup of each watched file is behind",
		Long: `Show, for each watched file, its local size against the bytes uploaded, when
it was last fully uploaded, and how long its oldest pending byte may have
waited: since the later of that upload and the agent's last pass that left
nothing to do (so a session idle for a day and written to a moment ago has
waited a moment, and one written while the agent was stopped has waited since
it stopped). A session whose pending bytes are a last line without its
newline says "(last line unfinished)": the agent uploads whole lines, so it
waits for the writer to finish the line. Reads the agent's state; works while
the agent runs. Warns when the agent's last pull could not read another
machine's sessions (say, with a key that is not one of the repository's).

Exit status 1 when any file's oldest pending byte is older than --max-lag, so
monitoring can run 'ompsync status' as a check; also when the state describes
another remote than the one configured (another bucket, prefix or folder, or
a remote recreated since, by the repository id in its ompsync.json): nothing
is known to be uploaded to this one until the agent has checked every file
against it; and when the repository refused the agent's uploads (its
encryption does not match this machine's: the message says what to set).`,
		Example: `  ompsync status
  ompsync status --json --max-lag 10m`,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runStatus(cmd.Context(), o) },
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "one JSON object per file per line")
	cmd.Flags().BoolVar(&o.wide, "wide", false, "print long paths whole")
	cmd.Flags().DurationVar(&o.maxLag, "max-lag", 5*time.Minute, "exit 1 when a pending byte has waited longer than this")
	return cmd
}

func (a *app) runStatus(ctx context.Context, o statusOptions) error {
	files, refused, err := a.statusFiles(ctx)
	if err != nil {
		return err
	}
	if err := printList(a.stdout, o.json, files, func() { printStatus(a.stdout, files, o.wide) }); err != nil {
		return err
	}
	return lagError(files, o.maxLag, refused)
}

// statusFiles is every watched file of every agent backed up, from the
// agents' state, checked to describe the configured remote, and the
// repository's refusal of uploads an agent recorded, if any.
func (a *app) statusFiles(ctx context.Context) (files []agent.FileStatus, refused string, err error) {
	cfg, err := a.config()
	if err != nil {
		return nil, "", err
	}
	ws, err := cfg.BackedUp()
	if err != nil {
		return nil, "", err
	}
	for _, w := range ws {
		stateDir := stateDirOf(cfg, w.Store.Name())
		fs, err := agent.Status(agent.StatusOptions{AgentDir: w.Dir, StateDir: stateDir, Store: w.Store,
			Include: cfg.Include, Exclude: cfg.Exclude, Now: time.Now()})
		if err != nil {
			return nil, "", fmt.Errorf("%s%w", agentPrefix(w.Store.Name(), len(ws)), err)
		}
		if r := agent.Refused(stateDir); r != "" && refused == "" {
			refused = agentPrefix(w.Store.Name(), len(ws)) + r
		}
		if u := agent.Unpulled(stateDir); u != "" {
			fmt.Fprintf(a.stderr, "ompsync: warning: %s%s\n", agentPrefix(w.Store.Name(), len(ws)), u)
		}
		if len(ws) > 1 { // paths of several agents: each under its folder
			for i := range fs {
				fs[i].Path = w.Store.Name() + ":" + fs[i].Path
			}
		}
		files = append(files, fs...)
		// Files uploaded to another remote are not uploaded to this one.
		if err := a.checkStateRemote(ctx, cfg, stateDir); err != nil {
			return nil, "", fmt.Errorf("%s%w", agentPrefix(w.Store.Name(), len(ws)), err)
		}
	}
	return files, refused, nil
}

func printStatus(w io.Writer, files []agent.FileStatus, wide bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tLOCAL\tUPLOADED\tLAST SYNCED\tPENDING FOR")
	for _, f := range files {
		age := "-"
		if f.Pending > 0 {
			age = f.PendingAge.Truncate(time.Second).String()
		}
		if f.UnfinishedLine {
			age += " (last line unfinished)"
		}
		synced := "never"
		if f.State == agent.StateNew {
			synced = "not recorded yet"
		}
		if !f.LastSynced.IsZero() {
			synced = f.LastSynced.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", clipPath(f.Path, pathWidth, wide), f.LocalSize, f.Uploaded, synced, age)
	}
	tw.Flush()
}

// lagError is status's exit: an error when a file's oldest pending byte
// has waited longer than maxLag, naming whose doing it likely is, or when
// the repository refused the agent's uploads (refused): nothing goes up
// then, however little waits now.
func lagError(files []agent.FileStatus, maxLag time.Duration, refused string) error {
	var behind, unfinished int
	for _, f := range files {
		if f.Pending > 0 && f.PendingAge > maxLag {
			behind++
			if f.UnfinishedLine {
				unfinished++
			}
		}
	}
	switch {
	case refused != "":
		return fmt.Errorf("the repository refuses this machine's uploads, so nothing is uploaded: %s", refused)
	case behind > 0 && unfinished == behind:
		// Not the agent's or the remote's doing: the writer's.
		return fmt.Errorf("%d file(s) end in a line without its newline, pending for more than %s: ompsync uploads whole lines, "+
			"so it waits for the program writing the file to finish it; one that stays means that program stopped mid-line", behind, maxLag)
	case behind > 0:
		return fmt.Errorf("%d file(s) have bytes pending for more than %s: is the agent running and the remote reachable?", behind, maxLag)
	}
	return nil
}

// checkStateRemote fails when the agent's state describes another remote
// than the configured one: by the remote's name, and (one GET) by the
// repository id in its marker. A remote that cannot be read is a warning:
// status works from the state alone.
func (a *app) checkStateRemote(ctx context.Context, cfg *config.Config, stateDir string) error {
	o, err := agent.StateOrigin(stateDir)
	if err != nil {
		return err
	}
	here := remoteName(cfg)
	const after = "nothing is known to be uploaded there yet; the agent checks every file against it and uploads what is missing when it next starts"
	if o.Remote != "" && o.Remote != here {
		return fmt.Errorf("the agent's state describes another remote (%s), not %s: %s", o.Remote, here, after)
	}
	if o.RepoID == "" {
		return nil // written before ompsync recorded it
	}
	if err := backedUpThere(cfg); err != nil {
		return err // not "cannot read the remote": it is not there
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	r, err := openRepo(ctx, cfg, &meter{})
	var m *repo.Marker
	dir, isFile := remoteFolder(cfg)
	if err == nil {
		m, err = r.ReadMarker(ctx)
	}
	switch {
	case err != nil:
		fmt.Fprintf(a.stderr, "ompsync: warning: cannot read the remote to check that the state describes it: %s\n", oneLine(err.Error()))
	case m == nil && o.Remote == here && isFile:
		return agent.RemoteFolderEmpty(dir, o.RepoID, stateDir) // as the agent refuses it
	case m == nil:
		return fmt.Errorf("the remote %s holds no ompsync repository, though the agent's state says its files were uploaded there: %s", here, after)
	case m.ID != o.RepoID:
		return fmt.Errorf("the remote %s is not the repository the agent's state describes (it was recreated or replaced since): %s", here, after)
	}
	return nil
}
