package repo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ompsync/ompsync/remote"
)

// Marker is the plaintext object that identifies a repository.
type Marker struct {
	Format  int       `json:"format"`
	Created time.Time `json:"created"`
	// ID is random, given once per repository (Init): an agent's state
	// records it, so a state of another remote, or of a remote recreated
	// since, is not trusted. Markers written before it have none.
	ID string `json:"id,omitempty"`
	// Encryption is set when objects are encrypted; nil means plaintext.
	Encryption *Encryption `json:"encryption,omitempty"`
}

// encryption is m's Encryption: nil without a marker, or for plaintext.
func (m *Marker) encryption() *Encryption {
	if m == nil {
		return nil
	}
	return m.Encryption
}

// Encryption is what the marker records about encrypted objects: who can
// read them, by fingerprint. It never holds a key that decrypts anything,
// except in passphrase mode a key that is itself encrypted to the
// passphrase.
type Encryption struct {
	// Scheme is SchemeAge.
	Scheme string `json:"scheme"`
	// Recipients are the fingerprints of the recipients new objects are
	// encrypted to.
	Recipients []string `json:"recipients"`
	// Pending are fingerprints of earlier recipients that objects written
	// before a key change may still be encrypted to, until 'ompsync rekey'
	// finishes; PendingPlaintext means some objects are not encrypted yet.
	Pending []string `json:"pending,omitempty"`
	// Removed are fingerprints of recipients a key change took out and
	// rekey finished with: revoked. No writer may encrypt to them again,
	// and a writer configured with one is refused.
	Removed []string `json:"removed,omitempty"`
	// PassphraseKey is the passphrase mode's age identity, encrypted to the
	// passphrase with age's scrypt recipient (armored).
	PassphraseKey string `json:"passphrase_key,omitempty"`
}

const (
	// SchemeAge is the only encryption scheme: zstd, then age.
	SchemeAge = "age"
	// PendingPlaintext in Encryption.Pending means a repository is being
	// converted from plaintext by 'ompsync rekey'.
	PendingPlaintext = "plaintext"
	// maxMarker bounds the marker a reader accepts.
	maxMarker = 64 << 10
)

// Keys is what an encrypting codec says about itself, so that the
// repository can record it and check it against the marker. Fingerprints
// are never secret.
type Keys struct {
	// Recipients are the fingerprints of the recipients Seal encrypts to.
	Recipients []string
	// Identities are the fingerprints of the recipients whose identities
	// Open holds; empty for a codec that can only write.
	Identities []string
	// PassphraseKey is, in passphrase mode, the passphrase-encrypted
	// identity: the marker's, or a new one for Init to record. Else empty.
	PassphraseKey string
}

// Encrypter is a Codec that encrypts.
type Encrypter interface {
	Codec
	Keys() Keys
}

var (
	// ErrNoKey means an object is encrypted and no configured identity
	// opens it. Repo adds to it the fingerprints the marker names.
	ErrNoKey = errors.New("missing decryption key")
	// ErrNotEncrypted is returned by an encrypting codec for an object that
	// is not encrypted. Repo accepts such an object only where the marker
	// says the repository holds plaintext.
	ErrNotEncrypted = errors.New("object is not encrypted")
	// ErrEncryptionMismatch means the repository's encryption and this
	// ompsync's configuration do not go together; nothing was written.
	ErrEncryptionMismatch = errors.New("encryption does not match the repository")
	// ErrForeignData means a remote without a repository holds data that
	// is not ompsync's: a folder or bucket named by mistake. Nothing was
	// written.
	ErrForeignData = errors.New("the remote holds data that is not ompsync's, and no repository")
)

// ReadMarker reads the repository's marker; nil without error means the
// remote has none (an empty repository).
func (r *Repo) ReadMarker(ctx context.Context) (*Marker, error) {
	b, err := r.getAll(ctx, MarkerKey, maxMarker)
	if errors.Is(err, remote.ErrNotFound) {
		r.setMarker(nil)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read repository marker: %w", err)
	}
	var m Marker
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("repository marker %s is damaged: %w", MarkerKey, err)
	}
	switch {
	case m.Format == 1:
		return nil, fmt.Errorf("repository has format 1, written by a development build of ompsync before 0.1.0; this ompsync reads format %d only: "+
			"back up to a new, empty remote (another bucket, prefix or folder: the agent uploads every local session again), and restore from this one with the build that wrote it", FormatVersion)
	case m.Format != FormatVersion:
		return nil, fmt.Errorf("repository has format %d; this ompsync reads format %d: upgrade ompsync", m.Format, FormatVersion)
	}
	if m.ID != "" && !ValidID(m.ID) {
		return nil, fmt.Errorf("repository marker %s is damaged: id %q is not 1-64 lower-case hex digits", MarkerKey, m.ID)
	}
	if e := m.Encryption; e != nil && (e.Scheme != SchemeAge || len(e.Recipients) == 0) {
		return nil, fmt.Errorf("repository marker %s names encryption %q with %d recipients; this ompsync knows %q: upgrade ompsync",
			MarkerKey, e.Scheme, len(e.Recipients), SchemeAge)
	}
	r.setMarker(&m)
	return &m, nil
}

