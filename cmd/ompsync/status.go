package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ompsync/ompsync/agent"
)

func newStatusCmd(a *app) *cobra.Command {
	var asJSON bool
	var maxLag time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show how far the backup of each watched file is behind",
		Long: `Show, for each watched file, its local size against the bytes uploaded, when
it was last fully uploaded, and how long its oldest pending byte may have
waited. Reads the agent's state; works while the agent runs.

Exit status 1 when any file's oldest pending byte is older than --max-lag, so
monitoring can run 'ompsync status' as a check.`,
		Example: `  ompsync status
  ompsync status --json --max-lag 10m`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			files, err := agent.Status(cfg.AgentDir, cfg.StateDir, time.Now())
			if err != nil {
				return err
			}
			var behind int
			for _, f := range files {
				if f.Pending > 0 && f.PendingAge > maxLag {
					behind++
				}
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				for _, f := range files {
					if err := enc.Encode(f); err != nil {
						return err
					}
				}
			} else {
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PATH\tLOCAL\tUPLOADED\tLAST SYNCED\tPENDING FOR")
				for _, f := range files {
					age := "-"
					if f.Pending > 0 {
						age = f.PendingAge.Truncate(time.Second).String()
					}
					synced := "never"
					if !f.LastSynced.IsZero() {
						synced = f.LastSynced.Local().Format(time.DateTime)
					}
					fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", f.Path, f.LocalSize, f.Uploaded, synced, age)
				}
				tw.Flush()
			}
			if behind > 0 {
				return fmt.Errorf("%d file(s) have bytes pending for more than %s: is the agent running and the remote reachable?", behind, maxLag)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per file per line")
	cmd.Flags().DurationVar(&maxLag, "max-lag", 5*time.Minute, "exit 1 when a pending byte has waited longer than this")
	return cmd
}
