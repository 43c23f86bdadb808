package agent

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	data, _, err := readArchiveFile(p, "archive/x.jsonl.gz", n-1)
	if err == nil || !strings.Contains(err.Error(), "archive/x.jsonl.gz inflates past") {
		t.Fatalf("archive one byte past the limit: %d bytes, %v", len(data), err)
	}
	if data != nil {
		t.Fatalf("an archive past the limit gave %d bytes", len(data))
	}
	data, _, err = readArchiveFile(p, "archive/x.jsonl.gz", n)
	if err != nil || !bytes.Equal(data, orig) {
		t.Fatalf("archive at the limit: %d bytes, %v", len(data), err)
	}
}