// WriteMarker replaces the marker. Only Init and rekey change it.
func (r *Repo) WriteMarker(ctx context.Context, m *Marker) error {
	return r.writeMarker(ctx, m, remote.PutOptions{})
}

func (r *Repo) writeMarker(ctx context.Context, m *Marker, opts remote.PutOptions) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := r.client.Put(ctx, MarkerKey, b, opts); err != nil {
		return fmt.Errorf("write repository marker: %w", err)
	}
	r.setMarker(m)
	return nil
}

func (r *Repo) setMarker(m *Marker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marker, r.markerKnown, r.markerAt = m, true, time.Now()
}

// SetLog makes r log every change of recipients it makes, at WARN.
func (r *Repo) SetLog(l *slog.Logger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = l
}

// MarkerTTL is how long a writer trusts the marker it last read before it
// reads it again ahead of an upload: another machine may encrypt the
// repository, or change its recipients, while this one runs.
const MarkerTTL = 15 * time.Second

// CheckWrite refuses (ErrEncryptionMismatch) an upload this ompsync's
// codec would make wrongly for the repository as its marker says now: any
// object from a writer without encryption into an encrypted repository, or
// one being converted; any object encrypted to other recipients than the
// marker's, above all to a key a key change removed. Every put checks it,
// with the marker read at most MarkerTTL ago; nothing is uploaded until the
// configuration matches, and nothing local is dropped for it.
func (r *Repo) CheckWrite(ctx context.Context) error {
	r.mu.Lock()
	m, known, at, recheck := r.marker, r.markerKnown, r.markerAt, r.recheck
	r.recheck = false
	r.mu.Unlock()
	if !known || recheck || time.Since(at) >= MarkerTTL {
		var err error
		if m, err = r.ReadMarker(ctx); err != nil {
			return err
		}
	}
	e := m.encryption()
	if e == nil {
		return nil
	}
	enc, ok := r.codec.(Encrypter)
	if !ok {
		return fmt.Errorf("%w: the repository is now encrypted (age, to %s) and this machine has no encryption configured; "+
			"it uploads nothing until it has: set encryption.identity_file (or encryption.recipients) to a key of the repository, then restart the agent",
			ErrEncryptionMismatch, Fingerprints(e.Recipients))
	}
	k := enc.Keys()
	if err := refuseRevoked(e, k.Recipients); err != nil {
		return err
	}
	if !sameSet(e.Recipients, k.Recipients) {
		return fmt.Errorf("%w: the repository's recipients are %s and this machine encrypts to %s; it uploads nothing until they match: "+
			"set encryption.recipients to the repository's recipients (or run 'ompsync rekey' to change them, with an identity of a current one)",
			ErrEncryptionMismatch, Fingerprints(e.Recipients), Fingerprints(k.Recipients))
	}
	return nil
}

// RecheckBeforeWrite makes the next CheckWrite, and so the next put, read
// the marker again: what a writer calls before each batch of uploads (a
// batch that puts nothing reads nothing), and what Repo does on a sign (an
// age object read by a plaintext codec) that the marker may have changed.
func (r *Repo) RecheckBeforeWrite() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recheck = true
}

// refuseRevoked refuses recipients to that include a key the marker lists
// as pending removal or removed: naming the key, never a secret.
func refuseRevoked(e *Encryption, to []string) error {
	for _, fp := range to {
		if slices.Contains(e.Removed, fp) || (slices.Contains(e.Pending, fp) && !slices.Contains(e.Recipients, fp)) {
			return fmt.Errorf("%w: this machine encrypts to key %s, which the repository's key change removed (its recipients are %s); "+
				"take it out of encryption.recipients (and encryption.identity_file), and give this machine a current key",
				ErrEncryptionMismatch, fp, Fingerprints(e.Recipients))
		}
	}
	return nil
}

