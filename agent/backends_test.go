package agent

import (
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
)

func newFileClient(t *testing.T) remote.Client {
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// forEachBackend runs f against every storage backend.
func forEachBackend(t *testing.T, f func(t *testing.T, c remote.Client)) {
	t.Run("file", func(t *testing.T) { f(t, newFileClient(t)) })
}
