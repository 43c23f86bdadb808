package restore

import (
	"strings"
	"testing"

	"github.com/ompsync/ompsync/store"
)

// keepsLocalBody, the last check before a merge is written, reads both
// files through: a merge that holds every local line (any order, a newer
// slot) passes; one that drops a line, holds a repeated line fewer times,
// or is shorter is refused. Lines longer than its buffer are read whole.
func TestKeepsLocalBody(t *testing.T) {
	f := format{st: store.OMP(), slotted: true, lines: true}
	long := strings.Repeat("x", 3*compareBuf)
	local := "a\nb\n" + long + "\nb\nlast, no newline"
	for _, tc := range []struct {
		name, data string
		ok         bool
	}{
		{"the same", local, true},
		{"appended to", local + "\nmore\n", true},
		{"reordered", "b\nlast, no newline\n" + long + "\nb\na\nnew\n", true},
		{"a line lost", "a\nb\n" + long + "\nlast, no newline\nnew line longer\n", false},
		{"a repeat lost", "a\nb\n" + long + "\nlast, no newline\nnew\nnew\n", false},
		{"the long line cut", "a\nb\n" + long[1:] + "\nb\nlast, no newline\nnew\n", false},
		{"shorter", "a\nb\n", false},
	} {
		err := keepsLocalBody(memBody([]byte(local)), content{src: memBody([]byte(tc.data))}, f)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
