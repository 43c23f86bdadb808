// Package compact merges the many small chunks the agent writes into a few
// large ones (compaction), and removes what retention no longer keeps
// (Prune). Both work on one machine's streams only: a machine never rewrites
// or deletes another machine's objects, so two agents never compact the same
// stream.
//
// Compaction never loses a byte at any point of a crash: the merged chunk is
// written, read back and checked against the chunks it replaces before any
// of them is deleted, and readers accept overlapping chunks (repo.Cover), so
// every intermediate state reads the same bytes. A later run deletes what an
// interrupted one left behind. See "Compaction" in docs/FORMAT.md for the
// scheme and its bounds.
package compact

import (
	"context"
	"time"

	"github.com/ompsync/ompsync/repo"
)

// Policy says when and how far compaction merges. Zero fields take the
// defaults noted.
type Policy struct {
	// Idle is how long a generation's newest chunk must have gone unchanged
	// for Machine to treat the stream as idle (the agent knows better and
	// says so to Stream). Default 10m.
	Idle time.Duration
	// MaxChunks: a busy stream is compacted once more than this many small
	// chunks trail its larger ones. Default 64.
	MaxChunks int
	// MaxChunkBytes bounds a merged chunk (plaintext); larger stretches stay
	// in several chunks. It bounds the memory a merge needs. Default 32 MiB.
	MaxChunkBytes int64
}

// Defaults of Policy.
const (
	DefaultIdle          = 10 * time.Minute
	DefaultMaxChunks     = 64
	DefaultMaxChunkBytes = 32 << 20
)

func (p Policy) withDefaults() Policy {
	if p.Idle <= 0 {
		p.Idle = DefaultIdle
	}
	if p.MaxChunks <= 0 {
		p.MaxChunks = DefaultMaxChunks
	}
	if p.MaxChunkBytes <= 0 {
		p.MaxChunkBytes = DefaultMaxChunkBytes
	}
	return p
}

// Result is what compaction did to one generation.
type Result struct {
	Before int // chunk objects listed before
	After  int // chunk objects left
	// Written counts merged chunks uploaded; Merged the chunks they replace.
	Written, Merged int
	// Uploaded is the stored size of the merged chunks, Rewritten the
	// plaintext bytes they hold.
	Uploaded, Rewritten int64
	// Deleted counts chunks removed: merged ones and redundant ones (inside
	// another chunk, as a crash can leave them).
	Deleted int
}

func (r *Result) add(o Result) {
	r.Written += o.Written
	r.Merged += o.Merged
	r.Uploaded += o.Uploaded
	r.Rewritten += o.Rewritten
	r.Deleted += o.Deleted
}

// Stream compacts one generation of one of this machine's own streams. The
// agent calls it with idle true once the stream has been idle for
// Policy.Idle, and with idle false when it has uploaded more than
// Policy.MaxChunks chunks since the last call; it is cheap when there is
// nothing to do (one LIST). It is safe while the agent keeps appending to
// the generation: new chunks lie past what it merges, and it deletes only
// chunks it listed.
func Stream(ctx context.Context, r *repo.Repo, s repo.Stream, gen string, idle bool, p Policy) (Result, error) {
	p = p.withDefaults()
	g, err := r.ListGeneration(ctx, s, gen)
	if err != nil {
		return Result{}, err
	}
	return compactGeneration(ctx, r, s, g, idle, p)
}
