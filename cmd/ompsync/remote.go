package main

import (
	"context"
	"fmt"

	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
)

// openRepo opens the configured remote as an ompsync repository.
func openRepo(ctx context.Context, cfg *config.Config) (*repo.Repo, error) {
	client, err := backend.Open(ctx, cfg.Remote, backend.S3Options{
		Client:          cfg.S3.Client,
		Endpoint:        cfg.S3.Endpoint,
		Region:          cfg.S3.Region,
		PathStyle:       cfg.S3.PathStyle,
		AccessKeyID:     cfg.S3.AccessKeyID,
		SecretAccessKey: cfg.S3.SecretAccessKey,
	})
	if err != nil {
		return nil, fmt.Errorf("open remote: %w", err)
	}
	return repo.New(client, repo.NewZstd()), nil
}
