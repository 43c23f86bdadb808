package agent

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
)

// Three identities are checked (docs/RELIABILITY.md): the state belongs to
// one repository (the marker's id), a machine name to one state dir at a
// time (the instance the catalog names as its writer), and "deleted"
// means this state saw the file and then saw it go (FileState.Unseen,
// recordMissing).
const (
	// heartbeatEvery: a running agent writes its machine's recent object at
	// least this often, even with nothing new, and reads back who wrote
	// it last; so an agent that is running can be told from one that is
	// gone.
	heartbeatEvery = 10 * time.Minute
	// inUseWindow: a machine name whose catalog another instance wrote this
	// recently is in use; a new state dir does not take it over unasked.
	inUseWindow = 3 * heartbeatEvery
)

// ErrMachineInUse means another ompsync writes this machine name's catalog
// on this remote. Nothing was written.
var ErrMachineInUse = errors.New("machine name in use by another ompsync")

// machineInUse is the one-line error naming the other agent and the fixes.
func (a *Agent) machineInUse(w *repo.Writer, at time.Time, since bool) error {
	when, how := "last wrote", max(a.now().Sub(at).Round(time.Second), 0).String()+" ago"
	if since {
		when, how = "has written", "since this one last did"
	}
	return fmt.Errorf("%w: machine %q is in use by another ompsync on this remote (host %q, state dir %q; it %s this machine's catalog %s): "+
		"set machine (--machine, OMPSYNC_MACHINE) to a name of its own, or, if that ompsync is gone for good (a reinstalled machine, an old disk), "+
		"take the name over with 'ompsync agent --take-over-machine'",
		ErrMachineInUse, a.opts.Machine, w.Host, w.StateDir, when, how)
}

// RemoteFolderEmpty is the one-line error for a file remote at dir that
// holds no repository, though the state in stateDir backed up to
// repository id there.
func RemoteFolderEmpty(dir, id, stateDir string) error {
	return fmt.Errorf("remote folder %s holds no ompsync repository, though this machine backed up to repository %s there: is its disk mounted? "+
		"To start a new repository there, move the state dir %s aside: the next run uploads everything again", dir, short(id), stateDir)
}

// checkRemoteHolds refuses, before anything is written, a file remote
// that holds no repository though this state backed up to one under the
// same name: a folder on a disk that is not mounted (its mount point, or
// a folder made again below it), where a new repository would take every
// session while the user believes them on the other disk. A bucket or
// prefix with no marker is a remote deleted and made again on purpose
// (there is no mount point to miss): distrust reconciles and uploads
// everything to it.
func (a *Agent) checkRemoteHolds(ctx context.Context) error {
	st := a.state
	if st.RepoID == "" || st.Remote == "" || st.Remote != a.opts.Remote {
		return nil
	}
	loc, err := backend.ParseURL(st.Remote)
	if err != nil || loc.Scheme != "file" {
		return nil
	}
	m, err := a.repo.ReadMarker(ctx)
	if err != nil || m != nil {
		return err
	}
	return RemoteFolderEmpty(loc.Dir, st.RepoID, a.opts.StateDir)
}

// hostID is a hash of the host's machine-id (never the id itself, which
// systemd asks to keep private), or "" where there is none.
func hostID() string {
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		b, err := os.ReadFile(p)
		if id := strings.TrimSpace(string(b)); err == nil && id != "" {
			sum := sha256.Sum256([]byte("ompsync host id\n" + id))
			return hex.EncodeToString(sum[:16])
		}
	}
	return ""
}

// foreign reports whether w is an agent other than this one and the ones
// it took the name over from.
func (a *Agent) foreign(w *repo.Writer) bool {
	// A catalog without a writer was written by an older ompsync or by a
	// command (prune): no one to tell apart.
	return w != nil && w.Instance != a.state.Instance && !slices.Contains(a.state.Displaced, w.Instance)
}

// sameInstallation reports whether w is an earlier state of this very
// state dir on this host: the state was lost or damaged, and rebuilding it
// is no takeover.
func (a *Agent) sameInstallation(w *repo.Writer) bool {
	return w.StateDir == a.opts.StateDir && w.Host == a.opts.Hostname &&
		(w.HostID == "" || a.opts.HostID == "" || w.HostID == a.opts.HostID)
}

// established reports whether this state has written the machine's
// catalog on this repository: another writer since then took the name.
func (a *Agent) established() bool {
	return a.state.RepoID != "" && a.state.RepoID == a.repo.ID() && !a.state.CatalogAt.IsZero()
}

