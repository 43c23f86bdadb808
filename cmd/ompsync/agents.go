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
	"github.com/ompsync/ompsync/safename"
	"github.com/ompsync/ompsync/store"
)

// addAgentFlag adds --agent, which narrows a reading command to one
// agent's sessions.
func addAgentFlag(fl *pflag.FlagSet, p *string) {
	fl.StringVar(p, "agent", "", "only this agent's sessions: "+strings.Join(config.AgentNames(), ", "))
}

// readPlaces is how the commands that read sessions start: check --agent
// and --machine, load the configuration, open the remote for reading
// (readRepo), and list the agents it holds sessions of, each with its
// folder (or only the one --agent names). The problems are the agents
// this ompsync does not know.
func (a *app) readPlaces(ctx context.Context, machine, agentName string) (*config.Config, []restore.Place, []string, error) {
	if agentName != "" && !slices.Contains(config.AgentNames(), agentName) {
		return nil, nil, nil, usagef("--agent %q: want one of %s", agentName, strings.Join(config.AgentNames(), ", "))
	}
	if machine != "" && !safename.Machine(machine) {
		return nil, nil, nil, usagef("--machine %q is not a machine name", machine)
	}
	cfg, err := a.config()
	if err != nil {
		return nil, nil, nil, err
	}
	m := a.meters()
	if m.log == nil { // its retries, at debug
		m.log = a.logger(cfg)
	}
	r, places, problems, err := readRepo(ctx, cfg, m)
	if err != nil {
		return nil, nil, nil, err
	}
	if agentName != "" {
		problems = nil // of agents other than the one asked for
		if places, err = agentPlace(r, cfg, places, agentName); err != nil {
			return nil, nil, nil, err
		}
	}
	return cfg, places, problems, nil
}

// agentPlace is the place of the agent --agent names: an empty one when
// the remote holds nothing of it, which says so as every command does for
// no sessions.
func agentPlace(r *repo.Repo, cfg *config.Config, places []restore.Place, agentName string) ([]restore.Place, error) {
	for _, pl := range places {
		if pl.Store.Name() == agentName {
			return []restore.Place{pl}, nil
		}
	}
	st, err := store.ByName(agentName)
	if err != nil {
		return nil, err
	}
	ar, err := r.Agent(agentName)
	if err != nil {
		return nil, err
	}
	return []restore.Place{{Store: st, Repo: ar, Dir: cfg.AgentDirOf(agentName)}}, nil
}

// stateDirOf is where the backup agent of one agent keeps its state: omp's
// is state_dir itself (as before other agents), another's a folder in it.
func stateDirOf(cfg *config.Config, agentName string) string {
	if agentName == repo.DefaultAgent {
		return cfg.StateDir
	}
	return filepath.Join(cfg.StateDir, "agents", agentName)
}
