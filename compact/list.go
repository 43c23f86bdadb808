package compact

import (
	"github.com/ompsync/ompsync/repo"
)

// deleteKeys lists g's objects in the order they are deleted: meta first,
// then the chunks from offset 0 (a chunk at 0 makes it complete), so that
// an interrupted delete leaves a generation readers ignore rather than one
// with a gap.
func deleteKeys(s repo.Stream, g *repo.Generation) (keys []string, bytes int64) {
	if g.MetaObject {
		keys, bytes = append(keys, s.MetaKey(g.Name)), bytes+g.MetaSize
	}
	if g.HasHead {
		keys, bytes = append(keys, s.HeadKey(g.Name)), bytes+g.HeadSize
	}
	for _, c := range g.Chunks {
		keys, bytes = append(keys, s.ChunkKey(g.Name, c.Start, c.End)), bytes+c.Size
	}
	return keys, bytes
}
