package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
)

// A machine whose key may not delete (MinIO, a policy denying
// s3:DeleteObject) backs up, restores and syncs; compact and prune say in
// one line that they need a key allowed to delete, and leave a repository
// that restores byte for byte (a merged chunk beside the chunks it was to
// replace); with the admin key they run. Both S3 clients.
func TestNoDeleteKey(t *testing.T) {
	srv := remotetest.MinioServer(t)
	if srv == nil {
		t.Skip("no MinIO server (OMPSYNC_TEST_MINIO_*)")
	}
	for _, client := range backend.Clients("s3") {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			bucket := srv.NewBucket(t)
			url := "s3://" + bucket
			admin := remotetest.AdminKey(srv, client)
			limited := remotetest.NoDeleteKey(t, srv, client, bucket)
			env := func(s3 backend.S3Options, machine string) *restoreEnv {
				e := newRestoreEnv(t, url, s3, machine)
				if s3.SessionToken != "" {
					e.env["OMPSYNC_S3_SESSION_TOKEN"] = s3.SessionToken
				}
				return e
			}

			// Uploads, restore and sync with the limited key.
			desk := env(limited, "desk")
			files := corpusSessions(t)
			for i, f := range files {
				desk.write(f.rel, f.data, mtime0.Add(time.Duration(i)*time.Minute))
			}
			if r := desk.run("agent", "--once"); r.code != 0 {
				t.Fatalf("agent --once with a key that may not delete: %d %s", r.code, r.stderr)
			}
			ac, err := backend.Open(ctx, url, admin)
			if err != nil {
				t.Fatal(err)
			}
			if keys := remoteKeys(t, ac); !containsPart(keys, "/desk/") {
				t.Fatalf("nothing of desk on the server: %q", keys)
			}
			lost := files[0]
			if err := os.Remove(desk.path(lost.rel)); err != nil {
				t.Fatal(err)
			}
			if r := desk.run("restore", lost.id[:8]); r.code != 0 {
				t.Fatalf("restore: %d %s", r.code, r.stderr)
			}
			if got, err := os.ReadFile(desk.path(lost.rel)); err != nil || !bytes.Equal(got, lost.data) {
				t.Fatalf("restored %s: %v, %d bytes, want %d", lost.rel, err, len(got), len(lost.data))
			}
			puller := env(limited, "puller")
			puller.env["OMPSYNC_SYNC_PULL"] = "true"
			if r := puller.run("agent", "--once"); r.code != 0 {
				t.Fatalf("agent --once pulling: %d %s", r.code, r.stderr)
			}
			for _, f := range files {
				if got, err := os.ReadFile(puller.path(f.rel)); err != nil || !bytes.Equal(got, f.data) {
					t.Errorf("pulled %s: %v, %d bytes, want %d", f.rel, err, len(got), len(f.data))
				}
			}

			// A stream of many chunks and a superseded generation, for
			// compact and prune to work on.
			id, rel, data := putCompactable(t, ac, "laptop")
			laptop := env(limited, "laptop")
			for _, cmd := range []string{"compact", "prune"} {
				res := laptop.run(cmd)
				if res.code != exitFailure || !strings.Contains(res.stderr, errNoDelete.Error()) {
					t.Errorf("%s with a key that may not delete: exit %d, stderr %q; want 1 and %q", cmd, res.code, res.stderr, errNoDelete)
				}
				oneErrorLine(t, res)
			}
			// What the refused compaction left restores whole.
			if res := laptop.run("restore", id[:8]); res.code != 0 {
				t.Fatalf("restore after a refused compaction: %d %s", res.code, res.stderr)
			}
			if got, err := os.ReadFile(laptop.path(rel)); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("restored after a refused compaction: %v, %d bytes, want %d", err, len(got), len(data))
			}

			// The admin key runs them.
			owner := env(admin, "laptop")
			before := len(remoteKeys(t, ac))
			for _, cmd := range []string{"compact", "prune"} {
				if res := owner.run(cmd); res.code != 0 {
					t.Errorf("%s with the admin key: exit %d\n%s%s", cmd, res.code, res.stdout, res.stderr)
				}
			}
			if after := len(remoteKeys(t, ac)); after >= before-20 {
				t.Errorf("compact and prune with the admin key: %d objects, were %d", after, before)
			}
			if err := os.Remove(owner.path(rel)); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if res := owner.run("restore", id[:8]); res.code != 0 {
				t.Fatalf("restore after compact and prune: %d %s", res.code, res.stderr)
			}
			if got, err := os.ReadFile(owner.path(rel)); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("restored after compact and prune: %v, %d bytes, want %d", err, len(got), len(data))
			}
		})
	}
}

func containsPart(keys []string, part string) bool {
	for _, k := range keys {
		if strings.Contains(k, part) {
			return true
		}
	}
	return false
}

// putCompactable puts, for machine, a session stream of 20 chunks and a
// superseded generation 40 days old, listed in machine's catalog: work for
// compact (the chunks) and prune (the old generation). It returns the
// session's id, path and bytes.
func putCompactable(t *testing.T, c remote.Client, machine string) (id, rel string, data []byte) {
	t.Helper()
	r := repo.New(c, repo.NewZstd())
	id = "0199a3f2-7d1c-7000-8000-00000000d0d0"
	rel = "sessions/-work/x_" + id + ".jsonl"
	s := repo.Stream{SessionID: id, Machine: machine, Name: repo.SessionStream}
	for i := range 400 {
		data = fmt.Appendf(data, `{"type":"message","n":%d,"text":"%s"}`+"\n", i, strings.Repeat("x", i%50))
	}
	old := repo.NewGeneration(time.Now().Add(-40 * 24 * time.Hour).UnixNano())
	cur := repo.NewGeneration(time.Now().Add(-35 * 24 * time.Hour).UnixNano())
	putGeneration(t, r, s, old, data[:bytes.LastIndexByte(data[:1000], '\n')+1], 3)
	putGeneration(t, r, s, cur, data, 20)
	if _, err := r.PutCatalog(context.Background(), repo.Catalog{Machine: machine, Sessions: []repo.CatalogEntry{
		{ID: id, Path: rel, Generation: cur, Size: int64(len(data)), State: repo.StatePresent},
	}}); err != nil {
		t.Fatal(err)
	}
	return id, rel, data
}
