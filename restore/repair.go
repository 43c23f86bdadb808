package restore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// Damage is one object of a machine's stream that failed its check, what it
// should hold and whether it was put back.
type Damage struct {
	Key string `json:"key"`
	// Problem says what is wrong with it (a failed hash, unreadable).
	Problem string `json:"problem"`
	Start   int64  `json:"start"`
	End     int64  `json:"end"`
	// Repaired says it was put again from the local file; otherwise Why
	// says why not and what to do.
	Repaired bool   `json:"repaired"`
	Why      string `json:"why,omitempty"`
	// Unproven: no intact later chunk proves the local bytes (the last
	// chunk); only the agent's state can, in its pass
	// (agent.Options.Damaged).
	Unproven bool `json:"unproven,omitempty"`
}

// RepairChunks checks every chunk of machine's newest generation of each
// stream of session id (the session file at sessionRel under agentDir,
// and its artifacts) and puts a damaged one again from the local file
// when the local bytes are proven to be the generation's: an intact chunk
// ending at or after the damage carries the stream hash of bytes
// [HashFrom, End), and the local file's bytes must hash to it. The put
// goes through repo.PutChunk, so encryption and the codec apply.
//
// A range no listed chunk holds, below the furthest chunk's end (a chunk
// deleted), is put again the same way; one past the furthest end (the
// last chunk lost) has no later chunk to prove it: the agent's pass puts
// it, its state holding the stream hash of what it uploaded.
func RepairChunks(ctx context.Context, r *repo.Repo, st *store.Store, agentDir, machine, id, sessionRel string) ([]Damage, error) {
	invs, err := r.Inventory(ctx, id, machine)
	if err != nil {
		return nil, err
	}
	var out []Damage
	for _, inv := range invs {
		rel := sessionRel
		if inv.Stream.Name != repo.SessionStream {
			inner, ok := repo.ArtifactPath(inv.Stream.Name)
			if ok {
				rel, ok = st.ArtifactRel(sessionRel, inner)
			}
			if !ok {
				continue // no local file to prove it by: verify says so
			}
		}
		local := abs(agentDir, rel)
		g := inv.Newest()
		if g == nil {
			continue
		}
		var bad, intact []repo.ChunkRef
		var proof *repo.ChunkHeader
		for _, c := range g.Chunks {
			h, _, err := r.GetChunk(ctx, inv.Stream, g.Name, c.Start, c.End)
			switch {
			case remote.Unanswered(err):
				return out, err
			case err != nil:
				bad = append(bad, c)
				continue
			case h.Ref == nil && (proof == nil || h.End > proof.End):
				proof = &h
			}
			intact = append(intact, c)
		}
		for _, c := range bad {
			if slices.ContainsFunc(intact, func(i repo.ChunkRef) bool { return i.Start <= c.Start && i.End >= c.End }) {
				continue // inside an intact chunk: readers never take it
			}
			out = append(out, fix(ctx, r, inv.Stream, g, c, "unreadable or its hash fails", proof, local))
		}
		for _, c := range gaps(g.Chunks) {
			out = append(out, fix(ctx, r, inv.Stream, g, c, "missing", proof, local))
		}
	}
	return out, nil
}

// fix is the Damage of chunk c, put again when proof proves it.
func fix(ctx context.Context, r *repo.Repo, s repo.Stream, g *repo.Generation, c repo.ChunkRef, problem string, proof *repo.ChunkHeader, local string) Damage {
	d := Damage{Key: s.ChunkKey(g.Name, c.Start, c.End), Problem: problem, Start: c.Start, End: c.End}
	// The chunk at 0 carries the generation's meta, which only the
	// agent's state holds whole: its pass puts that chunk again.
	d.Unproven = proof == nil || proof.End < c.End || (c.Start == 0 && g.MetaInChunk)
	if !d.Unproven {
		d.Repaired, d.Why = repairChunk(ctx, r, s, g, c, proof, local)
	}
	return d
}

// gaps is the ranges below the furthest chunk end that no chunk holds.
func gaps(chunks []repo.ChunkRef) []repo.ChunkRef {
	var out []repo.ChunkRef
	covered := int64(0)
	for _, c := range slices.SortedFunc(slices.Values(chunks), func(a, b repo.ChunkRef) int { return cmp.Compare(a.Start, b.Start) }) {
		if c.Start > covered {
			out = append(out, repo.ChunkRef{Start: covered, End: c.Start})
		}
		covered = max(covered, c.End)
	}
	return out
}

