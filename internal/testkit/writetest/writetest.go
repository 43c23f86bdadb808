// Package writetest runs bytes through a streaming writer in tests.
package writetest

import (
	"bytes"
	"io"
)

// Through is b as the writer that wrap puts over a buffer passes it on, up
// to its Close: what project.Mapping's Writer makes of a whole file.
func Through[W io.WriteCloser](b []byte, wrap func(io.Writer) W) []byte {
	var out bytes.Buffer
	w := wrap(&out)
	_, _ = w.Write(b)
	_ = w.Close()
	return out.Bytes()
}