// claimMachine decides, before anything is written, whether this agent may
// write the machine's catalog that w last wrote at at (w nil: no catalog,
// or one without a writer).
func (a *Agent) claimMachine(w *repo.Writer, at time.Time) error {
	if !a.foreign(w) {
		return nil
	}
	switch {
	case a.sameInstallation(w):
		a.log.Info("this machine's catalog was written by an earlier state of this state dir; going on from the remote", "machine", a.opts.Machine)
	case a.opts.TakeOverMachine:
		a.log.Warn("taking over the machine name: from now on this state dir writes its catalog; sessions this machine has not seen stay as they are on the remote",
			"machine", a.opts.Machine, "from_host", w.Host, "from_state_dir", w.StateDir, "last_written", at)
	case a.established():
		return a.machineInUse(w, at, true)
	case a.now().Sub(at) < inUseWindow:
		return a.machineInUse(w, at, false)
	default:
		// A new state dir, and the other agent silent for longer than a
		// running one ever is: a reinstalled machine taking its name back.
		a.log.Info("taking over the machine name, whose last writer has been silent for a while; sessions this machine has not seen stay as they are on the remote",
			"machine", a.opts.Machine, "from_host", w.Host, "from_state_dir", w.StateDir, "last_written", at)
	}
	a.state.Displaced = append(a.state.Displaced, w.Instance)
	a.state.changed.all = true
	return nil
}

// What start learnt of this machine's catalog.
type catalogSeen int

const (
	catalogRead catalogSeen = iota
	catalogMissing
	catalogUnreadable // encrypted, and only the recipients' keys given
)

// distrust says why a loaded state cannot be taken at its word on this
// remote ("" when it can), and whether it describes another repository.
func (a *Agent) distrust(cat catalogSeen, w *repo.Writer, at time.Time) (why string, otherRepo bool) {
	st := a.state
	id := a.repo.ID()
	if st.RepoID != "" && st.RepoID != id {
		return fmt.Sprintf("the local state describes another remote (%s, repository %s), not this one (repository %s)", cmp.Or(st.Remote, "unknown"), short(st.RepoID), short(id)), true
	}
	uploaded := false
	for _, f := range st.Streams {
		uploaded = uploaded || !f.Unseen && f.Generation != "" && f.Offset > 0
	}
	switch {
	case !uploaded || cat == catalogUnreadable:
		return "", false
	case cat == catalogMissing:
		return "the remote holds no catalog of this machine, though the local state says its files were uploaded", false
	case st.RepoID == id && at.Before(st.CatalogAt):
		return fmt.Sprintf("this machine's catalog on the remote (written %s) is older than the one this state wrote (%s)",
			at.Format(time.RFC3339), st.CatalogAt.Format(time.RFC3339)), false
	case w != nil && w.Instance != st.Instance:
		return fmt.Sprintf("this machine's catalog was last written by another ompsync (host %q, state dir %q)", w.Host, w.StateDir), false
	}
	return "", false
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return cmp.Or(id, "unknown")
}

// reconcileAll stops trusting what the state says was uploaded: every
// stream this machine holds is matched against the remote before its next
// upload, as after a lost state (adoptSource), so what the remote lacks is
// uploaded and what it holds is not sent again. A state of another
// repository also forgets the deleted sessions (their bytes are on the
// other remote), the blobs and what sync merged.
func (a *Agent) reconcileAll(why string, otherRepo bool) {
	a.log.Warn("not trusting the local state: checking every file against the remote and uploading what it lacks", "why", why)
	for k, f := range a.state.Streams {
		if f.Unseen {
			continue
		}
		if otherRepo && f.State == repo.StateDeleted {
			a.state.forget(k)
			continue
		}
		f.Adopt, f.stale = true, false
		f.Confirmed, f.ConfirmedAt = 0, time.Time{}
	}
	if otherRepo {
		clear(a.state.Blobs)
		clear(a.state.Seen)
		a.state.CatalogAt = time.Time{} // not established there yet
	} else {
		a.blobsToConfirm.Add(1) // list the blobs with the first pass
	}
	a.catBase, a.catRecent = nil, nil // the catalog is rewritten whole
	a.state.changed.all = true
}

// checkOwner reads, once per heartbeat, who last wrote this machine's
// catalog: an agent that finds another writer (one that took the name
// while this one was asleep or cut off) stops before writing anything more.
func (a *Agent) checkOwner(ctx context.Context) error {
	w, at, err := a.repo.CatalogWriter(ctx, a.opts.Machine)
	switch {
	case errors.Is(err, remote.ErrNotFound), errors.Is(err, repo.ErrNoKey):
		// Lost (confirmCatalog puts it again), or unreadable with only the
		// recipients' keys: nothing says another agent wrote it.
	case err != nil && (remote.IsTransient(err) || ctx.Err() != nil):
		return err // a stop signal's cancel is no failure to report
	case err != nil:
		a.log.Warn("cannot read who last wrote this machine's catalog; checking again later", "err", err)
	case a.foreign(w):
		return a.machineInUse(w, at, true)
	}
	a.ownerCheckedAt = a.now()
	return nil
}

// wrote records a catalog or recent object this agent put.
func (a *Agent) wrote(at time.Time) {
	a.catWrittenAt = at
	first := a.state.CatalogAt.IsZero()
	a.state.CatalogAt = at // saved with the next whole save; not worth a write of its own
	if first {
		// Saved at once the first time: from now on another writer of
		// this catalog took the name from this state (established).
		a.state.changed.all = true
		a.saveState("could not save state")
	}
}

func (a *Agent) heartbeatDue() bool { return a.now().Sub(a.catWrittenAt) >= heartbeatEvery }

func (a *Agent) ownerCheckDue() bool { return a.now().Sub(a.ownerCheckedAt) >= heartbeatEvery }
