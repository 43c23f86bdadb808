package repo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/safename"
)

// RekeyOptions configure Rekey.
type RekeyOptions struct {
	// After resumes an interrupted rekey: objects whose keys sort up to and
	// including After are done.
	After string
	// Progress is called after each batch of objects with how far Rekey
	// has come, so a journal can record After. An error stops Rekey.
	Progress func(RekeyProgress) error
	// Parallel bounds objects in flight. Default 4.
	Parallel int
	// MaxBlobSize bounds one blob. Default 512 MiB.
	MaxBlobSize int64
	// Force re-encrypts even when the marker says nothing is pending.
	Force bool
	// Settle is how long rekey waits, after it changes the marker or finds
	// a change under way, before it lists the objects: a writer that read
	// the marker just before (it trusts it for MarkerTTL) may still be
	// putting an object encrypted the old way, and only a listing after
	// its last put sees that put. 0 waits not.
	Settle time.Duration
	// Settling, when set, is called as the Settle wait begins: a rekey
	// that says nothing for 20 s looks hung.
	Settling func(time.Duration)
}

// RekeyProgress is how far a rekey has come.
type RekeyProgress struct {
	// After is the last key of the last finished batch: every object up to
	// it is encrypted to the current recipients.
	After string
	// Objects and Bytes count what this run re-encrypted and wrote.
	Objects int
	Bytes   int64
	// Skipped are keys this version does not know and left as they were.
	Skipped []string
	// Nothing is set when there was nothing to do.
	Nothing bool
}

// ErrRecipientsChanged means another writer changed the repository's
// recipients while Rekey ran: objects it wrote may be encrypted to others,
// so a journal of this run must be dropped and rekey run again from the
// start.
var ErrRecipientsChanged = errors.New("the repository's recipients changed while rekey ran (an agent with other encryption.recipients?): " +
	"give every machine the same recipients and run 'ompsync rekey' again")

// rekeyBatch is how many objects go between two journal entries.
const rekeyBatch = 64

