package crypt_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"golang.org/x/crypto/ssh"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/repo"
)

// key is an identity file on disk and its recipient.
type key struct {
	file, recipient, fp string
}

func newKey(t testing.TB) key {
	t.Helper()
	data, recipient, fp, err := crypt.NewIdentityFile(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "age.key")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return key{file: p, recipient: recipient, fp: fp}
}

// sshKey writes an unencrypted OpenSSH ed25519 key; it returns the file and
// the public key line.
func sshKey(t *testing.T, passphrase string) (string, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "test")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	spk, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return p, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(spk))) + " user@host"
}

func mustNew(t testing.TB, opts crypt.Options) *crypt.Codec {
	t.Helper()
	c, err := crypt.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const secret = "MARKER-7f3a-the-session-said-this"

func sessionBytes(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		b.WriteString(`{"type":"message","id":"` + hex.EncodeToString([]byte{byte(i), byte(i >> 8)}) + `","text":"` + secret + ` line"}` + "\n")
	}
	return b.Bytes()
}

func TestSealOpen(t *testing.T) {
	k := newKey(t)
	sshFile, sshPub := sshKey(t, "")
	plain := sessionBytes(300_000)
	for _, tc := range []struct {
		name string
		enc  crypt.Options // seals
		dec  crypt.Options // opens
	}{
		{"age identity only", crypt.Options{IdentityFile: k.file}, crypt.Options{IdentityFile: k.file}},
		{"age recipient", crypt.Options{Recipients: []string{k.recipient}}, crypt.Options{IdentityFile: k.file}},
		{"ssh-ed25519 recipient", crypt.Options{Recipients: []string{sshPub}}, crypt.Options{IdentityFile: sshFile}},
		{"ssh identity only", crypt.Options{IdentityFile: sshFile}, crypt.Options{IdentityFile: sshFile}},
		{"two recipients, second key opens", crypt.Options{Recipients: []string{sshPub, k.recipient}}, crypt.Options{IdentityFile: k.file}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc, dec := mustNew(t, tc.enc), mustNew(t, tc.dec)
			a, err := enc.Seal(plain)
			if err != nil {
				t.Fatal(err)
			}
			b, err := enc.Seal(plain)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(a, []byte("age-encryption.org/v1\n")) {
				t.Fatalf("sealed object starts %q, want the age header", a[:min(len(a), 30)])
			}
			if bytes.Contains(a, []byte(secret)) || bytes.Contains(a, []byte("MARKER")) {
				t.Fatal("sealed object holds the plaintext")
			}
			if bytes.Equal(a, b) {
				t.Error("two seals are identical: age must be randomized")
			}
			if len(a) > len(plain)/4 {
				t.Errorf("sealed %d bytes of %d: not compressed before encryption", len(a), len(plain))
			}
			for _, s := range [][]byte{a, b} {
				got, err := dec.Open(s, int64(len(plain)))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, plain) {
					t.Fatal("opened bytes differ")
				}
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	k, other := newKey(t), newKey(t)
	enc := mustNew(t, crypt.Options{IdentityFile: k.file})
	plain := sessionBytes(10_000)
	sealed, err := enc.Seal(plain)
	if err != nil {
		t.Fatal(err)
	}

	// wrong identity
	_, err = mustNew(t, crypt.Options{IdentityFile: other.file}).Open(sealed, 1<<20)
	if !errors.Is(err, repo.ErrNoKey) || !strings.Contains(err.Error(), other.fp) {
		t.Errorf("wrong identity: %v; want ErrNoKey naming the identity tried (%s)", err, other.fp)
	}
	// recipients only: this configuration can write, not read
	_, err = mustNew(t, crypt.Options{Recipients: []string{k.recipient}}).Open(sealed, 1<<20)
	if !errors.Is(err, repo.ErrNoKey) || !strings.Contains(err.Error(), "encryption.identity_file") {
		t.Errorf("no identity: %v", err)
	}
	// the plaintext codec meets an encrypted object
	_, err = repo.NewZstd().Open(sealed, 1<<20)
	if !errors.Is(err, repo.ErrNoKey) || !strings.Contains(err.Error(), "no encryption is configured") {
		t.Errorf("zstd codec on an age object: %v", err)
	}
	// a plaintext object
	z, _ := repo.NewZstd().Seal(plain)
	if _, err := enc.Open(z, 1<<20); !errors.Is(err, repo.ErrNotEncrypted) {
		t.Errorf("plaintext object: %v, want ErrNotEncrypted", err)
	}
	// a tampered object fails authentication, and is not mistaken for a key problem
	bad := bytes.Clone(sealed)
	bad[len(bad)-20] ^= 1
	if _, err := enc.Open(bad, 1<<20); err == nil || errors.Is(err, repo.ErrNoKey) {
		t.Errorf("tampered object: %v", err)
	}
	// truncated
	if _, err := enc.Open(sealed[:len(sealed)-5], 1<<20); err == nil {
		t.Error("truncated object opened")
	}
	// an object that inflates past its limit
	if _, err := enc.Open(sealed, int64(len(plain)-1)); !errors.Is(err, repo.ErrTooLarge) {
		t.Errorf("over the limit: %v, want ErrTooLarge", err)
	}
}

func TestFingerprint(t *testing.T) {
	k := newKey(t)
	sum := sha256.Sum256([]byte(k.recipient))
	if want := hex.EncodeToString(sum[:])[:16]; k.fp != want {
		t.Errorf("fingerprint %s, want the first 16 hex digits of sha256(recipient) %s", k.fp, want)
	}
	if fp, err := crypt.Fingerprint("  " + k.recipient + "\n"); err != nil || fp != k.fp {
		t.Errorf("Fingerprint = %q, %v", fp, err)
	}
	_, pub := sshKey(t, "")
	fields := strings.Fields(pub)
	fp1, _ := crypt.Fingerprint(pub)
	fp2, _ := crypt.Fingerprint(fields[0] + " " + fields[1])
	if fp1 != fp2 || fp1 == "" {
		t.Errorf("an ssh key's comment changes its fingerprint: %q %q", fp1, fp2)
	}
	c := mustNew(t, crypt.Options{Recipients: []string{k.recipient, pub}})
	if got := c.Keys().Recipients; len(got) != 2 || got[0] != k.fp || got[1] != fp1 {
		t.Errorf("Keys().Recipients = %v", got)
	}
	if got := c.Keys().Identities; len(got) != 0 {
		t.Errorf("Keys().Identities = %v, want none", got)
	}
}

func TestKeyErrors(t *testing.T) {
	k := newKey(t)
	data, _ := os.ReadFile(k.file)
	priv := strings.TrimSpace(string(data[bytes.LastIndex(data, []byte("AGE-SECRET-KEY")):]))

	_, _, err := crypt.ParseRecipient(priv)
	if err == nil || strings.Contains(err.Error(), priv) || !strings.Contains(err.Error(), "private key") {
		t.Errorf("private key as recipient: %v", err)
	}
	if _, _, err := crypt.ParseRecipient("age1notakey"); err == nil || strings.Contains(err.Error(), "age1notakey") {
		t.Errorf("bad recipient: %v (must fail without quoting it)", err)
	}
	if _, err := crypt.New(crypt.Options{Recipients: []string{"ssh-dss AAAA"}}); err == nil || !strings.Contains(err.Error(), "encryption.recipients item 1") {
		t.Errorf("ssh-dss: %v", err)
	}

	loose := filepath.Join(t.TempDir(), "loose.key")
	os.WriteFile(loose, data, 0o644)
	os.Chmod(loose, 0o644)
	if _, err := crypt.New(crypt.Options{IdentityFile: loose}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("identity file mode 0644: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := crypt.New(crypt.Options{IdentityFile: missing}); err == nil || !strings.Contains(err.Error(), "encryption.identity_file") ||
		!strings.Contains(err.Error(), "'ompsync keygen --out "+missing+"'") {
		t.Errorf("missing identity file: %v (want the keygen that makes it)", err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage")
	os.WriteFile(garbage, []byte("AGE-SECRET-KEY-1BOGUSBOGUS\n"), 0o600)
	if _, err := crypt.New(crypt.Options{IdentityFile: garbage}); err == nil || strings.Contains(err.Error(), "BOGUS") {
		t.Errorf("bad identity file: %v (must fail without quoting it)", err)
	}
	protected, _ := sshKey(t, "hunter2")
	if _, err := crypt.New(crypt.Options{IdentityFile: protected}); err == nil || !strings.Contains(err.Error(), "passphrase-protected") {
		t.Errorf("passphrase-protected ssh key: %v", err)
	}
	if _, err := crypt.New(crypt.Options{}); err == nil {
		t.Error("no keys at all: accepted")
	}
	// age refuses to mix post-quantum and classic recipients; so does New.
	pq, err := age.GenerateHybridIdentity()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crypt.New(crypt.Options{Recipients: []string{k.recipient, pq.Recipient().String()}}); err == nil || !strings.Contains(err.Error(), "encryption.recipients") {
		t.Errorf("mixed post-quantum and classic: %v", err)
	}
}

func TestPassphrase(t *testing.T) {
	dir := t.TempDir()
	pass := filepath.Join(dir, "pass")
	os.WriteFile(pass, []byte("correct horse battery staple\n"), 0o600)
	first := mustNew(t, crypt.Options{PassphraseFile: pass, ScryptWorkFactor: 10})
	wrapped := first.Keys().PassphraseKey
	if !strings.HasPrefix(wrapped, "-----BEGIN AGE ENCRYPTED FILE-----") || strings.Contains(wrapped, "AGE-SECRET-KEY") {
		t.Fatalf("passphrase key is not an armored age file: %q", wrapped)
	}
	if len(first.Keys().Recipients) != 1 || first.Keys().Identities[0] != first.Keys().Recipients[0] {
		t.Fatalf("keys = %+v", first.Keys())
	}
	plain := sessionBytes(5000)
	sealed, err := first.Seal(plain)
	if err != nil {
		t.Fatal(err)
	}
	// Another process, with the marker's key and the same passphrase.
	again := mustNew(t, crypt.Options{PassphraseFile: pass, PassphraseKey: wrapped})
	if got, err := again.Open(sealed, 1<<20); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("reopen with the passphrase: %v", err)
	}
	if again.Keys().Recipients[0] != first.Keys().Recipients[0] || again.Keys().PassphraseKey != wrapped {
		t.Errorf("the passphrase key changed: %+v", again.Keys())
	}
	wrong := filepath.Join(dir, "wrong")
	os.WriteFile(wrong, []byte("incorrect horse\n"), 0o600)
	_, err = crypt.New(crypt.Options{PassphraseFile: wrong, PassphraseKey: wrapped})
	if !crypt.IsWrongPassphrase(err) || strings.Contains(err.Error(), "incorrect horse") {
		t.Errorf("wrong passphrase: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\nsecond line\n"), 0o600)
	if _, err := crypt.New(crypt.Options{PassphraseFile: empty}); err == nil || !strings.Contains(err.Error(), "first line is empty") {
		t.Errorf("empty passphrase: %v", err)
	}
}
