package agent

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/store"
)

// An archive that inflates past the limit is an error naming it, never the
// first limit bytes taken for the whole session; one exactly at the limit
// reads whole.
func TestArchivePastLimitRefused(t *testing.T) {
	orig := corpus(t, ompFile)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(orig)
	zw.Close()
	p := filepath.Join(t.TempDir(), "x.jsonl.gz")
	if err := os.WriteFile(p, gz.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	n := int64(len(orig))
	tmp := t.TempDir()
	in, _, err := readArchiveFile(store.OMP(), p, "archive/x.jsonl.gz", n-1, tmp)
	if err == nil || !strings.Contains(err.Error(), "archive/x.jsonl.gz inflates past") {
		t.Fatalf("archive one byte past the limit: %v, %v", in, err)
	}
	if in != nil {
		t.Fatalf("an archive past the limit gave %d bytes", in.size())
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("a refused archive left %d temp files", len(left))
	}
	in, _, err = readArchiveFile(store.OMP(), p, "archive/x.jsonl.gz", n, tmp)
	if err != nil {
		t.Fatalf("archive at the limit: %v", err)
	}
	data := make([]byte, in.size())
	if _, err := in.ReadAt(data, 0); err != nil || !bytes.Equal(data, orig) {
		t.Fatalf("archive at the limit: %d bytes, %v", len(data), err)
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("a closed archive left %d temp files", len(left))
	}
}
