package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/internal/testkit/repotest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/repo"
)

// putGeneration uploads data as a generation of n chunks, as the agent
// does, and returns the chunk count.
func putGeneration(t *testing.T, r *repo.Repo, s repo.Stream, gen string, data []byte, n int) {
	t.Helper()
	ctx := context.Background()
	h := sha256.New()
	var start int64
	for i := 1; i <= n; i++ {
		end := int64(len(data) * i / n)
		h.Write(data[start:end])
		hdr := repo.ChunkHeader{Start: start, End: end, SHA256: repo.HashHex(data[start:end]), StreamSHA256: hex.EncodeToString(h.Sum(nil))}
		if _, err := r.PutChunk(ctx, s, gen, hdr, data[start:end], remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		start = end
	}
	m := repo.Meta{SessionID: s.SessionID, Machine: s.Machine, Stream: s.Name, Generation: gen, Path: "sessions/-work/x_" + s.SessionID + ".jsonl"}
	if err := r.PutMeta(ctx, s, m); err != nil {
		t.Fatal(err)
	}
}

func remoteKeys(t *testing.T, c remote.Client) []string {
	t.Helper()
	var keys []string
	for obj, err := range c.List(context.Background(), "", remote.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

func TestCompactAndPruneCommands(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	client, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := repo.New(client, repo.NewZstd())
	id := "0199a3f2-7d1c-7000-8000-000000000001"
	s := repo.Stream{SessionID: id, Machine: "laptop", Name: repo.SessionStream}
	var data []byte
	for i := range 400 {
		data = fmt.Appendf(data, `{"type":"message","n":%d,"text":"%s"}`+"\n", i, strings.Repeat("x", i%50))
	}
	old := repo.NewGeneration(time.Now().Add(-40 * 24 * time.Hour).UnixNano())
	cur := repo.NewGeneration(time.Now().Add(-35 * 24 * time.Hour).UnixNano())
	// The old generation ends at a line, as the agent uploads a session:
	// every line of it is in the current one, so retention may drop it.
	putGeneration(t, r, s, old, data[:bytes.LastIndexByte(data[:1000], '\n')+1], 3)
	putGeneration(t, r, s, cur, data, 80)
	if _, err := r.PutCatalog(ctx, repo.Catalog{Machine: "laptop", Sessions: []repo.CatalogEntry{
		{ID: id, Path: "sessions/-work/x_" + id + ".jsonl", Generation: cur, Size: int64(len(data)), State: repo.StatePresent},
	}}); err != nil {
		t.Fatal(err)
	}
	env, home := newEnv(t)
	env["OMPSYNC_REMOTE"] = "file://" + dir
	env["OMPSYNC_MACHINE"] = "laptop"
	env["OMPSYNC_STATE_DIR"] = filepath.Join(home, "state")

	before := remoteKeys(t, client)
	res := runWith(t, env, "compact", "--dry-run", "--compaction-idle", "1ms")
	if res.code != 0 || !strings.Contains(res.stdout, id+" session generation "+cur+": would merge 80 of 80 chunks") ||
		!strings.Contains(res.stdout, id+" session generation "+old+": would merge 3 of 3 chunks") {
		t.Fatalf("compact --dry-run: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if !slices.Equal(remoteKeys(t, client), before) {
		t.Fatal("compact --dry-run changed the remote")
	}
	// A prefix that matches nothing fails, with no totals that read as done.
	for _, args := range [][]string{{"compact", "zzz"}, {"compact", "--dry-run", "zzz"}} {
		if res := runWith(t, env, args...); res.code != 1 || res.stdout != "" || res.stderr != "ompsync: no session of machine laptop starts with \"zzz\"\n" {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q", args, res.code, res.stdout, res.stderr)
		}
	}
	if res := runWith(t, env, "compact", "a/b"); res.code != 2 {
		t.Fatalf("compact a/b: exit %d, want a usage error", res.code)
	}
	res = runWith(t, env, "compact", "0199A3", "--compaction-idle", "1ms")
	if res.code != 0 || !strings.Contains(res.stdout, cur+": 80 chunks -> 1") || !strings.Contains(res.stdout, "83 chunks -> 2") {
		t.Fatalf("compact: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	invs, err := r.Inventory(ctx, id, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	as, err := repotest.ReadGeneration(ctx, r, s, invs[0].Find(cur), 1<<20)
	if err != nil || !bytes.Equal(as.Data, data) {
		t.Fatalf("after compact: %v", err)
	}

	// prune: the old generation, superseded 35 days ago, goes; the dry
	// run names the same generations, objects and bytes.
	dry := runWith(t, env, "prune", "--dry-run")
	before = remoteKeys(t, client)
	done := runWith(t, env, "prune")
	if dry.code != 0 || done.code != 0 {
		t.Fatalf("prune: exit %d / %d\n%s%s%s%s", dry.code, done.code, dry.stdout, dry.stderr, done.stdout, done.stderr)
	}
	items := func(out string) string {
		var keep []string
		for l := range strings.Lines(out) {
			if strings.HasPrefix(l, id) {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "")
	}
	want := id + " session generation " + old + ": superseded "
	if items(dry.stdout) != items(done.stdout) || !strings.HasPrefix(items(done.stdout), want) || strings.Count(items(done.stdout), "\n") != 1 {
		t.Fatalf("prune --dry-run printed\n%s\nprune printed\n%s", dry.stdout, done.stdout)
	}
	if !strings.Contains(dry.stdout, "dry run: would delete 2 objects") || !strings.Contains(done.stdout, "deleted 2 objects") {
		t.Fatalf("summaries:\n%s\n%s", dry.stdout, done.stdout)
	}
	after := remoteKeys(t, client)
	if len(after) != len(before)-2 || slices.ContainsFunc(after, func(k string) bool { return strings.Contains(k, "/"+old+"/") }) {
		t.Fatalf("after prune: %q", after)
	}
	if res := runWith(t, env, "prune", "--retention-generations", "0"); res.code != 0 || !strings.Contains(res.stdout, "deleted 0 objects") {
		t.Fatalf("prune with retention 0: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// -q prints errors only: from cron, a run that worked says nothing.
	for _, args := range [][]string{{"compact", "--dry-run"}, {"compact"}, {"prune", "--dry-run"}, {"prune"}} {
		if res := runWith(t, env, append([]string{"-q"}, args...)...); res.code != 0 || res.stdout != "" || res.stderr != "" {
			t.Errorf("-q %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), res.code, res.stdout, res.stderr)
		}
	}
}

// signalWriter collects what is written and closes seen once it holds want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

// compact and prune from a shell or cron wait while the agent compacts or
// prunes (it holds the maintenance lock), saying so, and delete nothing
// until it is done; then they run.
func TestMaintenanceOneAtATime(t *testing.T) {
	dir := t.TempDir()
	client, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := repo.New(client, repo.NewZstd())
	id := "0199a3f2-7d1c-7000-8000-000000000002"
	s := repo.Stream{SessionID: id, Machine: "laptop", Name: repo.SessionStream}
	var data []byte
	for i := range 100 {
		data = fmt.Appendf(data, `{"type":"message","n":%d}`+"\n", i)
	}
	gen := repo.NewGeneration(time.Now().Add(-time.Hour).UnixNano())
	putGeneration(t, r, s, gen, data, 20)
	if _, err := r.PutCatalog(context.Background(), repo.Catalog{Machine: "laptop", Sessions: []repo.CatalogEntry{
		{ID: id, Path: "sessions/-work/x_" + id + ".jsonl", Generation: gen, Size: int64(len(data)), State: repo.StatePresent},
	}}); err != nil {
		t.Fatal(err)
	}
	env, home := newEnv(t)
	env["OMPSYNC_REMOTE"] = "file://" + dir
	env["OMPSYNC_MACHINE"] = "laptop"
	env["OMPSYNC_STATE_DIR"] = filepath.Join(home, "state")

	for _, args := range [][]string{{"compact"}, {"prune", "--retention-generations", "1h"}} {
		unlock, err := agent.LockMaintenance(context.Background(), env["OMPSYNC_STATE_DIR"], nil)
		if err != nil {
			t.Fatal(err)
		}
		before := remoteKeys(t, client)
		stderr := &signalWriter{want: "waiting for ompsync (pid " + strconv.Itoa(os.Getpid()) + ") to finish compacting or pruning", seen: make(chan struct{})}
		var stdout bytes.Buffer
		code := make(chan int, 1)
		go func() { code <- run(args, &stdout, stderr, env.environ()) }()
		select {
		case <-stderr.seen:
		case c := <-code:
			t.Fatalf("%s ran beside the lock's holder: exit %d\n%s%s", args[0], c, stdout.String(), stderr.buf.String())
		}
		if !slices.Equal(remoteKeys(t, client), before) {
			t.Fatalf("%s changed the remote while waiting", args[0])
		}
		unlock()
		if c := <-code; c != 0 {
			t.Fatalf("%s: exit %d\n%s%s", args[0], c, stdout.String(), stderr.buf.String())
		}
		if args[0] == "compact" && !strings.Contains(stdout.String(), "20 chunks -> 1") {
			t.Fatalf("compact after the wait:\n%s", stdout.String())
		}
	}
}
