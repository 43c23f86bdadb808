package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
	"github.com/ompsync/ompsync/store"
)

// addAgentFlag adds --agent, which narrows a reading command to one
// agent's sessions.
func addAgentFlag(fl *pflag.FlagSet, p *string) {
	fl.StringVar(p, "agent", "", "only this agent's sessions: "+strings.Join(config.AgentNames(), ", "))
}

// readPlaces is how the commands that read sessions start: readRemote, and
// the agents the remote holds sessions of, each with its folder (or only
// the one --agent names). The problems are the agents this ompsync does
// not know.
func (a *app) readPlaces(ctx context.Context, machine, agentName string) (*config.Config, []restore.Place, []string, error) {
	if agentName != "" && !slices.Contains(config.AgentNames(), agentName) {
		return nil, nil, nil, usagef("--agent %q: want one of %s", agentName, strings.Join(config.AgentNames(), ", "))
	}
	// The agents' LIST goes out with the marker's GET (readRemote has
	// loaded the configuration by then).
	var places []restore.Place
	var problems []string
	cfg, r, err := a.readRemote(ctx, machine, func(ctx context.Context, r *repo.Repo) error {
		cfg, err := a.config()
		if err != nil {
			return err
		}
		places, problems, err = restore.Places(ctx, r, cfg.AgentDirOf)
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	if agentName == "" {
		return cfg, places, problems, nil
	}
	for _, pl := range places {
		if pl.Store.Name() == agentName {
			return cfg, []restore.Place{pl}, nil, nil
		}
	}
	// Nothing of that agent on the remote: an empty place says so as
	// every command does for no sessions.
	st, err := store.ByName(agentName)
	if err != nil {
		return nil, nil, nil, err
	}
	ar, err := r.Agent(agentName)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, []restore.Place{{Store: st, Repo: ar, Dir: cfg.AgentDirOf(agentName)}}, nil, nil
}

// stateDirOf is where the backup agent of one agent keeps its state: omp's
// is state_dir itself (as before other agents), another's a folder in it.
func stateDirOf(cfg *config.Config, agentName string) string {
	if agentName == repo.DefaultAgent {
		return cfg.StateDir
	}
	return filepath.Join(cfg.StateDir, "agents", agentName)
}
