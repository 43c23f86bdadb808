package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/session"
)

type mergerFunc func(ctx context.Context, req MergeRequest) (Merged, error)

func (f mergerFunc) Merge(ctx context.Context, req MergeRequest) (Merged, error) { return f(ctx, req) }

// omp appends to a session the moment sync has created it, before the
// agent records what it pulled: only what sync wrote is uploaded as a
// reference to the other machine's copy, and omp's line as this machine's
// own bytes, so the copy reads back whole.
func TestPulledRangeEndsWhereTheWriteEnded(t *testing.T) {
	testPulledThenChanged(t, false)
}

// omp rewrites a byte of a session the moment sync has created it: the
// pulled range no longer holds the other machine's bytes, so it is uploaded
// as this machine's own, never as a reference to bytes it does not match.
func TestPulledRangeChangedAtOnce(t *testing.T) {
	testPulledThenChanged(t, true)
}

func testPulledThenChanged(t *testing.T, rewrite bool) {
	c := newFileClient(t)
	desk := newEnv(t, c)
	desk.machine, desk.opts.Machine = "desk", "desk"
	deskData := corpus(t, ompFile)
	desk.writeRename(ompRel, deskData)
	desk.once()
	gen := desk.generations(ompID, repo.SessionStream)[0].Name

	e := newEnv(t, c)
	e.opts.Pull = true
	e.opts.Merger = mergerFunc(func(ctx context.Context, req MergeRequest) (Merged, error) {
		e.writeRename(ompRel, deskData) // as restore writes it
		e.appendTo(ompRel, entryLine("0a0a0a0a", "", "omp, right after the pull"))
		if rewrite {
			changed := append([]byte(nil), e.read(ompRel)...)
			changed[300] ^= 1
			e.writeRename(ompRel, changed)
		}
		// What restore reports of what it wrote: after the title slot.
		slot := int64(session.SlotLen(deskData))
		sum := sha256.Sum256(deskData[slot:])
		added := &Added{Start: slot, End: int64(len(deskData)), SHA256: hex.EncodeToString(sum[:])}
		return Merged{Action: MergeCreated, Path: ompRel, Bytes: int64(len(deskData)), Added: added, Source: &repo.ChunkSource{Machine: "desk", Generation: gen}}, nil
	})
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := a.start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.pull(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.pass(ctx, true); err != nil {
		t.Fatal(err)
	}
	a.Close()

	e.assertRemoteEquals(ompRel, ompID)
	g := e.generations(ompID, repo.SessionStream)[0]
	s := repo.Stream{SessionID: ompID, Machine: e.machine, Name: repo.SessionStream}
	picked, _ := repo.Cover(g.Chunks)
	var ref *repo.ChunkHeader
	for _, c := range picked {
		h, _, err := e.repo.GetChunk(ctx, s, g.Name, c.Start, c.End)
		if err != nil {
			t.Fatal(err)
		}
		if h.Ref != nil {
			ref = &h
		}
	}
	switch {
	case rewrite && ref != nil:
		t.Fatalf("reference chunk %+v to bytes the file no longer holds", ref)
	case !rewrite && (ref == nil || ref.Ref.Machine != "desk" || ref.End != int64(len(deskData))):
		t.Fatalf("reference chunk %+v: want one to desk's bytes, ending at %d", ref, len(deskData))
	}
}
