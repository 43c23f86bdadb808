package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
)

// A bucket a user protected as docs/SECURITY.md recommends, with
// versioning or with object lock (default GOVERNANCE retention), works
// with both S3 clients: the agent backs up, a second machine syncs and a
// lost session restores byte for byte; conditional puts still refuse and
// allow as on a plain bucket; compact and prune run, their deletes leave
// delete markers over versions the server keeps, and no listing shows a
// deleted object, and folders of delete markers (MinIO still lists them)
// count as empty; verify exits 0 afterwards.
func TestProtectedBucket(t *testing.T) {
	srv := remotetest.MinioServer(t)
	if srv == nil {
		t.Skip("no MinIO server (OMPSYNC_TEST_MINIO_*)")
	}
	for _, kind := range []string{remotetest.BucketVersioned, remotetest.BucketLocked} {
		for _, client := range backend.Clients("s3") {
			t.Run(kind+"/"+client, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				bucket := remotetest.NewProtectedBucket(t, srv, kind)
				const prefix = "backup/"
				url := "s3://" + bucket + "/" + strings.TrimSuffix(prefix, "/")
				key := remotetest.AdminKey(srv, client)

				// What was under the prefix before was deleted: only a
				// delete marker is left, which MinIO's delimiter listing
				// still names as a folder. The prefix is empty for ompsync.
				ac, err := backend.Open(ctx, url, key)
				if err != nil {
					t.Fatal(err)
				}
				remotetest.Put(t, ac, "old/notes.txt", []byte("x"))
				if err := ac.Delete(ctx, "old/notes.txt"); err != nil {
					t.Fatal(err)
				}

				// Back up, restore a lost session, sync to a second machine.
				desk := newRestoreEnv(t, url, key, "desk")
				// A few small sessions keep the four runs short.
				files := slices.DeleteFunc(corpusSessions(t), func(f corpusSession) bool { return len(f.data) > 64<<10 })
				for i, f := range files {
					desk.write(f.rel, f.data, mtime0.Add(time.Duration(i)*time.Minute))
				}
				if r := desk.run("agent", "--once"); r.code != 0 {
					t.Fatalf("agent --once: %d %s", r.code, r.stderr)
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
				puller := newRestoreEnv(t, url, key, "puller")
				puller.env["OMPSYNC_SYNC_PULL"] = "true"
				if r := puller.run("agent", "--once"); r.code != 0 {
					t.Fatalf("agent --once pulling: %d %s", r.code, r.stderr)
				}
				for _, f := range files {
					if got, err := os.ReadFile(puller.path(f.rel)); err != nil || !bytes.Equal(got, f.data) {
						t.Errorf("pulled %s: %v, %d bytes, want %d", f.rel, err, len(got), len(f.data))
					}
				}
				if kind == remotetest.BucketLocked {
					// What the agent put is locked: the default retention
					// applied. (MinIO takes the signed SHA-256 as well; that
					// every put carries the Content-MD5 AWS requires here
					// the protocol test checks.)
					catalog := prefix + "v1/machines/desk/catalog"
					v := keptVersion(t, remotetest.Versions(t, srv, bucket), catalog)
					if mode, until := remotetest.Retention(t, srv, bucket, catalog, v); mode != "GOVERNANCE" || !until.After(time.Now()) {
						t.Errorf("retention of %s: %q until %v, want GOVERNANCE in the future", catalog, mode, until)
					}
				}

				probeConditionalPuts(t, srv, bucket, client)

				// compact and prune delete: each delete leaves a marker over
				// the version the server keeps.
				id, rel, data := putCompactable(t, ac, "laptop")
				before := remoteKeys(t, ac)
				laptop := newRestoreEnv(t, url, key, "laptop")
				for _, cmd := range []string{"compact", "prune"} {
					if r := laptop.run(cmd); r.code != 0 {
						t.Errorf("%s: exit %d\n%s%s", cmd, r.code, r.stdout, r.stderr)
					}
				}
				after := remoteKeys(t, ac)
				var gone []string
				for _, k := range before {
					if !slices.Contains(after, k) {
						gone = append(gone, prefix+k)
					}
				}
				if len(gone) < 20 {
					t.Fatalf("compact and prune removed %d objects, want the 20 compacted chunks and the old generation: %q", len(gone), gone)
				}
				current, marked, kept := versionsByKey(remotetest.Versions(t, srv, bucket))
				for _, k := range gone {
					if !marked[k] || kept[k] == 0 {
						t.Errorf("%s deleted: delete marker %v, %d versions kept; want a marker over the kept version", k, marked[k], kept[k])
					}
				}
				var listed []string
				for _, k := range after {
					listed = append(listed, prefix+k)
				}
				current = slices.DeleteFunc(current, func(k string) bool { return !strings.HasPrefix(k, prefix) })
				if cur := slices.Sorted(slices.Values(current)); !slices.Equal(listed, cur) {
					t.Errorf("the drivers' listing is not the server's current objects:\nlisted  %q\ncurrent %q", listed, cur)
				}

				if kind == remotetest.BucketLocked {
					// A deleted chunk's kept version cannot be destroyed
					// even with the root key while its retention runs.
					v := keptVersion(t, remotetest.Versions(t, srv, bucket), gone[0])
					err := remotetest.DeleteVersion(t, srv, bucket, gone[0], v)
					if err == nil {
						t.Errorf("deleting the kept version of %s under GOVERNANCE retention succeeded", gone[0])
					}
				}

				// The backup goes on: desk's next change reaches the puller.
				grown := append(slices.Clone(files[0].data), files[0].data[bytes.IndexByte(files[0].data, '\n')+1:]...)
				desk.write(files[0].rel, grown, mtime0.Add(time.Hour))
				for _, e := range []*restoreEnv{desk, puller} {
					if r := e.run("agent", "--once"); r.code != 0 {
						t.Fatalf("agent --once on %s after compact and prune: %d %s", e.env["OMPSYNC_MACHINE"], r.code, r.stderr)
					}
				}
				if got, err := os.ReadFile(puller.path(files[0].rel)); err != nil || !bytes.Equal(got, grown) {
					t.Errorf("pulled %s after compact and prune: %v, %d bytes, want %d", files[0].rel, err, len(got), len(grown))
				}

				// A session prune removed whole: on MinIO a delimiter
				// listing still shows its folder, which holds only delete
				// markers; verify must not take it for a session whose
				// catalog was lost.
				phantom := "v1/sessions/0199a3f2-7d1c-7000-8000-00000000dead/laptop/session/18e3a20423b56bfb/meta"
				remotetest.Put(t, ac, phantom, []byte("x"))
				if err := ac.Delete(ctx, phantom); err != nil {
					t.Fatal(err)
				}

				// Everything restores and verifies after compaction.
				if err := os.Remove(laptop.path(rel)); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				if r := laptop.run("restore", id[:8]); r.code != 0 {
					t.Fatalf("restore after compact and prune: %d %s", r.code, r.stderr)
				}
				if got, err := os.ReadFile(laptop.path(rel)); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("restored after compact and prune: %v, %d bytes, want %d", err, len(got), len(data))
				}
				for _, e := range []*restoreEnv{desk, puller, laptop} {
					if r := e.run("verify"); r.code != 0 {
						t.Errorf("verify on %s: exit %d\n%s%s", e.env["OMPSYNC_MACHINE"], r.code, r.stdout, r.stderr)
					}
				}
			})
		}
	}
}

