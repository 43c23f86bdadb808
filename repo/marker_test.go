package repo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/repo"
)

const secret = "MARKER-c41d-said-in-a-session"

type key struct{ file, recipient, fp string }

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
	return key{p, recipient, fp}
}

// identities writes one identity file holding the keys given.
func identities(t testing.TB, keys ...key) string {
	t.Helper()
	var all []byte
	for _, k := range keys {
		b, err := os.ReadFile(k.file)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	p := filepath.Join(t.TempDir(), "both.key")
	if err := os.WriteFile(p, all, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func codec(t testing.TB, opts crypt.Options) *crypt.Codec {
	t.Helper()
	c, err := crypt.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// snapshot is every object on the remote, key -> bytes.
func snapshot(t testing.TB, c remote.Client) map[string][]byte { return remotetest.Objects(t, c) }

var stream = repo.Stream{SessionID: "0190aaaa-0000-7000-8000-000000000001", Machine: "laptop", Name: repo.SessionStream}

const gen = "18ecbc17b1295105"

// writeSession uploads a small generation, as the agent would: chunks, meta,
// the catalog and a blob, each mentioning the secret.
func writeSession(t testing.TB, r *repo.Repo, chunks int) []byte {
	t.Helper()
	ctx := context.Background()
	if err := r.Init(ctx); err != nil {
		t.Fatal(err)
	}
	var data []byte
	for i := range chunks {
		line := []byte(fmt.Sprintf(`{"type":"message","id":"%08x","text":"%s"}`+"\n", i, secret))
		start := int64(len(data))
		data = append(data, line...)
		h := repo.ChunkHeader{Start: start, End: int64(len(data)), SHA256: repo.HashHex(line), StreamSHA256: repo.HashHex(data)}
		if _, err := r.PutChunk(ctx, stream, gen, h, line, remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	meta := repo.Meta{SessionID: stream.SessionID, Machine: stream.Machine, Stream: stream.Name, Generation: gen,
		Path: "sessions/-home-u-" + secret + "/a.jsonl", Cwd: "/home/u/" + secret, Created: time.Now()}
	if err := r.PutMeta(ctx, stream, meta); err != nil {
		t.Fatal(err)
	}
	cat := repo.Catalog{Machine: "laptop", Sessions: []repo.CatalogEntry{{ID: stream.SessionID, Path: meta.Path, Title: secret,
		Generation: gen, Size: int64(len(data)), State: repo.StatePresent}}}
	if _, err := r.PutCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	if _, err := r.PutBlob(ctx, repo.HashHex([]byte(secret)), []byte(secret)); err != nil {
		t.Fatal(err)
	}
	return data
}

func readSession(r *repo.Repo) ([]byte, error) {
	ctx := context.Background()
	invs, err := r.Inventory(ctx, stream.SessionID, stream.Machine)
	if err != nil {
		return nil, err
	}
	if len(invs) != 1 {
		return nil, fmt.Errorf("%d streams", len(invs))
	}
	as, err := r.ReadGeneration(ctx, stream, invs[0].Newest(), 1<<30)
	if err != nil {
		return nil, err
	}
	if _, err := r.GetCatalog(ctx, "laptop"); err != nil {
		return nil, err
	}
	if _, err := r.GetBlob(ctx, repo.HashHex([]byte(secret)), 1<<20); err != nil {
		return nil, err
	}
	return as.Data, nil
}

func newRemote(t testing.TB) remote.Client {
	t.Helper()
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func marker(t *testing.T, c remote.Client) *repo.Marker {
	t.Helper()
	m, err := repo.New(c, nil).ReadMarker(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// assertEncrypted checks every object but the marker is age-encrypted and
// free of the secret, and the marker holds no private key.
func assertEncrypted(t *testing.T, c remote.Client) {
	t.Helper()
	for k, b := range snapshot(t, c) {
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("AGE-SECRET-KEY")) {
			t.Errorf("%s holds the secret or a private key", k)
		}
		if k != repo.MarkerKey && !bytes.HasPrefix(b, []byte(repo.AgeHeader)) {
			t.Errorf("%s is not age-encrypted", k)
		}
	}
}

func TestEncryptedRoundTrip(t *testing.T) {
	c := newRemote(t)
	a := newKey(t)
	r := repo.New(c, codec(t, crypt.Options{IdentityFile: a.file}))
	want := writeSession(t, r, 5)
	assertEncrypted(t, c)
	m := marker(t, c)
	if m.Encryption == nil || !slices.Equal(m.Encryption.Recipients, []string{a.fp}) || m.Encryption.Scheme != "age" {
		t.Fatalf("marker encryption = %+v, want age to %s", m.Encryption, a.fp)
	}
	got, err := readSession(repo.New(c, codec(t, crypt.Options{IdentityFile: a.file})))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back: %v", err)
	}
}

func TestReadWithoutTheKey(t *testing.T) {
	c := newRemote(t)
	a, b := newKey(t), newKey(t)
	writeSession(t, repo.New(c, codec(t, crypt.Options{IdentityFile: a.file})), 2)
	before := snapshot(t, c)

	for _, tc := range []struct {
		name  string
		codec repo.Codec
		want  []string
	}{
		{"wrong identity", codec(t, crypt.Options{IdentityFile: b.file}), []string{a.fp, b.fp, "encryption.identity_file"}},
		{"recipients only", codec(t, crypt.Options{Recipients: []string{a.recipient}}), []string{a.fp, "encryption.identity_file"}},
		{"no encryption", repo.NewZstd(), []string{a.fp, "encryption.identity_file", "no encryption is configured"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readSession(repo.New(c, tc.codec))
			if !errors.Is(err, repo.ErrNoKey) {
				t.Fatalf("err = %v, want ErrNoKey", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	if err := repo.New(c, repo.NewZstd()).Check(context.Background()); !errors.Is(err, repo.ErrNoKey) || !strings.Contains(err.Error(), a.fp) {
		t.Errorf("Check without encryption: %v", err)
	}
	if !mapsEqual(before, snapshot(t, c)) {
		t.Error("reading changed the remote")
	}
}

// A plaintext object slipped into an encrypted repository is refused, not
// read as if it were the repository's.
func TestPlaintextObjectRefused(t *testing.T) {
	c := newRemote(t)
	a := newKey(t)
	r := repo.New(c, codec(t, crypt.Options{IdentityFile: a.file}))
	writeSession(t, r, 2)
	z, _ := repo.NewZstd().Seal(repo.EncodeMeta(repo.Meta{SessionID: stream.SessionID, Path: "sessions/x/evil.jsonl"}))
	if err := c.Put(context.Background(), stream.MetaKey(gen), z, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := repo.New(c, codec(t, crypt.Options{IdentityFile: a.file})).GetMeta(context.Background(), stream, gen)
	if !errors.Is(err, repo.ErrNotEncrypted) || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("plaintext meta in an encrypted repository: %v", err)
	}
}

func TestInitRefusesMixing(t *testing.T) {
	ctx := context.Background()
	a := newKey(t)

	t.Run("plaintext writer, encrypted remote", func(t *testing.T) {
		c := newRemote(t)
		writeSession(t, repo.New(c, codec(t, crypt.Options{IdentityFile: a.file})), 1)
		before := snapshot(t, c)
		err := repo.New(c, repo.NewZstd()).Init(ctx)
		if !errors.Is(err, repo.ErrEncryptionMismatch) {
			t.Fatalf("Init = %v, want ErrEncryptionMismatch", err)
		}
		for _, w := range []string{"encrypted", a.fp, "encryption.identity_file", "another remote"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
		if !mapsEqual(before, snapshot(t, c)) {
			t.Error("a refused Init changed the remote")
		}
	})

	t.Run("encrypted writer, plaintext remote with data", func(t *testing.T) {
		c := newRemote(t)
		writeSession(t, repo.New(c, repo.NewZstd()), 1)
		before := snapshot(t, c)
		err := repo.New(c, codec(t, crypt.Options{IdentityFile: a.file})).Init(ctx)
		if !errors.Is(err, repo.ErrEncryptionMismatch) {
			t.Fatalf("Init = %v, want ErrEncryptionMismatch", err)
		}
		for _, w := range []string{"unencrypted", "new, empty remote", "ompsync rekey"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
		if !mapsEqual(before, snapshot(t, c)) {
			t.Error("a refused Init changed the remote")
		}
	})

	t.Run("encrypted writer, empty plaintext remote", func(t *testing.T) {
		c := newRemote(t)
		if err := repo.New(c, repo.NewZstd()).Init(ctx); err != nil {
			t.Fatal(err)
		}
		created := marker(t, c).Created
		if err := repo.New(c, codec(t, crypt.Options{IdentityFile: a.file})).Init(ctx); err != nil {
			t.Fatalf("an empty repository may become encrypted: %v", err)
		}
		if m := marker(t, c); m.Encryption == nil || !m.Created.Equal(created) {
			t.Errorf("marker = %+v", m)
		}
	})
}

func TestInitKeyChange(t *testing.T) {
	ctx := context.Background()
	a, b, x := newKey(t), newKey(t), newKey(t)
	c := newRemote(t)
	writeSession(t, repo.New(c, codec(t, crypt.Options{IdentityFile: a.file})), 1)

	// A writer with other recipients and none of the repository's keys.
	err := repo.New(c, codec(t, crypt.Options{IdentityFile: x.file})).Init(ctx)
	if !errors.Is(err, repo.ErrEncryptionMismatch) || !strings.Contains(err.Error(), a.fp) || !strings.Contains(err.Error(), "ompsync rekey") {
		t.Fatalf("stranger's Init = %v", err)
	}
	// Adding a recipient needs a current key: a writer with access to the
	// bucket alone cannot make new objects readable to itself.
	err = repo.New(c, codec(t, crypt.Options{Recipients: []string{a.recipient, x.recipient}})).Init(ctx)
	if !errors.Is(err, repo.ErrEncryptionMismatch) || !strings.Contains(err.Error(), "only a holder of a current key") {
		t.Fatalf("adding a recipient without a key: %v", err)
	}
	if m := marker(t, c); !slices.Equal(m.Encryption.Recipients, []string{a.fp}) {
		t.Fatalf("a refused writer changed the recipients: %+v", m.Encryption)
	}
	if err := repo.New(c, codec(t, crypt.Options{Recipients: []string{a.recipient, b.recipient}, IdentityFile: a.file})).Init(ctx); err != nil {
		t.Fatalf("adding a recipient: %v", err)
	}
	if m := marker(t, c); len(m.Encryption.Recipients) != 2 || len(m.Encryption.Pending) != 0 {
		t.Errorf("after adding: %+v", m.Encryption)
	}
	// Replacing A by B, by a holder of A: B at once, A pending.
	if err := repo.New(c, codec(t, crypt.Options{Recipients: []string{b.recipient}, IdentityFile: a.file})).Init(ctx); err != nil {
		t.Fatalf("key change by a key holder: %v", err)
	}
	m := marker(t, c)
	if !slices.Equal(m.Encryption.Recipients, []string{b.fp}) || !slices.Equal(m.Encryption.Pending, []string{a.fp}) {
		t.Errorf("after the change: %+v, want recipients [%s] pending [%s]", m.Encryption, b.fp, a.fp)
	}
	// A reader with only B reads nothing written before, and is told A is pending.
	_, err = readSession(repo.New(c, codec(t, crypt.Options{IdentityFile: b.file})))
	if !errors.Is(err, repo.ErrNoKey) || !strings.Contains(err.Error(), "before the last key change: key "+a.fp) {
		t.Errorf("reader with the new key only: %v", err)
	}
}

func TestRekey(t *testing.T) {
	ctx := context.Background()
	a, b := newKey(t), newKey(t)
	c := newRemote(t)
	want := writeSession(t, repo.New(c, repo.NewZstd()), 150) // plaintext, more than two batches

	// Encrypt the plaintext repository to A, stopping after the first batch.
	stop := errors.New("interrupted")
	ra := repo.New(c, codec(t, crypt.Options{IdentityFile: a.file}))
	prog, err := ra.Rekey(ctx, repo.RekeyOptions{Progress: func(repo.RekeyProgress) error { return stop }})
	if !errors.Is(err, stop) || prog.After == "" {
		t.Fatalf("interrupted rekey: %v, %+v", err, prog)
	}
	if m := marker(t, c); !slices.Equal(m.Encryption.Pending, []string{repo.PendingPlaintext}) {
		t.Errorf("marker during conversion: %+v", m.Encryption)
	}
	// Half converted, the repository still reads, and refuses plaintext writers.
	if got, err := readSession(repo.New(c, codec(t, crypt.Options{IdentityFile: a.file}))); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read during conversion: %v", err)
	}
	if err := repo.New(c, repo.NewZstd()).Init(ctx); !errors.Is(err, repo.ErrEncryptionMismatch) {
		t.Errorf("plaintext writer during conversion: %v", err)
	}
	total := len(snapshot(t, c)) - 1
	prog, err = repo.New(c, codec(t, crypt.Options{IdentityFile: a.file})).Rekey(ctx, repo.RekeyOptions{After: prog.After})
	if err != nil {
		t.Fatal(err)
	}
	if prog.Objects >= total || prog.Objects == 0 {
		t.Errorf("resumed rekey did %d of %d objects; want only those left", prog.Objects, total)
	}
	assertEncrypted(t, c)
	if m := marker(t, c); len(m.Encryption.Pending) != 0 {
		t.Errorf("pending after rekey: %v", m.Encryption.Pending)
	}
	if prog, err := repo.New(c, codec(t, crypt.Options{IdentityFile: a.file})).Rekey(ctx, repo.RekeyOptions{}); err != nil || !prog.Nothing {
		t.Errorf("second rekey: %+v, %v; want nothing to do", prog, err)
	}

	// Replace A by B. Without A's identity, rekey stops before changing anything.
	before := snapshot(t, c)
	_, err = repo.New(c, codec(t, crypt.Options{IdentityFile: b.file})).Rekey(ctx, repo.RekeyOptions{})
	if !errors.Is(err, repo.ErrEncryptionMismatch) || !strings.Contains(err.Error(), a.fp) {
		t.Errorf("rekey without the old key: %v", err)
	}
	if !mapsEqual(before, snapshot(t, c)) {
		t.Error("a rekey that could not read changed the remote")
	}
	// Without B's identity it cannot check what it writes.
	_, err = repo.New(c, codec(t, crypt.Options{Recipients: []string{b.recipient}, IdentityFile: a.file})).Rekey(ctx, repo.RekeyOptions{})
	if err == nil || !strings.Contains(err.Error(), "encryption.identity_file") {
		t.Errorf("rekey without the new key: %v", err)
	}
	both := identities(t, a, b)
	prog, err = repo.New(c, codec(t, crypt.Options{Recipients: []string{b.recipient}, IdentityFile: both})).Rekey(ctx, repo.RekeyOptions{})
	if err != nil || prog.Objects != total {
		t.Fatalf("rekey to B: %+v, %v (want %d objects)", prog, err, total)
	}
	assertEncrypted(t, c)
	if got, err := readSession(repo.New(c, codec(t, crypt.Options{IdentityFile: b.file}))); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read with B alone: %v", err)
	}
	if _, err := readSession(repo.New(c, codec(t, crypt.Options{IdentityFile: a.file}))); !errors.Is(err, repo.ErrNoKey) {
		t.Errorf("A still reads after rekey to B: %v", err)
	}
	if m := marker(t, c); !slices.Equal(m.Encryption.Recipients, []string{b.fp}) || len(m.Encryption.Pending) != 0 {
		t.Errorf("marker after rekey to B: %+v", m.Encryption)
	}
}

func mapsEqual(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// Passphrase mode keeps its key in the marker: the first writer records it,
// later processes open it with the passphrase, and a second new key (two
// first writers at once) cannot replace it.
func TestPassphraseMarker(t *testing.T) {
	ctx := context.Background()
	c := newRemote(t)
	pass := filepath.Join(t.TempDir(), "pass")
	if err := os.WriteFile(pass, []byte("a long passphrase\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := codec(t, crypt.Options{PassphraseFile: pass, ScryptWorkFactor: 10})
	want := writeSession(t, repo.New(c, first), 3)
	assertEncrypted(t, c)
	m := marker(t, c)
	if m.Encryption.PassphraseKey != first.Keys().PassphraseKey || !slices.Equal(m.Encryption.Recipients, first.Keys().Recipients) {
		t.Fatalf("marker = %+v", m.Encryption)
	}
	again := codec(t, crypt.Options{PassphraseFile: pass, PassphraseKey: m.Encryption.PassphraseKey})
	if got, err := readSession(repo.New(c, again)); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read with the passphrase: %v", err)
	}
	if err := repo.New(c, again).Init(ctx); err != nil {
		t.Fatalf("Init with the marker's key: %v", err)
	}
	rival := codec(t, crypt.Options{PassphraseFile: pass, ScryptWorkFactor: 10}) // made without reading the marker
	if err := repo.New(c, rival).Init(ctx); !errors.Is(err, repo.ErrEncryptionMismatch) {
		t.Errorf("a second passphrase key: %v", err)
	}
	if got := marker(t, c).Encryption.PassphraseKey; got != m.Encryption.PassphraseKey {
		t.Error("the marker's passphrase key was replaced")
	}
}

// A remote whose marker is gone but whose objects are encrypted is refused
// by both kinds of writer: neither may write a marker that misdescribes it.
func TestMarkerLost(t *testing.T) {
	ctx := context.Background()
	a := newKey(t)
	c := newRemote(t)
	want := writeSession(t, repo.New(c, codec(t, crypt.Options{IdentityFile: a.file})), 2)
	if err := c.Delete(ctx, repo.MarkerKey); err != nil {
		t.Fatal(err)
	}
	for _, cd := range []repo.Codec{repo.NewZstd(), codec(t, crypt.Options{IdentityFile: a.file})} {
		err := repo.New(c, cd).Init(ctx)
		if !errors.Is(err, repo.ErrEncryptionMismatch) || !strings.Contains(err.Error(), "no marker") {
			t.Errorf("%T: Init = %v", cd, err)
		}
	}
	if m := marker(t, c); m != nil {
		t.Fatalf("a marker was written: %+v", m)
	}
	// rekey writes it again.
	if _, err := repo.New(c, codec(t, crypt.Options{IdentityFile: a.file})).Rekey(ctx, repo.RekeyOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := marker(t, c); m == nil || !slices.Equal(m.Encryption.Recipients, []string{a.fp}) || len(m.Encryption.Pending) != 0 {
		t.Errorf("marker after rekey: %+v", m)
	}
	if got, err := readSession(repo.New(c, codec(t, crypt.Options{IdentityFile: a.file}))); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read after rekey: %v", err)
	}
}

// A writer that changes the recipients while rekey runs keeps the pending
// list: rekey does not claim objects it did not see are done.
func TestRekeyRecipientsChangedMeanwhile(t *testing.T) {
	ctx := context.Background()
	a, b, x := newKey(t), newKey(t), newKey(t)
	c := newRemote(t)
	writeSession(t, repo.New(c, codec(t, crypt.Options{IdentityFile: a.file})), 100)
	once := false
	_, err := repo.New(c, codec(t, crypt.Options{Recipients: []string{b.recipient}, IdentityFile: identities(t, a, b)})).Rekey(ctx, repo.RekeyOptions{
		Progress: func(repo.RekeyProgress) error {
			if !once {
				once = true // an agent adds a recipient
				return repo.New(c, codec(t, crypt.Options{Recipients: []string{b.recipient, x.recipient}, IdentityFile: b.file})).Init(ctx)
			}
			return nil
		},
	})
	if !errors.Is(err, repo.ErrRecipientsChanged) {
		t.Fatalf("rekey = %v, want ErrRecipientsChanged", err)
	}
	if m := marker(t, c); !slices.Equal(m.Encryption.Pending, []string{a.fp}) {
		t.Errorf("pending = %v, want [%s] kept", m.Encryption.Pending, a.fp)
	}
}

// A remote that holds no repository but other data (a home folder, a
// bucket of something else, named by mistake) is not written into: Init
// refuses it, names what is there and writes nothing. Hidden names and
// lost+found do not count, and an empty remote is made a repository. On
// every backend.
func TestInitRefusesForeignData(t *testing.T) {
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		ctx := context.Background()
		c := b.Client
		for _, k := range []string{".DS_Store", "lost+found/old"} {
			if err := c.Put(ctx, k, []byte("x"), remote.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Only what does not count: a repository is made beside it.
		if err := repo.New(c, nil).Init(ctx); err != nil {
			t.Fatalf("Init beside hidden files and lost+found: %v", err)
		}
		if marker(t, c) == nil {
			t.Fatal("no marker written")
		}
		if err := c.Delete(ctx, repo.MarkerKey); err != nil {
			t.Fatal(err)
		}

		if err := c.Put(ctx, "Documents/notes.txt", []byte("mine"), remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, cd := range []repo.Codec{repo.NewZstd(), codec(t, crypt.Options{IdentityFile: newKey(t).file})} {
			err := repo.New(c, cd).Init(ctx)
			if !errors.Is(err, repo.ErrForeignData) || !strings.Contains(err.Error(), `"Documents/"`) ||
				!strings.Contains(err.Error(), "Set remote to a new or empty folder") {
				t.Errorf("%T: Init = %v, want ErrForeignData naming Documents/", cd, err)
			}
		}
		var keys []string
		for obj, err := range c.List(ctx, "", remote.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, obj.Key)
		}
		if want := []string{".DS_Store", "Documents/notes.txt", "lost+found/old"}; !slices.Equal(keys, want) {
			t.Errorf("the remote holds %q after the refusals, want %q (nothing written)", keys, want)
		}
	})
}