// Rekey re-encrypts every object to the codec's current recipients, and
// records them in the marker: first as the recipients, with the earlier
// ones pending, and, once every object is done, with nothing pending.
//
// Object keys are stable, so each object is replaced in place by a put of
// the same key, after its new bytes have been checked to open to the same
// plaintext; the old bytes are never removed before that, and there is
// nothing else to remove. Rekey converts a plaintext repository too. It
// refuses to run unless the codec can open what it writes.
func (r *Repo) Rekey(ctx context.Context, opts RekeyOptions) (RekeyProgress, error) {
	var prog RekeyProgress
	enc, ok := r.codec.(Encrypter)
	if !ok {
		return prog, errors.New("rekey encrypts to encryption.recipients, and no encryption is configured")
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	if opts.MaxBlobSize <= 0 {
		opts.MaxBlobSize = 512 << 20
	}
	keys := enc.Keys()
	if err := opensWhatItSeals(enc); err != nil {
		return prog, err
	}
	nothing, err := r.rekeyStart(ctx, opts, keys)
	if err != nil || nothing {
		prog.Nothing = nothing
		return prog, err
	}
	// Wait before listing, not before a last look: a stale writer may put
	// an object the listing has passed, encrypted to as many recipients
	// as now, and the header of an X25519 stanza does not say whose. A
	// run that did not change the marker waits too: the one that did may
	// have been stopped seconds ago.
	if opts.Settling != nil && opts.Settle > 0 {
		opts.Settling(opts.Settle)
	}
	t := time.NewTimer(opts.Settle)
	select {
	case <-ctx.Done():
		t.Stop()
		return prog, ctx.Err()
	case <-t.C:
	}
	run := &rekeyRun{r: r, opts: opts, prog: RekeyProgress{After: opts.After}}
	var batch []string
	for obj, err := range r.client.List(ctx, root, remote.ListOptions{StartAfter: opts.After}) {
		if err != nil {
			return run.prog, fmt.Errorf("list %s: %w", root, err)
		}
		if batch = append(batch, obj.Key); len(batch) == rekeyBatch {
			if err := run.flush(ctx, batch); err != nil {
				return run.prog, err
			}
			batch = batch[:0]
		}
	}
	if err := run.flush(ctx, batch); err != nil {
		return run.prog, err
	}
	// The last look: objects a machine without the new keys put (in
	// plaintext, or to another number of recipients) while the pass ran.
	if err := r.rekeySweep(ctx, run, keys); err != nil {
		return run.prog, err
	}
	if len(run.prog.Skipped) > 0 {
		return run.prog, fmt.Errorf("rekey left %d object(s) it does not know as they were (first: %s); the marker still lists earlier keys as pending",
			len(run.prog.Skipped), run.prog.Skipped[0])
	}
	return run.prog, r.rekeyDone(ctx, keys)
}

// opensWhatItSeals refuses a codec that cannot open what it writes: rekey
// writes only what it can check.
func opensWhatItSeals(enc Encrypter) error {
	probe := []byte("ompsync rekey probe")
	sealed, err := enc.Seal(probe)
	if err != nil {
		return fmt.Errorf("rekey: %w", err)
	}
	if got, err := enc.Open(sealed, int64(len(probe))); err != nil || !bytes.Equal(got, probe) {
		return fmt.Errorf("rekey writes only what it can check, and no configured identity opens what it writes: "+
			"put the identity of one of the recipients (%s) in encryption.identity_file", strings.Join(enc.Keys().Recipients, ", "))
	}
	return nil
}

// rekeyStart writes the marker for a rekey to keys, when it changes, or
// says there is nothing to do: a fresh run (no opts.After) that finds every
// object encrypted to keys and the marker saying so.
func (r *Repo) rekeyStart(ctx context.Context, opts RekeyOptions, keys Keys) (nothing bool, err error) {
	m, err := r.ReadMarker(ctx)
	if err != nil {
		return false, err
	}
	nm, changed, err := r.rekeyMarker(ctx, m, keys)
	if err != nil {
		return false, err
	}
	if opts.After == "" {
		// The marker's pending list is what writers said; the objects
		// are what is there (a writer without the key may have put
		// plaintext since): look at each one's first bytes.
		stale, plain, err := r.scanObjects(ctx, len(keys.Recipients))
		if err != nil {
			return false, err
		}
		if plain > 0 && !slices.Contains(nm.Encryption.Pending, PendingPlaintext) {
			cp := *nm
			ce := *nm.Encryption
			ce.Pending = sorted(append(slices.Clone(ce.Pending), PendingPlaintext))
			cp.Encryption = &ce
			nm, changed = &cp, true
		}
		if !changed && len(nm.Encryption.Pending) == 0 && !opts.Force && len(stale) == 0 {
			return true, nil
		}
	}
	if !changed {
		return false, nil
	}
	// Before the marker changes, make sure the old objects open: a rekey
	// without the old keys must not leave the marker claiming recipients
	// nothing was re-encrypted to. (Plaintext found where the marker says
	// none is pending changes only the pending list: nothing to check.)
	newRecipients := m.encryption() == nil || !sameSet(m.Encryption.Recipients, nm.Encryption.Recipients)
	if newRecipients {
		if err := r.openFirst(ctx, opts.After, opts.MaxBlobSize); err != nil {
			return false, err
		}
	}
	if err := r.WriteMarker(ctx, nm); err != nil {
		return false, err
	}
	if newRecipients {
		r.logRecipients(m.encryption(), nm.Encryption, "rekey")
	}
	return false, nil
}

// rekeySweep re-encrypts what a last look finds not yet encrypted to keys,
// a few times: a machine still writing the old way fails it.
func (r *Repo) rekeySweep(ctx context.Context, run *rekeyRun, keys Keys) error {
	for sweep := 0; ; sweep++ {
		stale, _, err := r.scanObjects(ctx, len(keys.Recipients))
		if err != nil {
			return err
		}
		if len(stale) == 0 {
			return nil
		}
		if sweep == 3 {
			return fmt.Errorf("rekey: %d object(s) are still not encrypted to %s after %d passes (first: %s): "+
				"a machine without these keys is still writing; give it the keys (encryption.identity_file), restart it, and run 'ompsync rekey' again",
				len(stale), Fingerprints(keys.Recipients), sweep+1, stale[0])
		}
		for batch := range slices.Chunk(stale, rekeyBatch) {
			if err := run.flush(ctx, batch); err != nil {
				return err
			}
		}
	}
}

// rekeyDone records in the marker that nothing is pending: what was is
// now revoked.
func (r *Repo) rekeyDone(ctx context.Context, keys Keys) error {
	// A writer with yet other recipients may have changed the marker
	// meanwhile; its objects are not done, so the pending list stays.
	now, err := r.ReadMarker(ctx)
	if err != nil {
		return err
	}
	if now.encryption() == nil || !sameSet(now.Encryption.Recipients, keys.Recipients) {
		return ErrRecipientsChanged
	}
	done := *now
	de := *now.Encryption
	// What was pending is now revoked: no object is encrypted to it, and
	// no writer may encrypt to it again.
	revoked := slices.DeleteFunc(slices.Clone(de.Pending), func(fp string) bool { return fp == PendingPlaintext || slices.Contains(de.Recipients, fp) })
	de.Removed = sorted(append(slices.Clone(de.Removed), revoked...))
	de.Pending = nil
	de.PassphraseKey = keys.PassphraseKey
	done.Encryption = &de
	return r.WriteMarker(ctx, &done)
}

// rekeyRun re-encrypts objects in batches (of rekeyBatch), opts.Parallel
// at a time, reporting progress after each batch (where a resumed run
// starts).
type rekeyRun struct {
	r    *Repo
	opts RekeyOptions
	prog RekeyProgress
}

// flush re-encrypts a batch of objects.
func (k *rekeyRun) flush(ctx context.Context, batch []string) error {
	if len(batch) == 0 {
		return nil
	}
	// The first error cancels the objects still in flight.
	g, bctx := errgroup.WithContext(ctx)
	g.SetLimit(k.opts.Parallel)
	var mu sync.Mutex
	for _, key := range batch {
		g.Go(func() error {
			n, skipped, err := k.r.reseal(bctx, key, k.opts.MaxBlobSize)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				return err
			case skipped:
				k.prog.Skipped = append(k.prog.Skipped, key)
			default:
				k.prog.Objects++
				k.prog.Bytes += int64(n)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	k.prog.After = batch[len(batch)-1]
	if k.opts.Progress != nil {
		return k.opts.Progress(k.prog)
	}
	return nil
}

// rekeyMarker is the marker for a rekey to keys: keys' recipients, with
// every earlier recipient (or plaintext) pending.
func (r *Repo) rekeyMarker(ctx context.Context, m *Marker, keys Keys) (*Marker, bool, error) {
	if m.encryption() != nil {
		return rotated(m, keys, func() error {
			return fmt.Errorf("%w: only a holder of a current key (%s) may change the repository's recipients, and encryption.identity_file holds none",
				ErrEncryptionMismatch, Fingerprints(m.Encryption.Recipients))
		})
	}
	first, err := r.firstObject(ctx)
	if err != nil {
		return nil, false, err
	}
	nm := newMarker(m, &keys)
	if first != "" {
		nm.Encryption.Pending = []string{PendingPlaintext}
	}
	return nm, true, nil
}

// openFirst opens the first object after after, to find out whether the
// configured identities open the repository's current objects.
func (r *Repo) openFirst(ctx context.Context, after string, maxBlob int64) error {
	for obj, err := range r.client.List(ctx, root, remote.ListOptions{StartAfter: after}) {
		if err != nil {
			return fmt.Errorf("list %s: %w", root, err)
		}
		limit, _, ok := objectLimit(obj.Key, maxBlob)
		if !ok || obj.Size == 0 { // unknown, or a blob link: nothing sealed
			continue
		}
		// Streamed: the first object is often a blob, of up to 512 MiB.
		rc, err := r.openStream(ctx, obj.Key, limit)
		if err == nil {
			_, err = io.CopyBuffer(io.Discard, rc, make([]byte, 256<<10))
			rc.Close()
		}
		if errors.Is(err, remote.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("rekey needs to read the objects there now, and cannot: %w", err)
		}
		return nil
	}
	return nil
}

// resealTries bounds how often reseal starts over on an object that
// changed under it; the waits between tries add up to about 2.5 s, longer
// than the agent's upload interval.
const resealTries = 8

// reseal re-encrypts one object in place and returns its new stored size.
// skipped reports a key this version does not know.
//
// An object a writer replaces (catalogs, meta, head) is replaced only over
// the version that was read: with a conditional put on the ETag read
// before it (IfMatch), or, where the remote has none, after a second read
// that proves nothing changed. One that changed is read again; one that
// keeps changing is left as its writer put it, with an error. A catalog is
// never put back to an older one.
func (r *Repo) reseal(ctx context.Context, key string, maxBlob int64) (n int, skipped bool, err error) {
	limit, mutable, ok := objectLimit(key, maxBlob)
	if !ok {
		return 0, true, nil
	}
	if isBlob(key) {
		n, err := r.resealBlob(ctx, key, limit)
		return int(n), false, err
	}
	wait := 20 * time.Millisecond
	for try := 1; ; try++ {
		n, done, err := r.resealOnce(ctx, key, limit, mutable)
		if done || err != nil {
			return n, false, err
		}
		// Changed since it was read: what is there now is newer, and is
		// what gets re-encrypted.
		if try == resealTries {
			return 0, false, fmt.Errorf("rekey: %s changed each of the %d times it was read (a writer replaces it that often); it was left as its writer put it: run 'ompsync rekey' again", key, resealTries)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, false, ctx.Err()
		case <-t.C:
		}
		wait *= 2
	}
}

// resealOnce is one try of reseal: done is false when the object changed
// since it was read, and was left as it is.
func (r *Repo) resealOnce(ctx context.Context, key string, limit int64, mutable bool) (n int, done bool, err error) {
	var opts remote.PutOptions
	if mutable {
		info, err := r.client.Stat(ctx, key)
		if err != nil {
			return 0, true, gone(err)
		}
		opts.IfMatch = info.ETag
	}
	sealed, err := r.getAll(ctx, key, sealedLimit(limit))
	if err != nil {
		return 0, true, gone(err)
	}
	plain, err := r.open(ctx, key, sealed, limit)
	if err != nil {
		return 0, true, fmt.Errorf("rekey: %w", err)
	}
	fresh, err := r.codec.Seal(plain)
	if err != nil {
		return 0, true, fmt.Errorf("rekey: seal %s: %w", key, err)
	}
	if back, err := r.codec.Open(fresh, limit); err != nil || !bytes.Equal(back, plain) {
		return 0, true, fmt.Errorf("rekey: %s: the re-encrypted object does not open to the same bytes (%v); left as it was", key, err)
	}
	if mutable && opts.IfMatch == "" {
		now, err := r.getAll(ctx, key, sealedLimit(limit))
		if err != nil {
			return 0, true, gone(err)
		}
		if !bytes.Equal(now, sealed) {
			return 0, false, nil
		}
	}
	err = r.client.Put(ctx, key, fresh, opts)
	switch {
	case err == nil:
		return len(fresh), true, nil
	case opts.IfMatch != "" && errors.Is(err, remote.ErrNotFound):
		return 0, true, nil // removed since it was read
	case opts.IfMatch != "" && errors.Is(err, remote.ErrPreconditionFailed):
		return 0, false, nil
	}
	return 0, true, fmt.Errorf("rekey: %w", err)
}

// gone is err, but nil for an object not found: removed since it was
// listed (retention), there is nothing to re-encrypt.
func gone(err error) error {
	if errors.Is(err, remote.ErrNotFound) {
		return nil
	}
	return err
}

// isBlob reports whether key is a blob's, or a blob link's (empty).
func isBlob(key string) bool { return strings.HasPrefix(layoutKey(key), root+"blobs/") }

// resealBlob is reseal for a blob, which is written once and may hold up
// to limit bytes (512 MiB): read whole, as the other objects are, it was
// held four times over. It streams instead, through a temp file of what it
// will put, sealed: a first read hashes and counts the plaintext, a second
// seals it as it arrives and must hash alike, and the sealed file must open
// back to the same hash before it replaces the blob. A blob link, empty
// (PutBlobLink), has nothing to re-encrypt.
func (r *Repo) resealBlob(ctx context.Context, key string, limit int64) (int64, error) {
	info, err := r.client.Stat(ctx, key)
	if err != nil {
		return 0, gone(err)
	}
	if info.Size == 0 {
		return 0, nil
	}
	read := func(into io.Writer) (sum [sha256.Size]byte, n int64, err error) {
		rc, err := r.openStream(ctx, key, limit)
		if err != nil {
			return sum, 0, err
		}
		defer rc.Close()
		h := sha256.New()
		n, err = io.CopyBuffer(io.MultiWriter(h, into), rc, make([]byte, 256<<10))
		if err != nil {
			return sum, n, fmt.Errorf("read %s: %w", key, err)
		}
		return [sha256.Size]byte(h.Sum(nil)), n, nil
	}
	want, size, err := read(io.Discard)
	if errors.Is(err, remote.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("rekey: %w", err)
	}
	// Sealed as the second read arrives; the temp file holds sealed bytes
	// only.
	var again [sha256.Size]byte
	var got int64
	tmp, n, err := r.sealTemp("", ".ompsync-rekey-*.sealed", size, func(w io.Writer) (int64, error) {
		var rerr error
		again, got, rerr = read(w)
		return got, rerr
	})
	if err != nil {
		return 0, fmt.Errorf("rekey: seal %s: %w", key, err)
	}
	defer removeTemp(tmp)
	if again != want || got != size {
		return 0, fmt.Errorf("rekey: %s read back other bytes the second time (%d bytes, then %d); left as it was", key, size, got)
	}
	back, err := r.codec.OpenReader(bufio.NewReaderSize(io.NewSectionReader(tmp, 0, n), 64<<10), size)
	if err == nil {
		h := sha256.New()
		var m int64
		m, err = io.CopyBuffer(h, back, make([]byte, 256<<10))
		back.Close()
		if err == nil && (m != size || [sha256.Size]byte(h.Sum(nil)) != want) {
			err = errors.New("other bytes")
		}
	}
	if err != nil {
		return 0, fmt.Errorf("rekey: %s: the re-encrypted object does not open to the same bytes (%v); left as it was", key, err)
	}
	if err := r.client.PutReader(ctx, key, tmp, n, remote.PutOptions{}); err != nil {
		return 0, fmt.Errorf("rekey: %w", err)
	}
	return n, nil
}

// objectLimit is the most plaintext an object under root may hold, by the
// kind its key names, and whether a writer may replace it (catalogs, meta,
// head; chunks and blobs are written once); ok is false for a key this
// version does not know.
func objectLimit(key string, maxBlob int64) (limit int64, mutable, ok bool) {
	key = layoutKey(key)
	if rest, ok := strings.CutPrefix(key, MachinesPrefix()); ok {
		m, leaf, _ := strings.Cut(rest, "/")
		return MaxCatalogSize, true, (leaf == "catalog" || leaf == "recent") && safename.Machine(m)
	}
	if name, ok := strings.CutPrefix(key, root+"blobs/"); ok {
		return maxBlob, false, name != "" && !strings.Contains(name, "/")
	}
	ref, err := ParseSessionKey(key)
	if err != nil {
		return 0, false, false
	}
	if ref.Object == "meta" || ref.Object == "head" {
		return MaxMetaSize, true, true
	}
	if checkChunkRange(ref.Start, ref.End) != nil {
		return 0, false, false // no writer makes it; a bomb would inflate to its claim
	}
	return ChunkLimit(ref.Start, ref.End), false, true
}

// scanObjects reads the first bytes of every object under root: its age
// header, if any, and the number of its recipient stanzas. It returns the
// keys of the objects not encrypted to as many recipients as the current
// ones, and how many of them are not age-encrypted at all. An X25519
// stanza does not name its recipient, so an object encrypted to as many
// other keys passes; the marker's pending list covers those.
func (r *Repo) scanObjects(ctx context.Context, recipients int) (stale []string, plain int, err error) {
	for obj, err := range r.client.List(ctx, root, remote.ListOptions{}) {
		if err != nil {
			return nil, 0, fmt.Errorf("list %s: %w", root, err)
		}
		if _, _, ok := objectLimit(obj.Key, 0); !ok || obj.Size == 0 {
			continue
		}
		n, err := r.stanzas(ctx, obj.Key)
		switch {
		case errors.Is(err, remote.ErrNotFound):
		case err != nil:
			return nil, 0, err
		case n != recipients:
			stale = append(stale, obj.Key)
			if n == 0 {
				plain++
			}
		}
	}
	return stale, plain, nil
}

// maxAgeHeader bounds what stanzas reads of an object's age header: a
// post-quantum stanza is about 1.6 KiB.
const maxAgeHeader = 64 << 10

// stanzas is the number of recipient stanzas of an age object's header;
// 0 for an object that is not age-encrypted, -1 for a header longer than
// maxAgeHeader.
func (r *Repo) stanzas(ctx context.Context, key string) (int, error) {
	rc, err := r.client.Get(ctx, key, 0, maxAgeHeader)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	br := bufio.NewReader(io.LimitReader(rc, maxAgeHeader))
	line, err := br.ReadString('\n')
	if line != AgeHeader {
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("read %s: %w", key, err)
		}
		return 0, nil
	}
	n := 0
	for {
		line, err := br.ReadString('\n')
		switch {
		case strings.HasPrefix(line, "-> "):
			n++
		case strings.HasPrefix(line, "---"):
			return n, nil
		}
		if errors.Is(err, io.EOF) {
			return -1, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", key, err)
		}
	}
}
