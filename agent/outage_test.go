package agent

import (
	"bytes"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
)

// lockedBuffer collects log output from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The S3 server goes away while sessions grow and comes back: the agent keeps
// watching, its memory stays bounded, it says so once each way, and it
// catches up with nothing lost.
func TestRemoteOutage(t *testing.T) {
	for _, client := range backend.Clients("s3") {
		t.Run(client, func(t *testing.T) {
			srv := remotetest.StartServer(t)
			raw, err := backend.OpenRaw(t.Context(), "s3://"+srv.NewBucket(t), backend.S3Options{
				Client: client, Endpoint: srv.Endpoint, Region: "us-east-1", PathStyle: true,
				AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey,
			})
			if err != nil {
				t.Fatal(err)
			}
			c := remote.WithRetry(raw, remote.RetryPolicy{MaxAttempts: 2, Base: 50 * time.Millisecond, Max: 200 * time.Millisecond})
			e := newEnv(t, c)
			var logs lockedBuffer
			e.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			e.opts.Interval = 100 * time.Millisecond
			e.writeRename(ompRel, corpus(t, ompFile))
			e.runAgent()
			waitFor(t, "first upload", func() bool { return len(chunkPuts(e.client.takePutsKeep())) > 0 })

			srv.Stop()
			// 48 MiB appended while the remote is down: an agent that
			// buffered pending data would hold it all. (What the agent
			// holds does not depend on the S3 client: with the other
			// client the outage is 6 MiB, the catch-up under -race being
			// most of this test's time.)
			line := strings.Repeat("o", 64<<10)
			var peak uint64
			lines := 768
			if client != backend.Clients("s3")[0] {
				lines = 96
			}
			for i := range lines {
				e.appendTo(ompRel, []byte(fmt.Sprintf(`{"type":"message","id":"%08x","parentId":null,"text":"%s"}`+"\n", i, line)))
				if i%64 == 0 {
					time.Sleep(50 * time.Millisecond)
					// Live heap: what the agent retains, not garbage.
					runtime.GC()
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapAlloc)
				}
			}
			time.Sleep(time.Second)
			srv.Start(t)
			want := int64(len(e.read(ompRel)))
			// 48 MiB under -race: on a loaded machine this takes more
			// than a minute.
			waitUpTo(t, "catch-up after the outage", 5*time.Minute, func() bool {
				n, _ := e.remoteSize(ompID)
				return n == want
			})
			e.assertRemoteEquals(ompRel, ompID)
			t.Logf("live heap peaked at %d MiB during the outage", peak>>20)
			if peak > 40<<20 {
				t.Errorf("live heap peaked at %d MiB during the outage", peak>>20)
			}
			out := logs.String()
			if n := strings.Count(out, "remote unreachable"); n != 1 {
				t.Errorf("%d 'remote unreachable' lines, want 1:\n%s", n, out)
			}
			if n := strings.Count(out, "remote reachable again"); n != 1 {
				t.Errorf("%d 'remote reachable again' lines, want 1:\n%s", n, out)
			}
			if strings.Contains(out, srv.SecretKey) {
				t.Error("the secret key appears in the log")
			}
		})
	}
}
