package crypt_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/repo"
)

// openReader reads all of OpenReader's plaintext.
func openReader(c repo.Codec, sealed []byte, limit int64) ([]byte, error) {
	rc, err := c.OpenReader(bufio.NewReader(bytes.NewReader(sealed)), limit)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// OpenReader gives what Open gives, and refuses what Open refuses, as the
// object streams through it.
func TestOpenReader(t *testing.T) {
	k, other := newKey(t), newKey(t)
	enc := mustNew(t, crypt.Options{IdentityFile: k.file})
	plain := sessionBytes(300_000)
	sealed, err := enc.Seal(plain)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := openReader(enc, sealed, int64(len(plain))); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open as a stream: %d bytes, %v", len(got), err)
	}
	if _, err := openReader(mustNew(t, crypt.Options{IdentityFile: other.file}), sealed, 1<<20); !errors.Is(err, repo.ErrNoKey) {
		t.Errorf("wrong identity: %v", err)
	}
	if _, err := openReader(mustNew(t, crypt.Options{Recipients: []string{k.recipient}}), sealed, 1<<20); !errors.Is(err, repo.ErrNoKey) {
		t.Errorf("no identity: %v", err)
	}
	if _, err := openReader(repo.NewZstd(), sealed, 1<<20); !errors.Is(err, repo.ErrNoKey) || !strings.Contains(err.Error(), "no encryption is configured") {
		t.Errorf("zstd codec on an age object: %v", err)
	}
	z, _ := repo.NewZstd().Seal(plain)
	if _, err := openReader(enc, z, 1<<20); !errors.Is(err, repo.ErrNotEncrypted) {
		t.Errorf("plaintext object: %v, want ErrNotEncrypted", err)
	}
	bad := bytes.Clone(sealed)
	bad[len(bad)-20] ^= 1
	if _, err := openReader(enc, bad, 1<<20); err == nil || errors.Is(err, repo.ErrNoKey) {
		t.Errorf("tampered object: %v", err)
	}
	if _, err := openReader(enc, sealed[:len(sealed)-5], 1<<20); err == nil {
		t.Error("truncated object opened")
	}
	if _, err := openReader(enc, sealed, int64(len(plain)-1)); !errors.Is(err, repo.ErrTooLarge) {
		t.Errorf("over the limit: %v, want ErrTooLarge", err)
	}
}
