package restore

import (
	"bytes"
	"context"
	"testing"
)

// bigSlotted is a real omp file (with a title slot) grown past a few
// comparison buffers and the kept head, so that a comparison streams.
func bigSlotted(t *testing.T) corpusFile {
	t.Helper()
	f := corpus(t)[0]
	data := bytes.Clone(f.data)
	for i := 0; len(data) < 3*compareBuf+headLen; i++ {
		data = append(data, entry(itoa(0xb000_0000+i), "", base, "a line of the long session, to stream it")...)
	}
	f.data = data
	return f
}

// verify compares the local file with the remote copy as both stream,
// reaching every answer compareLocal gave with both in memory: a title
// slot that differs alone is the same file; a byte that differs is
// divergence wherever it is, in the kept head or far past it.
func TestVerifyComparesStreamed(t *testing.T) {
	r := fileRemote(t)
	f := bigSlotted(t)
	rel := sessionPath("-w", f.id, 1)
	a := newMachine(t, r, "desk")
	a.write(rel, f.data, base)
	a.backup()

	flip := func(at int) []byte {
		b := bytes.Clone(f.data)
		b[at] ^= 0x20
		return b
	}
	cut := bytes.LastIndexByte(f.data[:2*compareBuf], '\n') + 1
	for _, tc := range []struct {
		name  string
		local []byte
		want  string
	}{
		{"equal", f.data, LocalSame},
		{"older title", retitled(t, f.data, "Older", "2020-01-01T00:00:00.000Z"), LocalSame},
		{"prefix", f.data[:cut], LocalBehind},
		{"shorter than the head", f.data[:headLen/2], LocalBehind},
		{"ahead", append(bytes.Clone(f.data), entry("ffff0001", "", base, "more")...), LocalAhead},
		{"byte past the head", flip(2*compareBuf + 100), LocalDiverged},
		{"byte in the head", flip(headLen - 10), LocalDiverged},
		{"byte in the last buffer", flip(len(f.data) - 5), LocalDiverged},
		{"prefix with a byte changed", flip(cut - 3)[:cut], LocalDiverged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMachine(t, r, "laptop")
			b.write(rel, tc.local, base)
			checks, _, err := Verify(context.Background(), r, []string{f.id}, Options{AgentDir: b.agentDir})
			if err != nil || len(checks) != 1 || !checks[0].OK() {
				t.Fatalf("verify: %+v, %v", checks, err)
			}
			c := checks[0].Copies[0]
			if c.Local != tc.want || c.Bytes != int64(len(f.data)) {
				t.Fatalf("local %s (%d bytes checked), want %s (%d)", c.Local, c.Bytes, tc.want, len(f.data))
			}
		})
	}
}