// logRecipients logs a change of the repository's recipients at WARN.
func (r *Repo) logRecipients(from, to *Encryption, why string) {
	r.mu.Lock()
	l := r.log
	r.mu.Unlock()
	if l == nil {
		return
	}
	var before []string
	if from != nil {
		before = from.Recipients
	}
	l.Warn("repository recipients changed: "+why, "from", Fingerprints(before), "to", Fingerprints(to.Recipients), "pending", to.Pending)
}

// cachedMarker returns the marker last read or written, reading it if it
// never was; ok is false when it cannot be read.
func (r *Repo) cachedMarker(ctx context.Context) (m *Marker, ok bool) {
	r.mu.Lock()
	m, known := r.marker, r.markerKnown
	r.mu.Unlock()
	if known {
		return m, true
	}
	m, err := r.ReadMarker(ctx)
	return m, err == nil
}

// Init prepares the remote for writing: it writes the marker if there is
// none, and otherwise checks that this ompsync may write into it. It
// refuses (ErrEncryptionMismatch) to write plaintext into an encrypted
// repository, to encrypt into a plaintext repository that already holds
// data, and to encrypt to new recipients without holding a key of the old
// ones. A writer whose recipients differ but who holds a key of the
// repository (or adds recipients) records the new recipients: a key change
// applies to new objects at once; 'ompsync rekey' re-encrypts the rest.
func (r *Repo) Init(ctx context.Context) error {
	if err := r.prepare(ctx); err != nil {
		return err
	}
	return r.ensureID(ctx)
}

// prepare is Init without the repository id.
func (r *Repo) prepare(ctx context.Context) error {
	enc, encrypting := r.codec.(Encrypter)
	for attempt := 0; ; attempt++ {
		m, err := r.ReadMarker(ctx)
		if err != nil {
			return err
		}
		if m == nil || (m.Encryption == nil && encrypting) {
			first, err := r.firstObject(ctx)
			if err != nil {
				return err
			}
			if m == nil && first == "" {
				if err := r.refuseForeign(ctx); err != nil {
					return err
				}
			}
			if first != "" && m == nil && r.isAge(ctx, first) {
				return fmt.Errorf("%w: the remote holds encrypted objects but no marker (%s): it may have been deleted. "+
					"Run 'ompsync rekey' with the keys of those objects to write it again", ErrEncryptionMismatch, MarkerKey)
			}
			if encrypting && first != "" {
				return fmt.Errorf("%w: the remote already holds unencrypted backups, and encryption is configured; "+
					"ompsync does not mix encrypted objects into them. Either back up to a new, empty remote (another bucket, prefix or folder), "+
					"or run 'ompsync rekey' to encrypt what is there", ErrEncryptionMismatch)
			}
			var k *Keys
			if encrypting {
				k = new(enc.Keys())
			}
			// A new marker only if there is none, so two first writers
			// cannot both create one; a plaintext marker of an empty
			// repository is replaced.
			err = r.writeMarker(ctx, newMarker(m, k), remote.PutOptions{IfAbsent: m == nil})
			if errors.Is(err, remote.ErrPreconditionFailed) && attempt == 0 {
				continue // another writer created it: check theirs
			}
			return err
		}
		if m.Encryption == nil {
			return nil // plaintext writer, plaintext repository
		}
		if !encrypting {
			return fmt.Errorf("%w: the remote is encrypted (age, to %s) and this ompsync has no encryption configured; "+
				"it will not write plaintext into it. Set encryption.identity_file (or encryption.recipients, or encryption.passphrase_file) "+
				"to a key of this repository, or back up to another remote", ErrEncryptionMismatch, Fingerprints(m.Encryption.Recipients))
		}
		return r.adoptRecipients(ctx, m, enc.Keys())
	}
}

// ensureID gives a marker written before repository ids one. The drivers
// can replace an object only unconditionally, so two writers may race:
// each reads the marker back and adopts what is there, and one that read
// back its own id just before the other's put will find, on its next
// start, a state of "another" repository and reconcile once. Nothing is
// lost either way.
func (r *Repo) ensureID(ctx context.Context) error {
	m, ok := r.cachedMarker(ctx)
	if !ok || m == nil || m.ID != "" {
		return nil
	}
	nm := *m
	nm.ID = NewID()
	if err := r.WriteMarker(ctx, &nm); err != nil {
		return err
	}
	back, err := r.ReadMarker(ctx)
	if err != nil {
		return err
	}
	if back == nil || back.ID == "" {
		return fmt.Errorf("repository marker %s lost its id right after it was written", MarkerKey)
	}
	return nil
}

