package store

import (
	"testing"

	"github.com/ompsync/ompsync/repo"
)

// The names omp gives its sidecars are never backed up as sessions; its
// blob links are blobs; the archive's artifact folder is not a session.
func TestClassifyOmpNames(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for rel, want := range map[string]Kind{
		"sessions/-work/2026-10-07T00-45-40-854Z_01a1.jsonl":              KindSession,
		"sessions/-work/.2026-10-07T00-45-40-854Z_01a1.jsonl.lock":        KindIgnored, // omp's append lock
		"sessions/-work/2026-10-07T00-45-40-854Z_01a1.jsonl.lock":         KindIgnored, // pi-utils file-lock
		"sessions/-work/2026-10-07T00-45-40-854Z_01a1.jsonl.lock.os":      KindIgnored, // macOS OS lock
		"sessions/-work/.2026-10-07T00-45-40-854Z_01a1.jsonl.1234567.tmp": KindIgnored, // whole-file rewrite
		"sessions/-work/2026-10-07T00-45-40-854Z_01a1.jsonl.1234567.bak":  KindIgnored, // EPERM rename, no dot
		"sessions/-work/2026-10-07T00-45-40-854Z_01a1/tool-1.log":         KindArtifact,
		"blobs/" + sha:          KindBlob,
		"blobs/" + sha + ".png": KindBlob,
		"archive/sessions/-work/2026-10-07T00-45-40-854Z_01a1.jsonl.gz":         KindArchive,
		"archive/sessions/-work/2026-10-07T00-45-40-854Z_01a1.jsonl.gz.9.1.tmp": KindIgnored,
		"archive/sessions/-work/2026-10-07T00-45-40-854Z_01a1/tool-1.log":       KindIgnored, // backed up while live
		"auth.json": KindIgnored,
		"agent.db":  KindIgnored,
	} {
		if got := OMP().Classify(rel); got != want {
			t.Errorf("Classify(%q) = %v, want %v", rel, got, want)
		}
	}
	if b, e, ok := repo.BlobLink(sha + ".png"); !ok || b != sha || e != "png" {
		t.Errorf("BlobLink(<sha>.png) = %q %q %v", b, e, ok)
	}
	for _, name := range []string{sha, sha + ".", sha + ".PNG", "abc.png", sha + ".png.tmp"} {
		if _, _, ok := repo.BlobLink(name); ok {
			t.Errorf("BlobLink(%q) = ok", name)
		}
	}
}
