package compact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// maxRounds bounds the merges one call makes to a generation: a merge limited
// by MaxChunkBytes may leave work for another round.
const maxRounds = 64

// compactGeneration plans and carries out merges until the plan is empty,
// listing the generation again after each round.
func compactGeneration(ctx context.Context, r *repo.Repo, s repo.Stream, g *repo.Generation, idle bool, p Policy) (Result, error) {
	res := Result{Before: len(g.Chunks), After: len(g.Chunks)}
	if !g.HasMeta {
		// An upload interrupted before its meta, or still in progress:
		// readers ignore it, and so does compaction.
		return res, nil
	}
	for round := 0; round < maxRounds; round++ {
		pl, err := plan(g.Chunks, idle, p)
		if err != nil {
			return res, fmt.Errorf("%s generation %s: %w", s.Prefix(), g.Name, err)
		}
		if pl.Empty() {
			break
		}
		did, err := execute(ctx, r, s, g, pl)
		res.add(did)
		if err != nil {
			res.After = res.Before + res.Written - res.Deleted
			return res, fmt.Errorf("compact %s generation %s: %w", s.Prefix(), g.Name, err)
		}
		if did.Written == 0 && did.Deleted == 0 {
			break // nothing could be done (reference chunks in the way)
		}
		if g, err = r.ListGeneration(ctx, s, g.Name); err != nil {
			return res, err
		}
	}
	res.After = len(g.Chunks)
	return res, nil
}

// source is a chunk read for a merge.
type source struct {
	c    repo.ChunkRef
	h    repo.ChunkHeader
	data []byte
}

