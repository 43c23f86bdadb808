package agent

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/compact"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote/backend"
)

// With a key that may not delete (MinIO, s3:DeleteObject denied) the
// running agent says once that compaction and retention are left to
// another machine, stops trying them, and goes on backing up; what the
// refused compaction left reads back byte for byte. Both S3 clients.
func TestRunNoDeleteKey(t *testing.T) {
	srv := remotetest.MinioServer(t)
	if srv == nil {
		t.Skip("no MinIO server (OMPSYNC_TEST_MINIO_*)")
	}
	for _, client := range backend.Clients("s3") {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			bucket := srv.NewBucket(t)
			c, err := backend.Open(t.Context(), "s3://"+bucket, remotetest.NoDeleteKey(t, srv, client, bucket))
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, c)
			var logs lockedBuffer
			e.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			e.opts.Interval = 20 * time.Millisecond
			e.opts.Compaction = compact.Policy{MaxChunks: 4, Idle: 300 * time.Millisecond}
			e.writeRename(ompRel, corpus(t, ompFile))
			e.runAgent()
			warned := func() int { return strings.Count(logs.String(), "level=WARN msg=\""+NoDeleteMessage) }
			for i := 0; warned() == 0; i++ {
				if i == 600 {
					t.Fatalf("no WARN that deletes are refused after %d appends:\n%s", i, logs.String())
				}
				e.appendTo(ompRel, entryLine(fmt.Sprintf("c%07d", i), "", "busy"))
				waitFor(t, "the append up", func() bool {
					n, _ := e.remoteSize(ompID)
					return n == int64(len(e.read(ompRel)))
				})
			}
			// Backing up goes on, and compaction is not tried again.
			for i := range 20 {
				e.appendTo(ompRel, entryLine(fmt.Sprintf("d%07d", i), "", "after"))
				waitFor(t, "the append up", func() bool {
					n, _ := e.remoteSize(ompID)
					return n == int64(len(e.read(ompRel)))
				})
			}
			e.assertRemoteEquals(ompRel, ompID)
			if n := warned(); n != 1 {
				t.Errorf("said %d times that deletes are refused, want once:\n%s", n, logs.String())
			}
			if out := logs.String(); strings.Contains(out, "compaction failed") || strings.Contains(out, "retention failed") {
				t.Errorf("a refused delete also said as a failure:\n%s", out)
			}
		})
	}
}
