package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/ompsync/ompsync/atomicfile"
	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/repo"
)

const keygenLong = `Make a new age identity (X25519 private key) for encrypting backups, write it
to a file only you can read (mode 0600), and print its recipient (public key)
on standard output. An existing file is never overwritten.

Point encryption.identity_file at the file: that machine then encrypts to the
key and can read what it wrote. Machines that should only write can get the
recipient in encryption.recipients instead. Keep a copy of the file somewhere
safe: without it the backups cannot be read by anyone.

--out defaults to encryption.identity_file when it is set, else age.key next to
the config file (~/.config/ompsync/age.key).`

const keygenExample = `  ompsync keygen --out ~/.config/ompsync/age.key
  # then in ~/.config/ompsync/config.yaml:
  #   encryption:
  #     identity_file: ~/.config/ompsync/age.key`

func newKeygenCmd(a *app) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:     "keygen",
		Short:   "Make a new encryption key and print its public key",
		Long:    keygenLong,
		Example: keygenExample,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runKeygen(out)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file to write the identity to (must not exist)")
	return cmd
}

// runKeygen writes a new identity to out (by default encryption.identity_file,
// else age.key beside the config file) and prints its recipient.
func (a *app) runKeygen(out string) error {
	if out == "" {
		cfg, err := a.config()
		if err != nil {
			return err
		}
		if out = cfg.Encryption.IdentityFile; out == "" {
			file, _, err := config.FilePath(a.loadOptions())
			if err != nil {
				return err
			}
			out = filepath.Join(filepath.Dir(file), "age.key")
		}
	}
	data, recipient, fp, err := crypt.NewIdentityFile(time.Now())
	if err != nil {
		return err
	}
	err = writePrivate(out, data, false)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists; keygen never overwrites a key (it may be the only one that reads your backups): choose another --out", out)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, recipient)
	fmt.Fprintf(a.stderr, "ompsync: wrote a new identity to %s (fingerprint %s); keep a copy somewhere safe:\n"+
		"without it nobody can read what is encrypted to it. To use it, set in the config file:\n"+
		"  encryption:\n    identity_file: %s\n", out, fp, out)
	return nil
}

const rekeyLong = `Re-encrypt every object on the remote to the current encryption settings
(encryption.recipients, or the keys of encryption.identity_file or
encryption.passphrase_file), after a key was added, replaced or revoked. It
also encrypts a remote that holds plaintext backups.

Each object is read, decrypted with the configured identities (so
encryption.identity_file must still hold an old key as well as a new one),
encrypted again, checked to decrypt to the same bytes, and only then put in
place of the old one under the same key. The repository's marker lists the
new recipients from the start and the old ones as pending until every object
is done; agents with the new settings encrypt to the new keys at once.

An interrupted rekey (even killed) resumes where it stopped: run it again.
Progress is kept in state_dir/rekey.json.`

// rekeyJournal is what an interrupted rekey resumes from.
type rekeyJournal struct {
	Recipients []string `json:"recipients"`
	After      string   `json:"after"`
}

func newRekeyCmd(a *app) *cobra.Command {
	var force bool
	var settle time.Duration
	cmd := &cobra.Command{
		Use:   "rekey",
		Short: "Re-encrypt every object on the remote to the current keys",
		Long:  rekeyLong,
		Example: `  # replace the old key: keep both identities in the file while rekey runs
  cat new.key old.key > ~/.config/ompsync/age.key
  OMPSYNC_ENCRYPTION_RECIPIENTS=age1new... ompsync rekey`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runRekey(cmd.Context(), repo.RekeyOptions{Force: force, Settle: settle, Settling: a.settling})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "re-encrypt every object even when the remote says none is pending")
	// How long after changing the marker rekey looks at the objects a last
	// time: writers trust the marker they read for repo.MarkerTTL. Tests
	// lower it.
	cmd.Flags().DurationVar(&settle, "settle", repo.MarkerTTL+5*time.Second, "wait this long after changing keys before listing the objects (writers trust the keys they read for 15 s)")
	_ = cmd.Flags().MarkHidden("settle")
	return cmd
}

