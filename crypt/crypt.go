// Package crypt is the encrypting repository codec: zstd, then age
// (filippo.io/age). It implements repo.Encrypter, so the repository records
// in its marker who can read what it writes, by fingerprint.
//
// Recipients are age X25519 or post-quantum keys, or ssh-ed25519 and ssh-rsa
// public keys. Identities come from a file (age identities, or one
// unencrypted OpenSSH private key). Passphrase mode keeps an age identity in
// the marker, encrypted to the passphrase with age's scrypt recipient: every
// object is then encrypted to that identity, so the slow scrypt runs once per
// process rather than once per object.
package crypt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"filippo.io/age"

	"github.com/ompsync/ompsync/repo"
)

// Options configure New. At least one of Recipients, IdentityFile and
// PassphraseFile must be set.
type Options struct {
	// Recipients are who new objects are encrypted to: age1..., age1pq1...,
	// or "ssh-ed25519 AAAA...". Empty means the recipients of the
	// identities (a machine that writes what it can read back).
	Recipients []string
	// IdentityFile holds the private keys that open objects.
	IdentityFile string
	// PassphraseFile holds the passphrase (its first line) of passphrase mode.
	PassphraseFile string
	// PassphraseKey is the repository's passphrase-encrypted identity, from
	// its marker. Empty means the repository has none: passphrase mode
	// makes a new one, which Repo.Init records.
	PassphraseKey string
	// ScryptWorkFactor is log2 of scrypt's N for a new passphrase key; 0
	// means age's default of 18 (about a second). Tests lower it.
	ScryptWorkFactor int
}

// Codec compresses with zstd and encrypts with age. Sealing is randomized:
// the same plaintext sealed twice gives different bytes that open to the
// same plaintext, so an upload repeated after a crash is still harmless.
type Codec struct {
	zstd       *repo.Zstd
	recipients []age.Recipient
	identities []age.Identity
	keys       repo.Keys
}

var _ repo.Encrypter = (*Codec)(nil)

// New builds the codec from its keys. Errors name the setting at fault and
// never quote key material.
func New(opts Options) (*Codec, error) {
	c := &Codec{zstd: repo.NewZstd()}
	addRecipient := func(r age.Recipient, fp string) {
		if slices.Contains(c.keys.Recipients, fp) {
			return
		}
		c.recipients = append(c.recipients, r)
		c.keys.Recipients = append(c.keys.Recipients, fp)
	}
	for i, s := range opts.Recipients {
		r, canon, err := ParseRecipient(s)
		if err != nil {
			return nil, fmt.Errorf("encryption.recipients item %d: %w", i+1, err)
		}
		addRecipient(r, fingerprint(canon))
	}
	var own []Key // the identities' own recipients
	if opts.IdentityFile != "" {
		keys, err := ReadIdentityFile(opts.IdentityFile)
		if err != nil {
			return nil, fmt.Errorf("encryption.identity_file: %w", err)
		}
		own = append(own, keys...)
	}
	if opts.PassphraseFile != "" {
		pass, err := readPassphrase(opts.PassphraseFile)
		if err != nil {
			return nil, fmt.Errorf("encryption.passphrase_file: %w", err)
		}
		var id *age.X25519Identity
		if opts.PassphraseKey != "" {
			if id, err = unwrapKey(opts.PassphraseKey, pass); err != nil {
				return nil, err
			}
			c.keys.PassphraseKey = opts.PassphraseKey
		} else {
			if id, err = age.GenerateX25519Identity(); err != nil {
				return nil, err
			}
			if c.keys.PassphraseKey, err = wrapKey(id, pass, opts.ScryptWorkFactor); err != nil {
				return nil, fmt.Errorf("encrypt the passphrase key: %w", err)
			}
		}
		k := Key{Identity: id, Recipient: id.Recipient(), Fingerprint: fingerprint(id.Recipient().String())}
		own = append(own, k)
		// The passphrase key is always a recipient: passphrase mode is
		// that objects open with the passphrase.
		addRecipient(k.Recipient, k.Fingerprint)
	}
	for _, k := range own {
		c.identities = append(c.identities, k.Identity)
		c.keys.Identities = append(c.keys.Identities, k.Fingerprint)
		if len(opts.Recipients) == 0 && k.Recipient != nil {
			addRecipient(k.Recipient, k.Fingerprint)
		}
	}
	if len(c.recipients) == 0 {
		return nil, errors.New("encryption needs encryption.recipients, encryption.identity_file or encryption.passphrase_file")
	}
	// age refuses some mixes of recipients (post-quantum with classic
	// keys); find out now rather than at the first upload.
	if _, err := c.Seal(nil); err != nil {
		return nil, fmt.Errorf("encryption.recipients: %w", err)
	}
	return c, nil
}

