package crypt

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"time"

	"filippo.io/age"
	"filippo.io/age/agessh"
	"filippo.io/age/armor"
	"golang.org/x/crypto/ssh"
)

// Key is one identity (private key) and the recipient it opens.
type Key struct {
	Identity  age.Identity
	Recipient age.Recipient // nil when its type has no recipient ompsync knows
	// Fingerprint names the recipient in the marker and in messages.
	Fingerprint string
}

// fingerprint names a recipient without spelling it out: the first 16 hex
// digits of the SHA-256 of its canonical form, which is an age recipient as
// written (age1...), or an ssh public key as "<type> <base64>" without its
// comment. Anyone can compute it: printf %s 'age1...' | sha256sum | cut -c1-16
func fingerprint(canonical string) string {
	s := sha256.Sum256([]byte(canonical))
	return hex.EncodeToString(s[:8])
}

// ParseRecipient parses one recipient and returns its canonical form. Its
// errors never quote the value: a private key pasted by mistake must not
// end up in a log.
func ParseRecipient(s string) (age.Recipient, string, error) {
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(strings.ToUpper(s), "AGE-SECRET-KEY-"):
		return nil, "", errors.New("this is a private key (AGE-SECRET-KEY-...), not a recipient: keep it secret, put it in the file encryption.identity_file names, and list its public key (age1...) here")
	case strings.HasPrefix(s, "age1"):
		rs, err := age.ParseRecipients(strings.NewReader(s))
		if err != nil || len(rs) != 1 {
			return nil, "", errors.New("not a valid age recipient (age1...)")
		}
		str, ok := rs[0].(fmt.Stringer)
		if !ok {
			return nil, "", errors.New("unsupported age recipient type")
		}
		return rs[0], str.String(), nil
	case strings.HasPrefix(s, "ssh-"):
		pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(s))
		if err != nil {
			return nil, "", errors.New("not a valid ssh public key (ssh-ed25519 AAAA...)")
		}
		r, err := agessh.ParseRecipient(s)
		if err != nil {
			return nil, "", fmt.Errorf("ssh key type %s cannot be a recipient; use ssh-ed25519, ssh-rsa or an age key", pk.Type())
		}
		return r, sshCanonical(pk), nil
	}
	return nil, "", errors.New("not a recipient: want an age public key (age1...) or an ssh public key (ssh-ed25519 AAAA...)")
}

func sshCanonical(pk ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk)))
}

// ReadIdentityFile reads private keys: age identities, one a line (the
// file 'ompsync keygen' and age-keygen write; several are allowed, which
// is how a key change is done), or one unencrypted OpenSSH private key.
// The file must not be readable by other users.
func ReadIdentityFile(path string) ([]Key, error) {
	data, err := readPrivate(path, 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: copy your key there or set encryption.identity_file to its file; to start with a new key, run 'ompsync keygen --out %s'", err, path)
	}
	if err != nil {
		return nil, err
	}
	if bytes.Contains(data, []byte("-----BEGIN")) {
		return sshIdentity(path, data)
	}
	ids, err := age.ParseIdentities(bytes.NewReader(data))
	if err != nil {
		// age's errors name the line, never its contents
		return nil, fmt.Errorf("%s: %v (want age identities, AGE-SECRET-KEY-1..., as 'ompsync keygen' writes)", path, err)
	}
	var keys []Key
	for _, id := range ids {
		k := Key{Identity: id}
		if withRecipient, ok := id.(interface{ Recipient() *age.X25519Recipient }); ok {
			r := withRecipient.Recipient()
			k.Recipient, k.Fingerprint = r, fingerprint(r.String())
		} else if withRecipient, ok := id.(interface{ Recipient() *age.HybridRecipient }); ok {
			r := withRecipient.Recipient()
			k.Recipient, k.Fingerprint = r, fingerprint(r.String())
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func sshIdentity(path string, data []byte) ([]Key, error) {
	raw, err := ssh.ParseRawPrivateKey(data)
	if err != nil {
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("%s is a passphrase-protected ssh key; ompsync runs unattended and cannot ask for it: "+
				"use an age identity ('ompsync keygen') or encryption.passphrase_file", path)
		}
		return nil, fmt.Errorf("%s: not a usable ssh private key", path)
	}
	id, err := agessh.ParseIdentity(data)
	if err != nil {
		return nil, fmt.Errorf("%s: ssh key type cannot decrypt age files; use ssh-ed25519 or ssh-rsa", path)
	}
	signer, err := ssh.NewSignerFromKey(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	canon := sshCanonical(signer.PublicKey())
	r, _, err := ParseRecipient(canon)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return []Key{{Identity: id, Recipient: r, Fingerprint: fingerprint(canon)}}, nil
}

// readPrivate reads a secret file, refusing one others can read (as ssh
// does): a backup key that every local user can copy protects nothing.
func readPrivate(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by other users (mode %04o); run: chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a key file", path, limit)
	}
	return data, nil
}

// readPassphrase reads the first line of a passphrase file.
func readPassphrase(path string) (string, error) {
	data, err := readPrivate(path, 64<<10)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", fmt.Errorf("%s: the first line is empty; write the passphrase on it", path)
	}
	return line, nil
}

// wrapKey encrypts an identity to a passphrase, armored for the marker.
func wrapKey(id *age.X25519Identity, passphrase string, workFactor int) (string, error) {
	r, err := age.NewScryptRecipient(passphrase)
	if err != nil {
		return "", err
	}
	if workFactor > 0 {
		r.SetWorkFactor(workFactor)
	}
	var buf bytes.Buffer
	aw := armor.NewWriter(&buf)
	w, err := age.Encrypt(aw, r)
	if err != nil {
		return "", err
	}
	if _, err := io.WriteString(w, id.String()+"\n"); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	if err := aw.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// unwrapKey opens the marker's passphrase key.
func unwrapKey(wrapped, passphrase string) (*age.X25519Identity, error) {
	sid, err := age.NewScryptIdentity(passphrase)
	if err != nil {
		return nil, err
	}
	r, err := age.Decrypt(armor.NewReader(strings.NewReader(wrapped)), sid)
	if err != nil {
		var nomatch *age.NoIdentityMatchError
		if errors.As(err, &nomatch) {
			return nil, fmt.Errorf("%w: the passphrase in encryption.passphrase_file does not open this repository's key: "+
				"it is not the passphrase the repository was created with", errWrongPassphrase)
		}
		return nil, fmt.Errorf("the repository's passphrase key is damaged: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(r, 4<<10))
	if err != nil {
		return nil, fmt.Errorf("the repository's passphrase key is damaged: %w", err)
	}
	ids, err := age.ParseIdentities(bytes.NewReader(data))
	if err != nil || len(ids) != 1 {
		return nil, errors.New("the repository's passphrase key is damaged: it holds no age identity")
	}
	id, ok := ids[0].(*age.X25519Identity)
	if !ok {
		return nil, errors.New("the repository's passphrase key is not an X25519 identity")
	}
	return id, nil
}

var errWrongPassphrase = errors.New("wrong passphrase")

// NewIdentityFile makes a new X25519 identity and returns the file to keep
// it in (the format age-keygen writes), its recipient and fingerprint.
func NewIdentityFile(now time.Time) (file []byte, recipient, fp string, err error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, "", "", err
	}
	recipient = id.Recipient().String()
	fp = fingerprint(recipient)
	file = fmt.Appendf(nil, "# created: %s\n# public key: %s\n# fingerprint: %s\n%s\n", now.UTC().Format(time.RFC3339), recipient, fp, id.String())
	return file, recipient, fp, nil
}