// settling says, but with -q, why rekey pauses before it lists the
// objects.
func (a *app) settling(d time.Duration) {
	if !a.quiet {
		fmt.Fprintf(a.stderr, "ompsync: waiting %s for other machines' writes to settle (see 'Changing keys' in docs/SECURITY.md)\n", d)
	}
}

// runRekey re-encrypts the remote to the configured keys, resuming from
// the state dir's journal when an earlier run with the same keys stopped.
func (a *app) runRekey(ctx context.Context, opts repo.RekeyOptions) error {
	cfg, err := a.config()
	if err != nil {
		return err
	}
	if !cfg.Encryption.Enabled() {
		return errors.New("rekey encrypts to the configured keys, and none are: set encryption.recipients, encryption.identity_file or encryption.passphrase_file")
	}
	log := a.logger(cfg)
	r, target, err := openRekey(ctx, cfg, log)
	if err != nil {
		return err
	}
	journalPath := filepath.Join(cfg.StateDir, "rekey.json")
	j := readRekeyJournal(journalPath, target, log)
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	// The agent's compaction deletes chunks rekey may be rewriting.
	unlock, err := a.lockMaintenance(ctx, cfg.StateDir)
	if err != nil {
		return err
	}
	defer unlock()
	opts.After, opts.Progress = j.After, j.progress(journalPath, log)
	prog, err := r.Rekey(ctx, opts)
	if err := endRekeyJournal(journalPath, err); err != nil {
		return err
	}
	if prog.Nothing {
		fmt.Fprintf(a.report(), "nothing to rekey: every object is already encrypted to %s (--force re-encrypts anyway)\n", repo.Fingerprints(target))
		return nil
	}
	fmt.Fprintf(a.report(), "re-encrypted %d objects (%d bytes) to %s\n", prog.Objects, prog.Bytes, repo.Fingerprints(target))
	return nil
}

// openRekey opens the remote to rekey, and the keys it is to be encrypted
// to.
func openRekey(ctx context.Context, cfg *config.Config, log *slog.Logger) (*repo.Repo, []string, error) {
	r, err := openRepo(ctx, cfg, &meter{})
	if err != nil {
		return nil, nil, err
	}
	r.SetLog(log)
	enc, ok := r.Codec().(repo.Encrypter)
	if !ok {
		return nil, nil, errors.New("rekey: the codec does not encrypt")
	}
	return r, slices.Sorted(slices.Values(enc.Keys().Recipients)), nil
}

// endRekeyJournal removes the journal when rekey is done, or when the keys
// changed under it (start over next time), and returns rekey's error.
func endRekeyJournal(path string, err error) error {
	if err != nil && !errors.Is(err, repo.ErrRecipientsChanged) {
		return err // the journal says where to resume
	}
	if rmErr := os.Remove(path); err == nil && rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
		return rmErr
	}
	return err
}

// readRekeyJournal is the journal at path when an earlier rekey to the
// same keys stopped, else a new one.
func readRekeyJournal(path string, target []string, log *slog.Logger) *rekeyJournal {
	var j rekeyJournal
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &j) == nil && slices.Equal(j.Recipients, target) {
		log.Info("resuming an interrupted rekey", "after", j.After)
		return &j
	}
	return &rekeyJournal{Recipients: target}
}

// progress is repo.RekeyOptions.Progress: it writes the journal at path
// after each object, and logs every thousand.
func (j *rekeyJournal) progress(path string, log *slog.Logger) func(repo.RekeyProgress) error {
	lastLog := 0
	return func(p repo.RekeyProgress) error {
		j.After = p.After
		b, _ := json.Marshal(j)
		if p.Objects-lastLog >= 1000 {
			lastLog = p.Objects
			log.Info("rekey progress", "objects", p.Objects, "after", p.After)
		}
		return atomicfile.Write(path, b, atomicfile.Options{})
	}
}
