package repo_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/repo"
)

// rekey re-encrypts every agent's objects, not only omp's, and each agent's
// sessions read back with the new key.
func TestRekeyAgentObjects(t *testing.T) {
	a := newKey(t)
	c := newRemote(t)
	plain := repo.New(c, repo.NewZstd())
	want := writeSession(t, plain, 3)
	pi, err := plain.Agent("claude")
	if err != nil {
		t.Fatal(err)
	}
	if got := writeSession(t, pi, 5); bytes.Equal(got, want) {
		t.Fatal("the two sessions should differ")
	}
	if _, err := repo.New(c, codec(t, crypt.Options{IdentityFile: a.file})).Rekey(context.Background(), repo.RekeyOptions{}); err != nil {
		t.Fatal(err)
	}
	assertEncrypted(t, c)
	enc := repo.New(c, codec(t, crypt.Options{IdentityFile: a.file}))
	if got, err := readSession(enc); err != nil || !bytes.Equal(got, want) {
		t.Errorf("omp's session after rekey: %v", err)
	}
	encPi, _ := enc.Agent("claude")
	if got, err := readSession(encPi); err != nil || len(got) <= len(want) {
		t.Errorf("claude's session after rekey: %d bytes, %v", len(got), err)
	}
}
