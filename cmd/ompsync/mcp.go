package main

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/ompsync/ompsync/recall"
	"github.com/ompsync/ompsync/restore"
	"github.com/ompsync/ompsync/search"
)

const mcpLong = `Serve every session the remote holds, on every machine, to a coding agent
as a Model Context Protocol server on stdin and stdout, read-only: the agent
can search past sessions and read them, decrypted on this machine, as
'ompsync grep', 'ls', 'cat --text' and 'history' do (the same remote, keys,
search cache under state_dir/search and bounds). Each result holds at most
32 KiB, paged with a cursor; mcp.redact (on by default) masks what looks
like a credential in it. Add it to an agent as the command 'ompsync mcp'
(see README, Recall).

Tools, and what each costs on a large backup:
  search           ` + recall.SearchHelp + `
  list_sessions    ` + recall.ListHelp + `
  read_session     ` + recall.ReadHelp + `
  session_history  ` + recall.HistoryHelp

func newMCPCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "mcp",
		Short:   "Serve the backup to coding agents over MCP (stdio, read-only)",
		Long:    mcpLong,
		Example: `  claude mcp add ompsync -- ompsync mcp`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			src := recall.Source{
				Places: func(ctx context.Context, machine, agent string) ([]restore.Place, []string, error) {
					_, places, problems, err := a.readPlaces(ctx, machine, agent)
					return places, problems, err
				},
				Cache:        func(agent string) (*search.Cache, error) { return openSearchCache(cfg, agent) },
				Parallel:     cfg.Transfers,
				MaxMergeSize: cfg.Restore.MaxMergeSize.Bytes(),
				Redact:       cfg.MCP.Redact,
			}
			return recall.NewServer(src, readBuildInfo().Version).Run(cmd.Context(), recall.Drained(&mcp.StdioTransport{}))
		},
	}
}
