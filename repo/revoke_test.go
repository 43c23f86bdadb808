package repo_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/repo"
)

// Rotating recipients {K1, K2} to {K1, K3} revokes K2 for good: a writer
// that still encrypts to K2 (a running one, a restarted one holding K1 or
// K2) is refused, told which key and what to change; a machine holding
// only K2 reads nothing written after and writes nothing; the marker never
// changes back. The change itself is logged at WARN with fingerprints.
func TestRevocationHolds(t *testing.T) {
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		ctx := context.Background()
		c := b.Client
		k1, k2, k3 := newKey(t), newKey(t), newKey(t)
		stale := func(id key) *repo.Repo {
			return repo.New(c, codec(t, crypt.Options{Recipients: []string{k1.recipient, k2.recipient}, IdentityFile: id.file}))
		}
		writeSession(t, stale(k1), 3)
		running := stale(k2)
		if err := running.Init(ctx); err != nil {
			t.Fatal(err)
		}

		var logged bytes.Buffer
		rot := repo.New(c, codec(t, crypt.Options{Recipients: []string{k1.recipient, k3.recipient}, IdentityFile: identities(t, k1, k3)}))
		rot.SetLog(slog.New(slog.NewTextHandler(&logged, nil)))
		if _, err := rot.Rekey(ctx, repo.RekeyOptions{}); err != nil {
			t.Fatal(err)
		}
		if s := logged.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, k3.fp) || !strings.Contains(s, k2.fp) {
			t.Errorf("the change of recipients was not logged at WARN with the fingerprints: %q", s)
		}
		m := marker(t, c)
		if !slices.Contains(m.Encryption.Removed, k2.fp) || len(m.Encryption.Pending) != 0 {
			t.Fatalf("marker after the rotation: %+v", m.Encryption)
		}
		want := snapshot(t, c)[repo.MarkerKey]
		// A new object only the current keys open.
		if _, err := rot.PutBlob(ctx, repo.HashHex([]byte("after")), []byte("after the rotation")); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, c)

		refused := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, repo.ErrEncryptionMismatch) || !strings.Contains(err.Error(), k2.fp) {
				t.Errorf("%s: %v, want a refusal naming %s", what, err, k2.fp)
				return
			}
			for _, k := range []key{k1, k2, k3} {
				id, _ := os.ReadFile(k.file)
				for _, line := range strings.Split(string(id), "\n") {
					if strings.HasPrefix(line, "AGE-SECRET-KEY") && strings.Contains(err.Error(), line) {
						t.Errorf("%s: the error shows an identity", what)
					}
				}
			}
		}
		// The writer that was running: refused at its next batch.
		running.RecheckBeforeWrite()
		refused("running writer's next batch", running.CheckWrite(ctx))
		_, err := running.PutBlob(ctx, repo.HashHex([]byte("stale")), []byte("stale"))
		refused("running writer's put", err)
		// Restarted, with either identity, and rekey by a stale machine.
		refused("restart holding K2", stale(k2).Init(ctx))
		refused("restart holding K1", stale(k1).Init(ctx))
		_, err = stale(k1).Rekey(ctx, repo.RekeyOptions{})
		refused("rekey holding K1 with the stale list", err)
		// Holding only K2: reads nothing new, writes nothing.
		only := repo.New(c, codec(t, crypt.Options{IdentityFile: k2.file}))
		if err := only.Init(ctx); !errors.Is(err, repo.ErrEncryptionMismatch) {
			t.Errorf("a writer holding only K2: %v", err)
		}
		if _, err := only.GetBlob(ctx, repo.HashHex([]byte("after")), 1<<20); !errors.Is(err, repo.ErrNoKey) {
			t.Errorf("a reader holding only K2 read a new object: %v", err)
		}
		if _, err := only.Rekey(ctx, repo.RekeyOptions{}); !errors.Is(err, repo.ErrEncryptionMismatch) {
			t.Errorf("rekey holding only K2: %v", err)
		}
		// And one holding no current key cannot add itself.
		k4 := newKey(t)
		err = repo.New(c, codec(t, crypt.Options{Recipients: []string{k1.recipient, k3.recipient, k4.recipient}, IdentityFile: k4.file})).Init(ctx)
		if !errors.Is(err, repo.ErrEncryptionMismatch) {
			t.Errorf("a stranger adding its key: %v", err)
		}
		if got := snapshot(t, c)[repo.MarkerKey]; !bytes.Equal(got, want) {
			t.Errorf("the marker changed after the rotation:\n%s\nwas\n%s", got, want)
		}
		after := snapshot(t, c)
		for k, v := range after {
			if !bytes.Equal(v, before[k]) {
				t.Errorf("a refused writer put %s", k)
			}
		}
		if len(after) != len(before) {
			t.Errorf("%d objects after the refusals, %d before", len(after), len(before))
		}
	})
}

// A plaintext writer that meets an encrypted object, whole or streamed,
// reads the marker again before its next put: the repository may have been
// encrypted since it last looked, and it must not put plaintext there.
func TestOpeningAnAgeObjectRechecksTheMarker(t *testing.T) {
	ctx := context.Background()
	k := newKey(t)
	for _, tc := range []struct {
		name string
		read func(r *repo.Repo, blob string) error
	}{
		{"whole", func(r *repo.Repo, blob string) error { _, err := r.GetBlob(ctx, blob, 1<<20); return err }},
		{"streamed", func(r *repo.Repo, blob string) error {
			rc, err := r.OpenBlob(ctx, blob, 1<<20)
			if err == nil {
				rc.Close()
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := file.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			plain := repo.New(c, repo.NewZstd())
			if err := plain.Init(ctx); err != nil {
				t.Fatal(err)
			}
			if err := plain.CheckWrite(ctx); err != nil {
				t.Fatal(err)
			}
			enc := repo.New(c, codec(t, crypt.Options{Recipients: []string{k.recipient}, IdentityFile: k.file}))
			if _, err := enc.Rekey(ctx, repo.RekeyOptions{}); err != nil {
				t.Fatal(err)
			}
			blob := repo.HashHex([]byte(tc.name))
			if _, err := enc.PutBlob(ctx, blob, []byte(tc.name)); err != nil {
				t.Fatal(err)
			}
			if err := tc.read(plain, blob); !errors.Is(err, repo.ErrNoKey) {
				t.Fatalf("read an encrypted blob without a key: %v", err)
			}
			if err := plain.CheckWrite(ctx); !errors.Is(err, repo.ErrEncryptionMismatch) {
				t.Errorf("the next put's check after meeting an encrypted object: %v, want a refusal", err)
			}
		})
	}
}