// execute carries out one plan: merge, then remove redundant chunks.
func execute(ctx context.Context, r *repo.Repo, s repo.Stream, g *repo.Generation, pl *planned) (Result, error) {
	var res Result
	all := g.Chunks
	if pl.Merge.Chunks > 0 {
		srcs := make([]source, 0, pl.to-pl.from)
		for _, c := range pl.picked[pl.from:pl.to] {
			h, data, err := r.GetChunk(ctx, s, g.Name, c.Start, c.End)
			if err != nil {
				return res, fmt.Errorf("read chunk %s: %w", repo.ChunkName(c.Start, c.End), err)
			}
			srcs = append(srcs, source{c: c, h: h, data: data})
		}
		if g.MetaInChunk && len(srcs) > 0 && srcs[0].c.Start == 0 {
			// The merged chunk at 0 carries on its meta: a generation
			// whose first chunk lacks the meta it needs is damage, left as
			// it is for a human to see.
			if _, err := repo.HeaderMeta(s, g.Name, srcs[0].h); err != nil {
				return res, err
			}
		}
		// Reference chunks hold no bytes of this machine: they stay, and
		// the data chunks between them are merged run by run.
		for len(srcs) > 0 {
			n := slices.IndexFunc(srcs, func(src source) bool { return src.h.Ref != nil })
			if n < 0 {
				n = len(srcs)
			}
			if n >= 2 {
				did, err := mergeRun(ctx, r, s, g.Name, srcs[:n], all)
				res.add(did)
				if err != nil {
					return res, err
				}
			}
			srcs = srcs[min(n+1, len(srcs)):]
		}
	}
	for i, inside := range pl.inside {
		c := pl.picked[i]
		h, data, err := r.GetChunk(ctx, s, g.Name, c.Start, c.End)
		if err != nil {
			return res, fmt.Errorf("read chunk %s: %w", repo.ChunkName(c.Start, c.End), err)
		}
		if h.Ref != nil {
			continue // its bytes are elsewhere: leave what lies inside it
		}
		n, err := deleteInside(ctx, r, s, g.Name, c, h, data, inside, nil)
		res.Deleted += n
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// mergeRun writes one chunk holding the bytes of run (adjacent or
// overlapping data chunks), reads it back, checks it against them, and only
// then deletes every listed chunk inside its range.
func mergeRun(ctx context.Context, r *repo.Repo, s repo.Stream, gen string, run []source, all []repo.ChunkRef) (Result, error) {
	var res Result
	a, b := run[0].c.Start, run[len(run)-1].c.End
	last := run[len(run)-1].h
	hashFrom := run[0].h.HashFrom
	// Sized by the bytes read, not by the range the keys claim.
	size := 0
	for _, src := range run {
		size += len(src.data)
	}
	data := make([]byte, 0, size)
	// The merged chunk keeps when its bytes were uploaded, not when they
	// were merged: readers of the backup as it was at a time need it.
	var marks []repo.Mark
	// And the file's mtime its newest bytes were read with (artifacts).
	var mtime time.Time
	read := map[repo.ChunkRef]bool{} // deleteInside need not read these again
	stream := sha256.New()
	for _, src := range run {
		if src.h.HashFrom != hashFrom {
			return res, fmt.Errorf("chunks %s and %s disagree on hash_from", repo.ChunkName(run[0].c.Start, run[0].c.End), repo.ChunkName(src.c.Start, src.c.End))
		}
		held := a + int64(len(data))
		if src.c.Start > held {
			return res, fmt.Errorf("%w at byte %d", repo.ErrGap, held)
		}
		overlap := held - src.c.Start
		if !bytes.Equal(src.data[:overlap], data[src.c.Start-a:]) {
			return res, fmt.Errorf("overlapping chunks disagree at byte %d", src.c.Start)
		}
		marks = append(marks, repo.ChunkMarks(src.h, src.c, held)...)
		data = append(data, src.data[overlap:]...)
		// From offset 0 the stream hashes can be checked too: the merged
		// bytes are then the ones every replaced chunk vouches for, not
		// just the last.
		if a == 0 {
			stream.Write(data[min(max(held, hashFrom), int64(len(data))):])
			if hex.EncodeToString(stream.Sum(nil)) != src.h.StreamSHA256 {
				return res, fmt.Errorf("chunk %s: stream hash mismatch", repo.ChunkName(src.c.Start, src.c.End))
			}
		}
		if src.h.Mtime.After(mtime) {
			mtime = src.h.Mtime
		}
		read[src.c] = true
	}
	hdr := repo.ChunkHeader{Start: a, End: b, HashFrom: hashFrom, SHA256: repo.HashHex(data), StreamSHA256: last.StreamSHA256, Uploaded: marks, Mtime: mtime}
	if a == 0 {
		// The chunk at 0 carries the generation's meta; the
		// merged chunk takes the place of the one it copies it from.
		hdr.Meta = run[0].h.Meta
	}
	// Only if absent: a chunk already under the key (left by an
	// interrupted run) is checked as this one would be, and never
	// deleted by this run, which did not write it.
	stored, err := r.PutChunk(ctx, s, gen, hdr, data, remote.PutOptions{IfAbsent: true})
	created := err == nil
	if err != nil && !errors.Is(err, remote.ErrPreconditionFailed) {
		return res, fmt.Errorf("write merged chunk %s: %w", repo.ChunkName(a, b), err)
	}
	if created {
		res.Written, res.Merged, res.Uploaded, res.Rewritten = 1, len(run), int64(stored), b-a
	}
	got, back, err := r.GetChunk(ctx, s, gen, a, b)
	differs := err == nil && (got.Ref != nil || got.SHA256 != hdr.SHA256 || got.StreamSHA256 != hdr.StreamSHA256 || got.HashFrom != hashFrom || !bytes.Equal(back, data) || !sameMeta(got.Meta, hdr.Meta))
	if differs {
		err = errors.New("it reads back different")
	}
	if err != nil {
		// A merged chunk proved to read back different would hide the
		// good chunks under it (readers take the chunk reaching
		// furthest), so it goes: if this run wrote it and the chunks it
		// replaces are all still there. One that could not be read is
		// left for the next run to check; deleting it could take a chunk
		// another maintainer has just verified and relies on.
		if created && differs && sourcesLeft(ctx, r, s, gen, run) {
			if derr := r.Client().Delete(ctx, s.ChunkKey(gen, a, b)); derr != nil {
				err = fmt.Errorf("%w (and removing it failed: %v)", err, derr)
			}
		}
		res.Written = 0
		return res, fmt.Errorf("merged chunk %s: %w", repo.ChunkName(a, b), err)
	}
	n, err := deleteInside(ctx, r, s, gen, repo.ChunkRef{Start: a, End: b}, hdr, data, all, read)
	res.Deleted = n
	return res, err
}

// sameMeta reports whether two chunk headers' meta members are the same.
func sameMeta(a, b *repo.Meta) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// sourcesLeft reports whether every chunk of run is still on the remote.
func sourcesLeft(ctx context.Context, r *repo.Repo, s repo.Stream, gen string, run []source) bool {
	for _, src := range run {
		if _, err := r.Client().Stat(ctx, s.ChunkKey(gen, src.c.Start, src.c.End)); err != nil {
			return false
		}
	}
	return true
}

// deleteInside deletes the chunks of list that lie inside outer (a verified
// data chunk holding data), other than outer itself. Chunks in checked were
// already compared with outer's bytes; any other is read first and deleted
// only if it holds the same bytes. A chunk that disagrees is kept and
// reported: two versions of one range mean damage worth a human's look.
func deleteInside(ctx context.Context, r *repo.Repo, s repo.Stream, gen string, outer repo.ChunkRef, outerHdr repo.ChunkHeader, data []byte, list []repo.ChunkRef, checked map[repo.ChunkRef]bool) (int, error) {
	deleted := 0
	var disagree []string
	for _, c := range list {
		if c.Start < outer.Start || c.End > outer.End || c.Start == outer.Start && c.End == outer.End {
			continue
		}
		if !checked[c] {
			h, body, err := r.GetChunk(ctx, s, gen, c.Start, c.End)
			if errors.Is(err, remote.ErrNotFound) {
				continue // deleted meanwhile (another compaction)
			}
			if err != nil {
				return deleted, fmt.Errorf("read chunk %s: %w", repo.ChunkName(c.Start, c.End), err)
			}
			part := data[c.Start-outer.Start : c.End-outer.Start]
			same := h.SHA256 == repo.HashHex(part) && (h.Ref != nil || bytes.Equal(body, part))
			if c.End == outer.End && h.StreamSHA256 != outerHdr.StreamSHA256 {
				same = false
			}
			if !same {
				disagree = append(disagree, repo.ChunkName(c.Start, c.End))
				continue
			}
		}
		if err := r.Client().Delete(ctx, s.ChunkKey(gen, c.Start, c.End)); err != nil {
			return deleted, fmt.Errorf("delete chunk %s: %w", repo.ChunkName(c.Start, c.End), err)
		}
		deleted++
	}
	if len(disagree) > 0 {
		return deleted, fmt.Errorf("chunks %v hold other bytes than chunk %s; kept", disagree, repo.ChunkName(outer.Start, outer.End))
	}
	return deleted, nil
}
