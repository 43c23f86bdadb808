package transcript

import (
	"bytes"
	"testing"
)

// BenchmarkParse reads every real session of testdata/corpus: the
// scanner's speed, which search indexing and cat --text are bound by.
func BenchmarkParse(b *testing.B) {
	_, files := corpusFiles(b)
	data := bytes.Join(files, nil)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		Entries(data, nil, func(Entry) bool { return true })
	}
}
