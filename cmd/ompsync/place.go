package main

import (
	"context"
	"fmt"
	"os"

	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/project"
)

// placer places other machines' sessions on this one (pull and restore):
// in this machine's checkout of the same repository, found under
// projects.roots (scanned at most once an hour, cached in the state dir),
// else by path_map and the --path-map pairs in extra. Where the scan
// stopped short is returned, for the user.
func placer(ctx context.Context, cfg *config.Config, extra []string) (*project.Placer, []string, error) {
	pl := &project.Placer{Machine: cfg.Machine}
	pl.Home, _ = os.UserHomeDir()
	for _, s := range append(append([]string(nil), cfg.PathMap...), extra...) {
		m, err := project.ParseMap(s)
		if err != nil {
			return nil, nil, err
		}
		pl.Maps = append(pl.Maps, m)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("state dir: %w", err)
	}
	pl.Index = project.LoadIndex(ctx, cfg.StateDir, cfg.Projects.Roots, project.DefaultLimits())
	return pl, pl.Index.Problems, nil
}
