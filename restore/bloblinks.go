package restore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ompsync/ompsync/atomicfile"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// blobLink is another name of a blob on the remote: omp's
// blobs/<sha256>.<ext>, a hard link for image viewers. The agent stores it
// as an empty object; older agents, and a file under such a name that did
// not hold the blob's bytes, stored bytes of its own (size > 0), which
// fetch reads into data.
type blobLink struct {
	name string
	size int64
	data []byte
}

// blobLinks lists the other names of one blob (one LIST) and fetches the
// bytes of those that carry their own.
func blobLinks(ctx context.Context, r *repo.Repo, blob string, limit int64) ([]blobLink, error) {
	prefix := repo.BlobKey(blob + ".")
	var out []blobLink
	for obj, err := range r.Client().List(ctx, prefix, remote.ListOptions{}) {
		if err != nil {
			return nil, fmt.Errorf("list the names of blob %s: %w", blob, err)
		}
		name := strings.TrimPrefix(obj.Key, repo.BlobKey(""))
		if _, _, ok := repo.BlobLink(name); ok {
			out = append(out, blobLink{name: name, size: obj.Size})
		}
	}
	return out, fetchLinkBytes(ctx, r, out, limit)
}

// fetchLinkBytes reads the links that carry bytes of their own.
func fetchLinkBytes(ctx context.Context, r *repo.Repo, links []blobLink, limit int64) error {
	for i := range links {
		if links[i].size == 0 {
			continue
		}
		data, err := retried(ctx, func() ([]byte, error) { return r.GetBlob(ctx, links[i].name, limit) })
		if err != nil {
			return fmt.Errorf("blob name %s: %w", links[i].name, err)
		}
		links[i].data = data
	}
	return nil
}

// writeBlobLink makes l in the agent dir unless it is there: a hard link to
// the blob, as omp makes it (a copy where linking fails), or the bytes it
// carries.
func writeBlobLink(agentDir string, l blobLink) error {
	if hasBlob(agentDir, l.name) {
		return nil
	}
	p := abs(agentDir, store.BlobRel(l.name))
	data := l.data
	if l.size == 0 {
		blob, _, _ := repo.BlobLink(l.name)
		src := abs(agentDir, store.BlobRel(blob))
		err := os.Link(src, p)
		if err == nil {
			return atomicfile.SyncDir(filepath.Dir(p))
		}
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		if data, err = os.ReadFile(src); err != nil {
			return fmt.Errorf("blob name %s: %w", l.name, err)
		}
	}
	if err := atomicfile.Write(p, data, atomicfile.Options{Exclusive: true}); !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil // another restore wrote it
}
