package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
)

// openRepo opens the configured remote as an ompsync repository, with the
// codec the encryption settings call for, counting requests and bytes in m.
func openRepo(ctx context.Context, cfg *config.Config, m *meter) (*repo.Repo, error) {
	if err := makeDefaultRemote(cfg); err != nil {
		return nil, err
	}
	if err := backedUpThere(cfg); err != nil {
		return nil, err
	}
	raw, err := backend.OpenRaw(ctx, cfg.Remote, cfg.S3)
	if err != nil {
		return nil, fmt.Errorf("open remote: %w", err)
	}
	client := remote.WithRetry(m.client(raw), m.retryPolicy())
	codec, err := newCodec(ctx, client, cfg.Encryption)
	if err != nil {
		return nil, err
	}
	return repo.New(client, m.codec(codec)), nil
}

// backedUpThere refuses a file remote whose folder is missing, in a
// parent that is there, where an agent's state records backing up to a
// repository there: its disk is not mounted (the mount point is the
// parent), and the folder must not be made again on the disk below. (A
// missing parent the backend refuses itself.)
func backedUpThere(cfg *config.Config) error {
	dir, ok := remoteFolder(cfg)
	if !ok {
		return nil
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := os.Stat(filepath.Dir(dir)); err != nil {
		return nil
	}
	ws, _ := cfg.BackedUp()
	for _, w := range ws {
		stateDir := stateDirOf(cfg, w.Store.Name())
		if st, err := agent.LoadState(stateDir); err == nil && st != nil && st.RepoID != "" && st.Remote == remoteName(cfg) {
			return agent.RemoteFolderEmpty(dir, st.RepoID, stateDir)
		}
	}
	return nil
}

// makeDefaultRemote creates the default remote folder with its parents
// (~/.local/share may not exist yet); a configured one is the backend's,
// which makes only its last folder, so as not to make again a folder of
// a disk that is not mounted.
func makeDefaultRemote(cfg *config.Config) error {
	if cfg.Source("remote").Kind != config.FromDefault {
		return nil
	}
	dir, ok := remoteFolder(cfg)
	if !ok {
		return nil // the backend says what is wrong
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create the default remote folder: %w", err)
	}
	return nil
}

// newCodec is zstd alone without encryption, else zstd then age. In
// passphrase mode the repository's key is in its marker, so it is read
// first.
func newCodec(ctx context.Context, client remote.Client, e config.Encryption) (repo.Codec, error) {
	if !e.Enabled() {
		return repo.NewZstd(), nil
	}
	opts := crypt.Options{Recipients: e.Recipients, IdentityFile: e.IdentityFile, PassphraseFile: e.PassphraseFile}
	if e.PassphraseFile != "" {
		m, err := repo.New(client, nil).ReadMarker(ctx)
		if err != nil {
			return nil, err
		}
		if m != nil && m.Encryption != nil {
			opts.PassphraseKey = m.Encryption.PassphraseKey
		}
	}
	c, err := crypt.New(opts)
	if err != nil {
		return nil, fmt.Errorf("encryption: %w", err)
	}
	return c, nil
}

// meters is what this run asked of the remote.
func (a *app) meters() *meter {
	if a.meter == nil {
		a.meter = &meter{}
	}
	return a.meter
}

// readRepo opens the configured remote for reading, counting in m, checks
// that it is a repository this version understands, and lists the agents
// it holds (restore.Places: their places and problems). It creates
// nothing: only the agent starts a repository, so a mistyped remote is an
// error, not an empty listing and a new folder. The agents' LIST goes out
// with the marker's GET, so that the two requests take one round trip, not
// two (30 ms each on a home line); the marker's verdict comes first, and
// the listing's error is returned only when the marker was good.
func readRepo(ctx context.Context, cfg *config.Config, m *meter) (*repo.Repo, []restore.Place, []string, error) {
	if dir, ok := remoteFolder(cfg); ok {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil, cmp.Or(backedUpThere(cfg), noRepository(cfg, "the folder does not exist"))
		}
	}
	r, err := openRepo(ctx, cfg, m)
	if err != nil {
		return nil, nil, nil, err
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var places []restore.Place
	var problems []string
	var lerr error
	var wg sync.WaitGroup
	wg.Go(func() { places, problems, lerr = restore.Places(lctx, r, cfg.AgentDirOf) })
	if err = checkRepository(ctx, cfg, r); err != nil {
		cancel()
	}
	wg.Wait()
	if err = cmp.Or(err, lerr); err != nil {
		return nil, nil, nil, err
	}
	return r, places, problems, nil
}

// checkRepository checks that r holds a repository this version
// understands.
func checkRepository(ctx context.Context, cfg *config.Config, r *repo.Repo) error {
	marker, err := r.ReadMarker(ctx)
	if err != nil {
		return err
	}
	if marker == nil {
		// A repository written before the marker existed has objects in
		// the format's folder (v1/, repo/keys.go).
		for _, err := range r.Client().List(ctx, "v1/", remote.ListOptions{}) {
			if err != nil {
				return fmt.Errorf("list v1/: %w", err)
			}
			return nil
		}
		if name, err := r.Foreign(ctx); err == nil && name != "" {
			// The agent refuses to make a repository beside other data:
			// no use suggesting it.
			return fmt.Errorf("no ompsync repository at %s: it holds other data (%q is there); check remote (%s): a backup goes to a folder, bucket or prefix of its own",
				remoteAt(cfg), name, cfg.Source("remote"))
		}
		return noRepository(cfg, "it holds no ompsync.json and no backups")
	}
	return r.CheckMarker(marker)
}

// noRepository says that the configured remote holds no repository, and
// where the setting came from.
func noRepository(cfg *config.Config, why string) error {
	return fmt.Errorf("no ompsync repository at %s: %s; check remote (%s), or run 'ompsync agent' to back up there first", remoteAt(cfg), why, cfg.Source("remote"))
}

// remoteAt names the remote as the user knows it: a folder's path.
func remoteAt(cfg *config.Config) string {
	if dir, ok := remoteFolder(cfg); ok {
		return dir
	}
	return cfg.Remote
}

// remoteFolder is the folder of a file remote; false for any other, or a
// remote that does not parse (the backend says what is wrong).
func remoteFolder(cfg *config.Config) (string, bool) {
	loc, err := backend.ParseURL(cfg.Remote)
	return loc.Dir, err == nil && loc.Scheme == "file"
}

// remoteName is the remote as the state records it and messages name it:
// the URL, and the S3 endpoint when one is set (the same bucket name on
// another server is another remote). It never holds credentials.
func remoteName(cfg *config.Config) string {
	if cfg.S3.Endpoint != "" && !strings.HasPrefix(cfg.Remote, "file://") {
		return cfg.Remote + " at " + cfg.S3.Endpoint
	}
	return cfg.Remote
}