// ID is the repository's id, as the marker last read or written says ("" before
// Init, or for a repository without one).
func (r *Repo) ID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.marker == nil {
		return ""
	}
	return r.marker.ID
}

// ValidID reports whether s is a repository or instance id: 1-64 lower-case
// hex digits (NewID gives 32).
func ValidID(s string) bool { return lowerHex(s, 1, 64) }

// NewID returns a random id: 32 lower-case hex digits.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// adoptRecipients checks an encrypting writer against an encrypted marker
// and records its recipients (rotated) when they differ.
func (r *Repo) adoptRecipients(ctx context.Context, m *Marker, k Keys) error {
	nm, changed, err := rotated(m, k, func() error {
		return fmt.Errorf("%w: the remote is encrypted to %s, this ompsync encrypts to %s and holds none of the current keys, "+
			"and only a holder of a current key may change them. Set encryption.recipients to the repository's recipients; "+
			"or, to change keys, put an identity of a current recipient in encryption.identity_file and run 'ompsync rekey'",
			ErrEncryptionMismatch, Fingerprints(m.Encryption.Recipients), Fingerprints(k.Recipients))
	})
	if err != nil || !changed {
		return err
	}
	if err := r.WriteMarker(ctx, nm); err != nil {
		return err
	}
	r.logRecipients(m.Encryption, nm.Encryption, "this machine's encryption.recipients differ; objects written before stay readable by the earlier keys until 'ompsync rekey'")
	return nil
}

// newMarker is a marker of the current format, encrypted to k's recipients
// (plaintext when k is nil), keeping prev's creation time and id when
// there is one.
func newMarker(prev *Marker, k *Keys) *Marker {
	nm := &Marker{Format: FormatVersion, Created: time.Now().UTC(), ID: NewID()}
	if prev != nil {
		nm.Created = prev.Created
		if prev.ID != "" {
			nm.ID = prev.ID // the agents' states stay this repository's
		}
	}
	if k != nil {
		nm.Encryption = &Encryption{Scheme: SchemeAge, Recipients: sorted(k.Recipients), PassphraseKey: k.PassphraseKey}
	}
	return nm
}

// rotated is encrypted marker m changed to k's recipients, every earlier
// recipient pending; changed is false when m has them already. Only a
// writer holding an identity of a current recipient may change them
// (notHolder says why not), and never back to a key a change removed: a
// machine with a stale list would otherwise undo a revocation.
func rotated(m *Marker, k Keys, notHolder func() error) (nm *Marker, changed bool, err error) {
	e := m.Encryption
	if err := refuseRevoked(e, k.Recipients); err != nil {
		return nil, false, err
	}
	if sameSet(e.Recipients, k.Recipients) {
		return m, false, nil
	}
	if !slices.ContainsFunc(k.Identities, func(id string) bool { return slices.Contains(e.Recipients, id) }) {
		return nil, false, notHolder()
	}
	c, ce := *m, *e
	ce.Pending = rotatedPending(e, k.Recipients)
	ce.Recipients = sorted(k.Recipients)
	if ce.PassphraseKey == "" {
		ce.PassphraseKey = k.PassphraseKey
	}
	c.Encryption = &ce
	return &c, true, nil
}

// rotatedPending is the Pending list after a change to recipients to: every
// recipient objects may still be encrypted to, other than the new ones.
func rotatedPending(e *Encryption, to []string) []string {
	earlier := append(slices.Clone(e.Pending), e.Recipients...)
	return sorted(slices.DeleteFunc(earlier, func(fp string) bool { return slices.Contains(to, fp) }))
}

// CheckMarker refuses, of a marker just read (ReadMarker already refused a
// format it does not know), an encrypted repository when this ompsync has
// no encryption configured. No marker (nil) is an empty repository.
func (r *Repo) CheckMarker(m *Marker) error {
	if _, encrypting := r.codec.(Encrypter); m.encryption() != nil && !encrypting {
		return fmt.Errorf("%w: the repository is encrypted (age, to %s): set encryption.identity_file "+
			"(or encryption.passphrase_file) to read it", ErrNoKey, Fingerprints(m.Encryption.Recipients))
	}
	return nil
}

