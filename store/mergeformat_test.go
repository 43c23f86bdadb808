package store

import (
	"bytes"
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/mergeref"
)

// FuzzMergeFormat: for every agent that merges, the streamed merge
// (session.Index, as restore runs it) writes the bytes of the in-memory
// reference merge, seeded with the real clients' files cut and grown apart.
func FuzzMergeFormat(f *testing.F) {
	for _, client := range []string{"pi", "claude"} {
		for _, fx := range fixtures(f, client) {
			d := fx.data
			half := bytes.LastIndexByte(d[:len(d)/2], '\n') + 1
			lines := bytes.SplitAfter(d[half:], []byte("\n"))
			f.Add(d, append(bytes.Clone(d[:half]), lines[len(lines)-1]...))
			f.Add(d[:half], bytes.Join(append(lines[1:], d[:half]), nil))
		}
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		for _, st := range Known() {
			mf, ok := st.MergeFormat()
			if !ok {
				continue
			}
			want, err := mergeref.Merge(mf, a, b)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if _, err := mergeref.MergeTo(mf, &got, 1<<30, mergeref.ByteSources(a, b)...); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("%s: the streamed merge (%d bytes) differs from Merge (%d)", st.Name(), got.Len(), len(want))
			}
		}
	})
}
