package remote_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
)

// SumsFor keeps the first pass's checksums for later tries: a try that
// needs MD5 where the kept sums have none computes them again, and refuses
// a source whose bytes changed since (its SHA-256 no longer the kept one).
func TestSumsForKeepsTheFirstPass(t *testing.T) {
	data := bytes.Repeat([]byte("kept checksums "), 1000)
	src := &remotetest.ChangingSource{Data: data, Clean: 1}
	var kept remote.Sums
	first, err := remote.SumsFor(t.Context(), src, int64(len(data)), false, &kept)
	if err != nil {
		t.Fatal(err)
	}
	// Kept: no second pass, whatever the source holds now.
	again, err := remote.SumsFor(t.Context(), src, int64(len(data)), false, &kept)
	if err != nil || again.SHA256 != first.SHA256 {
		t.Fatalf("second try without MD5: %v, sums changed %v", err, again.SHA256 != first.SHA256)
	}
	// MD5 asked for: a new pass, which now reads the changed bytes.
	if _, err := remote.SumsFor(t.Context(), src, int64(len(data)), true, &kept); !errors.Is(err, remote.ErrSourceChanged) {
		t.Fatalf("a try wanting MD5 over a changed source: %v, want ErrSourceChanged", err)
	}
	// Nothing kept: each call is its own pass.
	if _, err := remote.SumsFor(t.Context(), bytes.NewReader(data), int64(len(data)), true, nil); err != nil {
		t.Fatal(err)
	}
}
