package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// chunkCutter fails every chunk put once its allowance is spent, as a line
// that drops mid-backup does; everything else goes through.
type chunkCutter struct {
	remote.Client
	allowed *atomic.Int64 // chunk puts still let through
}

func (c chunkCutter) cut(key string) error {
	if _, _, ok := repo.ParseChunkName(path.Base(key)); ok && c.allowed.Add(-1) < 0 {
		return &remote.Error{Op: "put", Key: key, Transient: true, Err: errors.New("connection reset by peer")}
	}
	return nil
}

func (c chunkCutter) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	if err := c.cut(key); err != nil {
		return err
	}
	return c.Client.Put(ctx, key, data, opts)
}

func (c chunkCutter) PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts remote.PutOptions) error {
	if err := c.cut(key); err != nil {
		return err
	}
	return c.Client.PutReader(ctx, key, r, size, opts)
}

// A first backup cut short is not a rewrite (and agent --once, which stops
// there, does not say it retries): the next run uploads the files
// that never got up as new, says nothing of "changed under the backup", and
// their history says "new". A rewrite whose upload was cut short keeps its
// history: the generation that finally gets up names what it replaced, and
// why.
func TestCutShortUploadIsNotARewrite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		var allowed atomic.Int64
		e := newEnv(t, chunkCutter{c, &allowed})
		var logs lockedBuffer
		e.opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		rels := map[string]string{}
		for i := range 3 {
			id := fmt.Sprintf("%s%d", ompID[:len(ompID)-1], i)
			rels[id] = strings.ReplaceAll(ompRel, ompID, id)
			e.writeRename(rels[id], bytes.ReplaceAll(corpus(t, ompFile), []byte(ompID), []byte(id)))
		}

		allowed.Store(1) // one session gets up, two do not
		if err := e.tryOnce(); err == nil {
			t.Fatal("agent --once succeeded with chunk puts failing")
		}
		if s := logs.String(); strings.Contains(s, "watching on") {
			t.Errorf("agent --once says it watches on and retries, though it exits:\n%s", s)
		}
		allowed.Store(1 << 30)
		e.once()
		if s := logs.String(); strings.Contains(s, "changed under the backup") {
			t.Fatalf("a first backup cut short was logged as a change:\n%s", s)
		}
		for id, rel := range rels {
			e.assertRemoteEquals(rel, id)
			if _, meta := e.remoteStream(id, repo.SessionStream); meta.Previous != "" || meta.Reason != "new" {
				t.Errorf("%s: history says previous %q, reason %q; want a new session", id, meta.Previous, meta.Reason)
			}
		}

		// A real rewrite (the last entry replaced by a longer one), its
		// upload cut short, then completed.
		id := ompID[:len(ompID)-1] + "0"
		_, first := e.remoteStream(id, repo.SessionStream)
		old := e.read(rels[id])
		kept := old[:bytes.LastIndexByte(old[:len(old)-1], '\n')+1]
		e.writeRename(rels[id], append(kept, entryLine("abcd0001", "", strings.Repeat("rewritten ", 200))...))
		allowed.Store(0)
		if err := e.tryOnce(); err == nil {
			t.Fatal("agent --once succeeded with chunk puts failing")
		}
		allowed.Store(1 << 30)
		e.once()
		e.assertRemoteEquals(rels[id], id)
		if _, meta := e.remoteStream(id, repo.SessionStream); meta.Previous != first.Generation || meta.Reason != "rewritten" {
			t.Errorf("rewritten session: history says previous %q, reason %q; want %q, rewritten", meta.Previous, meta.Reason, first.Generation)
		}
		if n := strings.Count(logs.String(), "changed under the backup"); n != 1 {
			t.Errorf("one rewrite logged %d times:\n%s", n, logs.String())
		}
	})
}
