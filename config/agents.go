package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ompsync/ompsync/store"
)

// AgentNames are the coding agents whose sessions ompsync knows, omp first
// (the names of package store's stores).
func AgentNames() []string {
	var names []string
	for _, s := range store.Known() {
		names = append(names, s.Name())
	}
	return names
}

// folderKeys are the keys of the folders of the agents other than omp
// (omp's is agent_dir): <name>.dir, its default from the agent's Home.
func folderKeys() []key {
	var out []key
	for _, s := range store.Known() {
		name, h := s.Name(), s.Home()
		if name == "omp" {
			continue
		}
		k := name + ".dir"
		out = append(out, key{
			name: k,
			help: fmt.Sprintf("%s; sessions are under <%s>/%s (default: $%s, else ~/%s)",
				h.Title, k, s.Roots()[0], h.Env, h.Dir),
			fieldOf: func(c *Config) any { return c.folder(name) },
			defFunc: envOrHome(h.Env, h.Dir),
			derived: true,
			path:    true,
		})
	}
	return out
}

// folder is where the <name>.dir key's value is kept.
func (c *Config) folder(name string) *string {
	if c.folders == nil {
		c.folders = map[string]*string{}
	}
	p, ok := c.folders[name]
	if !ok {
		p = new(string)
		c.folders[name] = p
	}
	return p
}

// AgentFolder is one agent's store and the folder its sessions live in.
type AgentFolder struct {
	Store *store.Store
	Dir   string
}

// AgentDirOf is the configured folder of the agent called name.
func (c *Config) AgentDirOf(name string) string {
	if name == "omp" {
		return c.AgentDir
	}
	if p := c.folders[name]; p != nil {
		return *p
	}
	return ""
}

// BackedUp are the agents the backup agent watches, with their folders:
// those agents lists, or by default every known agent whose folder exists
// (omp when none does, so that a new machine waits for omp's folder as
// before). By default an agent whose folder is another's is left out: omp
// and pi both honour $PI_CODING_AGENT_DIR, and one folder is backed up
// once, as omp's (whose format covers pi's). Listed explicitly, two agents
// in one folder are an error.
func (c *Config) BackedUp() ([]AgentFolder, error) {
	var out []AgentFolder
	if len(c.Agents) > 0 {
		for _, name := range c.Agents {
			dir := c.AgentDirOf(name)
			for _, o := range out {
				if o.Dir == dir {
					return nil, fmt.Errorf("agents: %s and %s both have the folder %s (%s, %s): give one its own folder, or leave one out of agents",
						o.Store.Name(), name, dir, FolderKey(o.Store.Name()), FolderKey(name))
				}
			}
			st, err := store.ByName(name)
			if err != nil {
				return nil, fmt.Errorf("agents: %w", err)
			}
			out = append(out, AgentFolder{Store: st, Dir: dir})
		}
		return out, nil
	}
	for _, st := range store.Known() {
		dir := c.AgentDirOf(st.Name())
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		if slices.ContainsFunc(out, func(o AgentFolder) bool { return o.Dir == dir }) {
			continue
		}
		out = append(out, AgentFolder{Store: st, Dir: dir})
	}
	if len(out) == 0 {
		out = append(out, AgentFolder{Store: store.OMP(), Dir: c.AgentDir})
	}
	return out, nil
}

// FolderKey names the key that sets an agent's folder.
func FolderKey(name string) string {
	if name == "omp" {
		return "agent_dir"
	}
	return name + ".dir"
}

// checkAgents accepts known agent names, each once.
func checkAgents(v any) (any, error) {
	names := v.([]string)
	for i, n := range names {
		if !slices.Contains(AgentNames(), n) {
			return nil, fmt.Errorf("unknown agent %q; known: %s", n, strings.Join(AgentNames(), ", "))
		}
		if slices.Contains(names[:i], n) {
			return nil, fmt.Errorf("agent %q is listed twice", n)
		}
	}
	return v, nil
}

// envOrHome is the folder an environment variable names, else one under
// the home folder (written with ~, expanded as every path key is).
func envOrHome(env, rel string) func(*environ) (string, error) {
	return func(e *environ) (string, error) {
		if d, ok := e.defaultFrom(env); ok {
			return d, nil
		}
		return "~/" + filepath.ToSlash(rel), nil
	}
}
