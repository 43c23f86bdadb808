package transcript

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkParse reads every real session of testdata/corpus: the
// scanner's speed, which search indexing and cat --text are bound by.
func BenchmarkParse(b *testing.B) {
	files, _ := filepath.Glob("../testdata/corpus/*.jsonl")
	var data []byte
	for _, f := range files {
		d, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		data = append(data, d...)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		Entries(data, nil, func(Entry) bool { return true })
	}
}
