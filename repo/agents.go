package repo

import (
	"context"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/ompsync/ompsync/remote"
)

// DefaultAgent is the agent whose sessions lie directly under v1/: every
// repository written before other agents were known holds omp's alone.
const DefaultAgent = "omp"

// agentsPrefix holds one folder per other agent, each laid out as v1/ is.
const agentsPrefix = root + "agents/"

// ValidAgent: an agent's name is 1-32 of a-z 0-9 and "-", starting with a
// letter.
func ValidAgent(name string) bool {
	return name != "" && len(name) <= 32 && name[0] >= 'a' && name[0] <= 'z' &&
		!strings.ContainsFunc(name, func(c rune) bool { return !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') })
}

// Agent is the repository of one agent's sessions: r itself for omp, else
// the same layout under v1/agents/<name>/ (docs/FORMAT.md,
// "Agents"), which readers before other agents never list. It shares r's
// remote, codec and marker.
func (r *Repo) Agent(name string) (*Repo, error) {
	if name == DefaultAgent {
		return r, nil
	}
	if !ValidAgent(name) {
		return nil, fmt.Errorf("agent name %q is not 1-32 of a-z 0-9 -", name)
	}
	sub := &Repo{client: agentClient{c: r.client, prefix: agentsPrefix + name + "/"}, codec: r.codec, refReads: r.refReads}
	r.mu.Lock()
	sub.marker, sub.markerKnown, sub.markerAt, sub.log = r.marker, r.markerKnown, r.markerAt, r.log
	r.mu.Unlock()
	return sub, nil
}

// MaxAgents bounds the agents a reader lists.
const MaxAgents = 64

// Agents lists the agents other than omp that have a folder on the remote,
// with one delimiter LIST of v1/agents/.
func (r *Repo) Agents(ctx context.Context) ([]string, error) {
	return r.folders(ctx, agentsPrefix, "agents", MaxAgents, func(name string) bool { return ValidAgent(name) && name != DefaultAgent })
}

// folders lists the names under prefix that valid accepts, with one
// delimiter LIST, refusing a listing that goes on past most of them.
func (r *Repo) folders(ctx context.Context, prefix, what string, most int, valid func(string) bool) ([]string, error) {
	var out []string
	for obj, err := range r.client.List(ctx, prefix, remote.ListOptions{Delimiter: "/"}) {
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", what, err)
		}
		rest, ok := strings.CutPrefix(obj.Key, prefix)
		if name := strings.TrimSuffix(rest, "/"); obj.Prefix && ok && valid(name) {
			out = append(out, name)
		}
		if len(out) > most {
			return nil, fmt.Errorf("list %s: the listing goes on past %d %s", what, most, what)
		}
	}
	return out, nil
}

// layoutKey is key as its agent's repository names it: a key under
// v1/agents/<name>/ becomes the v1/ key it stands for; others are as they
// are. Code that walks every object (rekey) checks both alike.
func layoutKey(key string) string {
	rest, ok := strings.CutPrefix(key, agentsPrefix)
	if !ok {
		return key
	}
	name, inner, ok := strings.Cut(rest, "/")
	if !ok || !ValidAgent(name) {
		return key
	}
	return root + inner
}

// outsideMark starts the name of a listed key outside an agent's folder.
const outsideMark = "outside-the-agent-folder:"

// agentClient maps the keys of an agent's repository (v1/...) to its
// folder (v1/agents/<name>/...) and back. The marker stays the remote's.
type agentClient struct {
	c      remote.Client
	prefix string // v1/agents/<name>/
}

func (a agentClient) key(k string) string {
	if rest, ok := strings.CutPrefix(k, root); ok {
		return a.prefix + rest
	}
	return k // the marker
}

func (a agentClient) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	return a.c.Put(ctx, a.key(key), data, opts)
}

func (a agentClient) PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts remote.PutOptions) error {
	return a.c.PutReader(ctx, a.key(key), r, size, opts)
}

func (a agentClient) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return a.c.Get(ctx, a.key(key), offset, length)
}

func (a agentClient) Stat(ctx context.Context, key string) (remote.ObjectInfo, error) {
	info, err := a.c.Stat(ctx, a.key(key))
	info.Key = key
	return info, err
}

func (a agentClient) Delete(ctx context.Context, key string) error {
	return a.c.Delete(ctx, a.key(key))
}

// List lists the agent's folder and names what it finds as v1/ keys. A key
// the remote yields outside the folder (a damaged or hostile listing) is
// named so that no key check accepts it.
func (a agentClient) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	if opts.StartAfter != "" {
		opts.StartAfter = a.key(opts.StartAfter)
	}
	return func(yield func(remote.ObjectInfo, error) bool) {
		for obj, err := range a.c.List(ctx, a.key(prefix), opts) {
			if err == nil {
				if rest, ok := strings.CutPrefix(obj.Key, a.prefix); ok {
					obj.Key = root + rest
				} else {
					obj.Key = outsideMark + obj.Key
				}
			}
			if !yield(obj, err) {
				return
			}
		}
	}
}