// keptVersion returns the id of the newest object version of key.
func keptVersion(t *testing.T, vs []remotetest.Version, key string) string {
	t.Helper()
	for _, v := range vs {
		if v.Key == key && !v.DeleteMarker {
			return v.VersionID
		}
	}
	t.Fatalf("no version of %s kept", key)
	return ""
}

// versionsByKey sorts a bucket's versions: the keys whose newest version is
// an object (current), those whose newest is a delete marker (marked), and
// how many object versions the server keeps of each key.
func versionsByKey(vs []remotetest.Version) (current []string, marked map[string]bool, kept map[string]int) {
	marked, kept = map[string]bool{}, map[string]int{}
	for _, v := range vs {
		if v.IsLatest {
			if v.DeleteMarker {
				marked[v.Key] = true
			} else {
				current = append(current, v.Key)
			}
		}
		if !v.DeleteMarker {
			kept[v.Key]++
		}
	}
	return current, marked, kept
}

// probeConditionalPuts checks, under a prefix of its own in bucket, that
// IfAbsent (If-None-Match: *) and IfMatch refuse and allow as on a plain
// bucket, and that a key deleted under a delete marker counts as absent.
func probeConditionalPuts(t *testing.T, srv *remotetest.Server, bucket, client string) {
	t.Helper()
	ctx := context.Background()
	c, err := backend.Open(ctx, "s3://"+bucket+"/probe", remotetest.AdminKey(srv, client))
	if err != nil {
		t.Fatal(err)
	}
	put := func(data string, opts remote.PutOptions) error { return c.Put(ctx, "k", []byte(data), opts) }
	if err := put("one", remote.PutOptions{IfAbsent: true}); err != nil {
		t.Fatalf("IfAbsent put of a new key: %v", err)
	}
	if err := put("two", remote.PutOptions{IfAbsent: true}); !errors.Is(err, remote.ErrPreconditionFailed) {
		t.Errorf("IfAbsent put over an object: %v, want %v", err, remote.ErrPreconditionFailed)
	}
	first, err := c.Stat(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := put("three", remote.PutOptions{IfMatch: first.ETag}); err != nil {
		t.Errorf("IfMatch put with the current ETag: %v", err)
	}
	if err := put("four", remote.PutOptions{IfMatch: first.ETag}); !errors.Is(err, remote.ErrPreconditionFailed) {
		t.Errorf("IfMatch put with a stale ETag: %v, want %v", err, remote.ErrPreconditionFailed)
	}
	if got := remotetest.Get(t, c, "k", 0, -1); string(got) != "three" {
		t.Errorf("after the conditional puts k holds %q, want %q", got, "three")
	}
	if err := c.Delete(ctx, "k"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.Stat(ctx, "k"); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("stat under a delete marker: %v, want %v", err, remote.ErrNotFound)
	}
	if err := put("five", remote.PutOptions{IfAbsent: true}); err != nil {
		t.Errorf("IfAbsent put over a delete marker: %v", err)
	}
	if got := remotetest.Get(t, c, "k", 0, -1); string(got) != "five" {
		t.Errorf("after the put over a delete marker k holds %q, want %q", got, "five")
	}
}