// Keys reports the fingerprints of the codec's recipients and identities.
func (c *Codec) Keys() repo.Keys { return c.keys }

// Seal compresses plain, then encrypts it to every recipient.
func (c *Codec) Seal(plain []byte) ([]byte, error) {
	z, err := c.zstd.Seal(plain)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	// header (about 100 bytes a recipient), nonce, 16 bytes per 64 KiB
	buf.Grow(len(z) + len(z)>>12 + 200*len(c.recipients) + 128)
	w, err := age.Encrypt(&buf, c.recipients...)
	if err != nil {
		return nil, fmt.Errorf("age: %w", err)
	}
	if _, err := w.Write(z); err != nil {
		return nil, fmt.Errorf("age: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("age: %w", err)
	}
	return buf.Bytes(), nil
}

// SealWriter is Seal as the plaintext is written: zstd's frame goes
// through age's encryption (64 KiB chunks) to w.
func (c *Codec) SealWriter(w io.Writer, size int64) (io.WriteCloser, error) {
	aw, err := age.Encrypt(w, c.recipients...)
	if err != nil {
		return nil, fmt.Errorf("age: %w", err)
	}
	zw, err := c.zstd.SealWriter(aw, size)
	if err != nil {
		return nil, err
	}
	return &sealWriter{zw: zw, aw: aw}, nil
}

type sealWriter struct{ zw, aw io.WriteCloser }

func (s *sealWriter) Write(p []byte) (int, error) { return s.zw.Write(p) }

// Close ends the frame, then age's last chunk.
func (s *sealWriter) Close() error {
	if err := s.zw.Close(); err != nil {
		return err
	}
	if err := s.aw.Close(); err != nil {
		return fmt.Errorf("age: %w", err)
	}
	return nil
}

// zstdMagic starts every object of the plaintext codec.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// Open decrypts and decompresses sealed, refusing plaintext larger than
// limit. An object that is not encrypted is repo.ErrNotEncrypted; one that
// no identity opens is repo.ErrNoKey.
func (c *Codec) Open(sealed []byte, limit int64) ([]byte, error) {
	r, err := c.decrypt(bytes.NewReader(sealed), sealed)
	if err != nil {
		return nil, err
	}
	// The compressed payload is smaller than the sealed object, which the
	// repository has already bounded.
	var z bytes.Buffer
	z.Grow(len(sealed))
	if _, err := io.Copy(&z, r); err != nil {
		return nil, fmt.Errorf("age: %w", err) // damaged or tampered with
	}
	return c.zstd.Open(z.Bytes(), limit)
}

// OpenReader is Open as the stored bytes arrive: age authenticates each
// 64 KiB chunk as it is read (and the end, so a cut object fails), and
// zstd inflates what it gives, within limit bytes.
func (c *Codec) OpenReader(sealed *bufio.Reader, limit int64) (io.ReadCloser, error) {
	head, _ := sealed.Peek(len(repo.AgeHeader))
	r, err := c.decrypt(sealed, head)
	if err != nil {
		return nil, err
	}
	return c.zstd.OpenReader(bufio.NewReaderSize(ageErrors{r}, 64<<10), limit)
}

// decrypt is age's reader of sealed, whose first bytes are head.
func (c *Codec) decrypt(sealed io.Reader, head []byte) (io.Reader, error) {
	if !bytes.HasPrefix(head, []byte(repo.AgeHeader)) {
		if bytes.HasPrefix(head, zstdMagic) {
			return nil, repo.ErrNotEncrypted
		}
		return nil, errors.New("not an age-encrypted object")
	}
	if len(c.identities) == 0 {
		return nil, fmt.Errorf("%w: no identity is configured, so this configuration can only write; "+
			"reading needs encryption.identity_file or encryption.passphrase_file", repo.ErrNoKey)
	}
	r, err := age.Decrypt(sealed, c.identities...)
	var nomatch *age.NoIdentityMatchError
	if errors.As(err, &nomatch) {
		return nil, fmt.Errorf("%w: it is encrypted to none of your identities (yours: %s)", repo.ErrNoKey, strings.Join(c.keys.Identities, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("age: %w", err)
	}
	return r, nil
}

// ageErrors says which layer failed: a chunk that does not authenticate is
// damage or tampering, not a zstd problem.
type ageErrors struct{ r io.Reader }

func (a ageErrors) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("age: %w", err)
	}
	return n, err
}