// firstObject is the first key under the format's folder, "" if none.
func (r *Repo) firstObject(ctx context.Context) (string, error) {
	for obj, err := range r.client.List(ctx, root, remote.ListOptions{}) {
		if err != nil {
			return "", fmt.Errorf("list %s: %w", root, err)
		}
		return obj.Key, nil
	}
	return "", nil
}

// refuseForeign returns ErrForeignData when the remote, which holds no
// repository, holds anything else: a remote set to the home folder or to a
// bucket of other data by mistake would otherwise take the backup beside
// what is there, and a typo pass for a backup. Hidden names (.DS_Store)
// and a file system's lost+found do not count. One delimited listing,
// stopped at the first such name.
func (r *Repo) refuseForeign(ctx context.Context) error {
	name, err := r.Foreign(ctx)
	if err != nil || name == "" {
		return err
	}
	return fmt.Errorf("%w (%q is there): ompsync makes a repository only where there is nothing else. "+
		"Set remote to a new or empty folder (a folder inside this one), or to a bucket or prefix of its own (s3://bucket/ompsync)",
		ErrForeignData, name)
}

// Foreign is the first name at the remote's top that is not ompsync's
// (hidden names and lost+found aside), "" when there is none.
func (r *Repo) Foreign(ctx context.Context) (string, error) {
	for obj, err := range r.client.List(ctx, "", remote.ListOptions{Delimiter: "/", FirstPage: 64}) {
		if err != nil {
			return "", fmt.Errorf("list the remote: %w", err)
		}
		name := obj.Key
		if name == MarkerKey || name == root || strings.HasPrefix(name, ".") || name == "lost+found/" {
			continue
		}
		if obj.Prefix {
			// A folder of deleted objects (a versioned bucket) is empty.
			if ok, err := remote.AnyObject(ctx, r.client, name); err != nil {
				return "", fmt.Errorf("list the remote: %w", err)
			} else if !ok {
				continue
			}
		}
		return name, nil
	}
	return "", nil
}

// isAge reports whether an object starts with the age header.
func (r *Repo) isAge(ctx context.Context, key string) bool {
	n, err := r.stanzas(ctx, key)
	return err == nil && n != 0
}

// explainOpen adds to a codec's error what the marker says about the keys
// the repository needs, so the user learns which key to configure. Every
// failed open, whole or streamed, comes here.
func (r *Repo) explainOpen(ctx context.Context, err error) error {
	if errors.Is(err, ErrNoKey) {
		// An age object where this codec expected none: the repository
		// may have been encrypted since the marker was read.
		r.RecheckBeforeWrite()
	}
	m, _ := r.cachedMarker(ctx)
	e := m.encryption()
	switch {
	case errors.Is(err, ErrNoKey) && e != nil:
		msg := "the repository is encrypted to " + Fingerprints(e.Recipients)
		if old := slices.DeleteFunc(slices.Clone(e.Pending), func(s string) bool { return s == PendingPlaintext }); len(old) > 0 {
			msg += " (objects written before the last key change: " + Fingerprints(old) + ", until 'ompsync rekey' finishes)"
		}
		return fmt.Errorf("%w; %s: set encryption.identity_file to a file holding one of those identities "+
			"(or encryption.passphrase_file to the repository's passphrase)", err, msg)
	case errors.Is(err, ErrNotEncrypted) && e != nil:
		return fmt.Errorf("%w, but the repository is encrypted: it was not written by ompsync with this repository's keys; refusing it", err)
	}
	return err
}

// plaintextAllowed reports whether the marker lets a reader accept an
// object that is not encrypted: a plaintext repository, or one that
// 'ompsync rekey' is still converting. An unreadable marker allows nothing.
func (r *Repo) plaintextAllowed(ctx context.Context) bool {
	m, ok := r.cachedMarker(ctx)
	return ok && (m.encryption() == nil || slices.Contains(m.Encryption.Pending, PendingPlaintext))
}

// Fingerprints renders a list of key fingerprints for a message.
func Fingerprints(fps []string) string {
	switch len(fps) {
	case 0:
		return "no key"
	case 1:
		return "key " + fps[0]
	}
	return "keys " + strings.Join(fps, ", ")
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

func sameSet(a, b []string) bool { return slices.Equal(sorted(a), sorted(b)) }

// Codec is the codec the repository seals and opens with.
func (r *Repo) Codec() Codec { return r.codec }
