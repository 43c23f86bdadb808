package agent

import (
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
)

func TestMain(m *testing.M) { remotetest.Main(m) }

func newFileClient(t *testing.T) remote.Client {
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// forEachBackend runs f against every storage backend: the file driver and
// versitygw through both S3 clients.
func forEachBackend(t *testing.T, f func(t *testing.T, c remote.Client)) {
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) { f(t, b.Client) })
}
