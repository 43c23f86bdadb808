package remote

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// endless gives the same byte forever, as a hostile server's body may.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// A retried conditional put is decided by what the key stores: the same
// bytes, and nothing more or less, whatever the stored body does.
func TestSameBytes(t *testing.T) {
	src := strings.Repeat("a", 3*readBlock+5)
	r := strings.NewReader(src)
	size := int64(len(src))
	for _, c := range []struct {
		name   string
		stored io.Reader
		want   bool
	}{
		{"equal", strings.NewReader(src), true},
		{"shorter", strings.NewReader(src[:len(src)-1]), false},
		{"longer", strings.NewReader(src + "a"), false},
		{"one byte differs", strings.NewReader(src[:readBlock] + "b" + src[readBlock+1:]), false},
		{"endless", endless{}, false},
	} {
		got, err := sameBytes(context.Background(), c.stored, r, size)
		if err != nil || got != c.want {
			t.Errorf("%s: sameBytes = %v, %v; want %v, nil", c.name, got, err, c.want)
		}
	}
	// A source that changed since (now shorter) is not what was put.
	if got, err := sameBytes(context.Background(), strings.NewReader(src), bytes.NewReader([]byte(src[:10])), size); got || err != nil {
		t.Errorf("short source: sameBytes = %v, %v; want false, nil", got, err)
	}
}