// repairChunk puts chunk c again from the local file when proof (the
// furthest intact chunk) shows the local bytes are the generation's.
func repairChunk(ctx context.Context, r *repo.Repo, s repo.Stream, g *repo.Generation, c repo.ChunkRef, proof *repo.ChunkHeader, local string) (bool, string) {
	f, err := os.Open(local)
	if err != nil {
		return false, fmt.Sprintf("the local copy cannot be read (%v); restore the session from another machine's copy", err)
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, io.NewSectionReader(f, proof.HashFrom, proof.End-proof.HashFrom)); err != nil || hex.EncodeToString(sum.Sum(nil)) != proof.StreamSHA256 {
		return false, "the local copy changed too: its bytes no longer hash to what the remote records; nothing was written; run 'ompsync agent --once' to upload it as a new copy"
	}
	data := make([]byte, c.End-c.Start)
	if _, err := f.ReadAt(data, c.Start); err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Sprintf("read the local copy: %v", err)
	}
	h := repo.ChunkHeader{V: proof.V, Start: c.Start, End: c.End, HashFrom: proof.HashFrom, SHA256: repo.HashHex(data)}
	if c.End > proof.HashFrom {
		sum.Reset()
		if _, err := io.Copy(sum, io.NewSectionReader(f, proof.HashFrom, c.End-proof.HashFrom)); err != nil {
			return false, fmt.Sprintf("read the local copy: %v", err)
		}
		h.StreamSHA256 = hex.EncodeToString(sum.Sum(nil))
	}
	if _, err := r.PutChunk(ctx, s, g.Name, h, data, remote.PutOptions{}); err != nil {
		return false, fmt.Sprintf("put it again: %v", err)
	}
	return true, ""
}

// RepairBlob puts the blob name, damaged or missing on the remote, again
// from the local file blobs/<name> under agentDir, only when its bytes
// hash to the name (the blob's proof); the put is the agent's (PutBlobFrom:
// sealed as the repository is). A damaged object is deleted first, since
// a blob is written only where absent.
func RepairBlob(ctx context.Context, r *repo.Repo, agentDir, name string) Damage {
	d := Damage{Key: repo.BlobKey(name), Problem: "damaged or missing"}
	f, err := os.Open(abs(agentDir, store.BlobRel(name)))
	if err != nil {
		d.Why = fmt.Sprintf("the blob is not on this machine (%v); restore the sessions that use it from another machine's copy", err)
		return d
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		d.Why = fmt.Sprintf("read the local blob: %v", err)
		return d
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil || hex.EncodeToString(sum.Sum(nil)) != name {
		d.Why = "the local copy changed too: its bytes no longer hash to the blob's name; nothing was written; restore the blob from another machine's copy"
		return d
	}
	switch err := r.Client().Delete(ctx, d.Key); {
	case err == nil, errors.Is(err, remote.ErrNotFound):
	default:
		d.Why = fmt.Sprintf("remove the damaged blob: %v; delete %s with a key that may delete, then run 'ompsync verify --repair' again", err, d.Key)
		return d
	}
	if _, err := r.PutBlobFrom(ctx, name, f, fi.Size(), ""); err != nil {
		d.Why = fmt.Sprintf("put it again: %v; run 'ompsync verify --repair' again", err)
		return d
	}
	d.Repaired = true
	return d
}

// Mended reports whether the bytes of the chunk at key (one of
// RepairChunks' Damage keys) now read, every hash checked: from that key,
// or from an intact chunk of its generation that holds its range (the
// agent's pass puts the chunk at 0 again as far as the file reaches).
// Any other key (a blob's) is not mended: nothing but RepairBlob puts it.
func Mended(ctx context.Context, r *repo.Repo, key string) bool {
	ref, err := repo.ParseSessionKey(key)
	if err != nil {
		return false
	}
	start, end, ok := repo.ParseChunkName(ref.Object)
	if !ok {
		return false
	}
	invs, err := r.Inventory(ctx, ref.Stream.SessionID, ref.Stream.Machine)
	if err != nil {
		return false
	}
	for _, inv := range invs {
		g := inv.Find(ref.Generation)
		if inv.Stream != ref.Stream || g == nil {
			continue
		}
		for _, c := range g.Chunks {
			if c.Start <= start && c.End >= end {
				if _, _, err := r.GetChunk(ctx, ref.Stream, g.Name, c.Start, c.End); err == nil {
					return true
				}
			}
		}
	}
	return false
}
