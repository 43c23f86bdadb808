package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/safename"
)

// How a local file compares with a remote copy.
const (
	LocalSame     = "same"     // the same bytes (the title slot may differ)
	LocalBehind   = "behind"   // the local file is a prefix of the copy
	LocalAhead    = "ahead"    // the copy is a prefix of the local file (not yet uploaded)
	LocalDiverged = "diverged" // each has lines the other lacks
	LocalMissing  = "missing"  // no local file
)

// Check is what verify found for one session.
type Check struct {
	// Agent wrote the session: omp, pi, claude or codex.
	Agent string `json:"agent"`
	ID    string `json:"id"`
	// Path is the local file, or where the newest copy lived.
	Path   string      `json:"path"`
	Copies []CopyCheck `json:"copies"`
	// Problems are damage on the remote: a failed hash, a gap, an
	// unreadable object, a referenced blob that is missing or wrong.
	Problems []string `json:"problems,omitempty"`
	// Unchecked is what could not be read because the remote did not
	// answer (down, unreachable, failing past the retries): what it holds
	// there is not known, sound or damaged.
	Unchecked []string `json:"unchecked,omitempty"`
	Notes     []string `json:"notes,omitempty"`
	// Blobs are the referenced blobs that are damaged, or missing from
	// the remote while on disk here: what verify --repair puts back.
	Blobs []string `json:"-"`
	// relist: a copy lacked a listed chunk, as when a compaction ran
	// since the listing.
	relist bool
}

// CopyCheck is one verified generation of one stream.
type CopyCheck struct {
	Machine string `json:"machine"`
	// Stream is "session" or the artifact file's path.
	Stream     string `json:"stream"`
	Generation string `json:"generation"`
	Newest     bool   `json:"newest"`
	Bytes      int64  `json:"bytes"`
	// Local compares the newest generation with the local file.
	Local string `json:"local,omitempty"`
	Error string `json:"error,omitempty"`
}

// OK reports whether the session's remote copies were all read and are
// sound.
func (c Check) OK() bool { return len(c.Problems) == 0 && len(c.Unchecked) == 0 }

// Damaged reports whether a remote copy failed a check.
func (c Check) Damaged() bool { return len(c.Problems) > 0 }

// failed files err as damage, or as unchecked when the remote did not
// answer.
func (c *Check) failed(err error) {
	if remote.Unanswered(err) {
		c.Unchecked = append(c.Unchecked, err.Error())
		return
	}
	c.Problems = append(c.Problems, err.Error())
}

// Verify reassembles every generation of every stream of the matching
// sessions (all sessions, deleted ones too, when prefixes is empty), checks
// each chunk hash, the stream hashes and that nothing is missing, checks the
// blobs the newest copies reference, and compares the newest copies with the
// local files. It changes nothing. Catalog problems are returned beside the
// checks.
func Verify(ctx context.Context, r *repo.Repo, prefixes []string, opts Options) ([]Check, []string, error) {
	opts.setDefaults()
	opts.All = len(prefixes) == 0
	opts.IncludeDeleted = true
	p, targets, err := planTargets(ctx, r, opts, prefixes)
	if err != nil {
		return nil, nil, err
	}
	local, err := opts.local()
	if err != nil {
		return nil, nil, err
	}
	checks := make([]Check, len(targets))
	blobs := &blobChecker{}
	done := counted(opts.Progress, Progress{SessionsTotal: len(targets)})
	eachTarget(ctx, r, targets, len(p.sessions), opts, nil, func(i int, t *target, listed *repo.SessionObjects) {
		checks[i] = verifyOne(ctx, r, t, local.Find(t.id), blobs, opts, listed)
		done(0) // no bytes: verify reads older generations too
	})
	problems := p.problems
	if opts.All && opts.Machine == "" && ctx.Err() == nil {
		problems = append(problems, uncataloged(ctx, r, p.sessions)...)
	}
	return checks, problems, ctx.Err()
}

// maxUncataloged bounds the sessions uncataloged collects (the listing is
// the remote's word).
const maxUncataloged = 1 << 16

// uncataloged lists the sessions on the remote (one paged LIST) and says
// which no machine's catalog names: their catalogs were lost (a machine
// folder deleted by hand), so ls and restore --all cannot see them.
func uncataloged(ctx context.Context, r *repo.Repo, known map[string]*target) []string {
	var ids []string
	seen := 0
	for obj, err := range r.Client().List(ctx, repo.SessionsPrefix(), remote.ListOptions{Delimiter: "/"}) {
		if err != nil {
			return []string{fmt.Sprintf("list the sessions on the remote: %v", err)}
		}
		// Every name counts toward the bound, known or not: a listing
		// that never ends must end here.
		if seen++; seen > len(known)+maxUncataloged {
			return []string{fmt.Sprintf("the listing of the sessions on the remote goes on past %d names; not followed further", seen-1)}
		}
		id := strings.TrimSuffix(strings.TrimPrefix(obj.Key, repo.SessionsPrefix()), "/")
		if !obj.Prefix || !safename.SessionID(id) || known[id] != nil {
			continue
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil
	}
	// An agent puts a new session's chunks before its catalog, within one
	// pass: the catalogs read again after the listing name those.
	if cats, _, err := readCatalogs(ctx, r, "", 8); err == nil {
		named := map[string]bool{}
		for _, c := range cats {
			for _, e := range c.Sessions {
				named[e.ID] = true
			}
		}
		ids = slices.DeleteFunc(ids, func(id string) bool { return named[id] })
	}
	// On a versioned bucket MinIO's delimiter listing still names the
	// folder of a session prune removed whole (it holds delete markers
	// only): a session is uncataloged only if an object is there (a failed
	// listing keeps it, so no problem is hidden).
	ids = slices.DeleteFunc(ids, func(id string) bool {
		ok, err := remote.AnyObject(ctx, r.Client(), repo.SessionsPrefix()+id+"/")
		return !ok && err == nil
	})
	n := len(ids)
	if n == 0 {
		return nil
	}
	ids = ids[:min(n, 3)]
	more := ""
	if n > len(ids) {
		more = fmt.Sprintf(" and %d more", n-len(ids))
	}
	return []string{fmt.Sprintf("%d sessions on the remote are in no machine's catalog (%s%s): a machine's catalog was lost; run 'ompsync agent --once' on the machine that backed them up to write it again", n, strings.Join(ids, ", "), more)}
}

// verifyOne checks t's copies; one that lacks a listed chunk is listed
// again and read twice more before it counts as damage, as fetch does.
func verifyOne(ctx context.Context, r *repo.Repo, t *target, localRel string, blobs *blobChecker, opts Options, listed *repo.SessionObjects) Check {
	for attempt := 1; ; attempt++ {
		c := verifyOnce(ctx, r, t, localRel, blobs, opts, listed)
		if !c.relist || attempt == 3 {
			return c
		}
		listed = nil
	}
}

func verifyOnce(ctx context.Context, r *repo.Repo, t *target, localRel string, blobs *blobChecker, opts Options, listed *repo.SessionObjects) Check {
	c := Check{Agent: opts.Store.Name(), ID: t.id, Path: localRel}
	if c.Path == "" {
		c.Path = t.newest().Path
	}
	invs, err := inventory(ctx, r, t.id, opts, listed)
	if err != nil {
		c.failed(fmt.Errorf("list: %w", err))
		return c
	}
	refs := map[string]bool{}
	if localRel != "" {
		// Each machine's copy is compared in this machine's form: the
		// folders it records rewritten for the local file's (as restore
		// writes them), so a session placed here is the same, not diverged.
		t.cwd = headerCwd(opts.Store, abs(opts.AgentDir, localRel))
	}
	for _, inv := range invs {
		c.verifyStream(ctx, r, t, inv, localRel, refs, opts)
	}
	if !slices.ContainsFunc(invs, func(inv *repo.StreamInventory) bool { return inv.Stream.Name == repo.SessionStream }) {
		c.Problems = append(c.Problems, "the catalog lists this session but the remote holds no copy of it")
	}
	c.checkBlobs(ctx, r, slices.Sorted(maps.Keys(refs)), blobs, opts)
	return c
}

// verifyStream checks every generation of one stream, and adds the blobs
// its newest copy references to refs.
func (c *Check) verifyStream(ctx context.Context, r *repo.Repo, t *target, inv *repo.StreamInventory, localRel string, refs map[string]bool, opts Options) {
	s := inv.Stream
	name, localPath := s.Name, ""
	if s.Name == repo.SessionStream {
		localPath = localRel
	} else {
		rel, ok := repo.ArtifactPath(s.Name)
		if !ok {
			c.Problems = append(c.Problems, fmt.Sprintf("machine %s: artifact stream %q has an unsafe path", s.Machine, s.Name))
			return
		}
		name = rel
		if ar, ok := opts.Store.ArtifactRel(c.Path, rel); ok && localRel != "" {
			localPath = ar
		}
	}
	newest := inv.Newest()
	// The newest copy when it began as the file shrank, and the
	// longest older one, which may hold lines it lacks.
	var shrunk, longest *repo.Generation
	var longestBytes int64
	for _, g := range inv.Generations {
		if !g.HasMeta {
			c.Notes = append(c.Notes, fmt.Sprintf("machine %s, %s: generation %s has chunks but no meta (an upload cut off as it began); restore ignores it", s.Machine, name, g.Name))
			continue
		}
		cc := CopyCheck{Machine: s.Machine, Stream: name, Generation: g.Name, Newest: g == newest}
		st, err := verifyCopy(ctx, r, t, s, g, &cc, localPath, refs, opts)
		if err == nil && cc.Newest && st.Meta.Reason == "shrank" && s.Name == repo.SessionStream {
			shrunk = g
		}
		if err == nil {
			// As restore refuses it: the catalog promises more than is there.
			err = t.short(s, g, cc.Bytes)
		}
		if err != nil {
			cc.Error = err.Error()
			c.failed(err)
			c.relist = c.relist || compactedMeanwhile(err)
		}
		if !cc.Newest && cc.Bytes > longestBytes { // 0 for a copy that failed
			longest, longestBytes = g, cc.Bytes
		}
		c.Copies = append(c.Copies, cc)
	}
	if e := t.entry(s.Machine); e != nil && s.Name == repo.SessionStream && e.Size > 0 && e.State != repo.StateDeleted {
		// A generation without its first chunk is one readers skip, and
		// restore would take an older copy or none: the catalog's is lost.
		if g := inv.Find(e.Generation); g == nil || !g.HasMeta {
			c.Problems = append(c.Problems, fmt.Sprintf("machine %s: the generation %s its catalog names is not complete on the remote (its first chunk or its meta is missing)", s.Machine, e.Generation))
		}
	}
	if shrunk != nil && longest != nil {
		// Damage to either copy is a problem above already.
		if n, err := firstLacking(ctx, r, opts.Store, s, shrunk, longest, opts.AgentDir, localPath); err == nil && n > 0 {
			c.Notes = append(c.Notes, shrunkLacks(s.Machine, longest.Name, longestBytes, n, t.id))
		}
	}
}

// verifyCopy streams generation g of s, every hash checked, and fills in
// cc: its size and, for the newest copy, how the local file at localPath
// compares with it as it goes by (a few buffers whatever the generation's
// size); the blobs the newest copy references are added to refs.
func verifyCopy(ctx context.Context, r *repo.Repo, t *target, s repo.Stream, g *repo.Generation, cc *CopyCheck, localPath string, refs map[string]bool, opts Options) (repo.Streamed, error) {
	limit := opts.MaxStreamSize
	if e := t.cataloged(s, g); e != nil {
		limit = slack(e.Size, opts.MaxStreamSize)
	}
	var cmp *localCmp
	var scan *scanWriter
	var st repo.Streamed
	err := retry(ctx, func() error {
		// The local file an earlier attempt opened, if any.
		cmp.close()
		scan = &scanWriter{w: io.Discard} // an older copy's blobs are not checked
		var rw *project.Rewriter
		if cc.Newest {
			cmp = openLocalCmp(opts.AgentDir, localPath)
			scan, rw = t.mappedScan(s, cmp)
		}
		var err error
		if st, err = streamOnce(ctx, r, s, g, limit, scan, rw, true, time.Time{}); err != nil {
			return err
		}
		if st.Meta.SessionID != "" && st.Meta.SessionID != s.SessionID || st.Meta.Stream != "" && st.Meta.Stream != s.Name {
			return fmt.Errorf("%s generation %s: meta describes another stream (%s %s)", s.Prefix(), g.Name, st.Meta.SessionID, st.Meta.Stream)
		}
		return nil
	})
	cmp.close()
	if err != nil {
		return st, fmt.Errorf("session %s, machine %s, %s: %w", s.SessionID, s.Machine, s.Name, err)
	}
	cc.Bytes = st.Size
	if cc.Newest {
		maps.Copy(refs, scan.refs)
		cc.Local = cmp.result(st.Head, format{st: opts.Store, slotted: s.Name == repo.SessionStream})
	}
	return st, nil
}

// checkBlobs checks the blobs the newest copies reference, in name order.
func (c *Check) checkBlobs(ctx context.Context, r *repo.Repo, names []string, blobs *blobChecker, opts Options) {
	for _, n := range names {
		switch err := blobs.check(ctx, r, n, opts.MaxBlobSize); {
		case err == nil:
		case errors.Is(err, remote.ErrNotFound):
			// A gap in the backup only if this agent dir has the blob.
			if hasBlob(opts.AgentDir, n) {
				c.Problems = append(c.Problems, fmt.Sprintf("blob %s is referenced and on disk but not on the remote", n))
				c.Blobs = append(c.Blobs, n)
			} else {
				c.Notes = append(c.Notes, fmt.Sprintf("blob %s is referenced but neither on the remote nor on disk", n))
			}
		case remote.Unanswered(err):
			c.failed(fmt.Errorf("session %s: blob %s: %w", c.ID, n, err))
		default:
			c.Problems = append(c.Problems, fmt.Sprintf("session %s: %s", c.ID, err))
			c.Blobs = append(c.Blobs, n)
		}
	}
}

// localCmp says how the local file compares with a stream written to it,
// reading the file at the same offsets a buffer at a time, so that
// neither is held whole. The first headLen bytes of both are kept and
// compared at the end, when the stream's head object (a newer title slot
// to lay over them) is known.
type localCmp struct {
	f          *os.File // nil: no local file
	size       int64    // the local file's, as opened
	head       []byte   // the local file's first bytes
	remoteHead []byte   // the stream's
	off        int64    // bytes of the stream so far
	differ     bool     // a byte from headLen on differs
	buf        []byte
}

// openLocalCmp compares with the local file at rel (missing when rel is
// "" or the file cannot be read).
func openLocalCmp(agentDir, rel string) *localCmp {
	c := &localCmp{}
	if rel == "" {
		return c
	}
	f, err := os.Open(abs(agentDir, rel))
	if err != nil {
		return c
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		if b, err := fileBody(f, fi.Size()); err == nil {
			c.f, c.size, c.head = f, fi.Size(), b.head
			return c
		}
	}
	f.Close()
	return c
}

// close closes the local file, if c has one (c may be nil).
func (c *localCmp) close() {
	if c != nil && c.f != nil {
		c.f.Close()
	}
}

func (c *localCmp) Write(p []byte) (int, error) {
	if n := headLen - len(c.remoteHead); n > 0 {
		c.remoteHead = append(c.remoteHead, p[:min(n, len(p))]...)
	}
	// The bytes of p from headLen on that the local file has too.
	from, to := max(c.off, headLen), min(c.off+int64(len(p)), c.size)
	for !c.differ && c.f != nil && from < to {
		if c.buf == nil {
			c.buf = make([]byte, compareBuf)
		}
		n := min(to-from, int64(len(c.buf)))
		if _, err := c.f.ReadAt(c.buf[:n], from); err != nil {
			c.differ = true // cut short under us: not the same bytes
			break
		}
		c.differ = !bytes.Equal(c.buf[:n], p[from-c.off:from-c.off+n])
		from += n
	}
	c.off += int64(len(p))
	return len(p), nil
}

// result says how the local file compares with the stream, head being
// the stream's head object (nil for none), as compareLocal said of the
// two in memory.
func (c *localCmp) result(head []byte, f format) string {
	if c.f == nil {
		return LocalMissing
	}
	rh := append([]byte(nil), c.remoteHead...)
	copy(rh, head)
	n := 0
	if la, lb := f.slotLen(c.head), f.slotLen(rh); la == lb {
		n = la // compared past title slots of the same length
	}
	k := max(n, min(len(c.head), len(rh)))
	same := !c.differ && bytes.Equal(c.head[n:k], rh[n:k])
	switch {
	case same && c.size == c.off:
		return LocalSame
	case same && c.size < c.off:
		return LocalBehind
	case same:
		return LocalAhead
	}
	return LocalDiverged
}

// blobChecker verifies each blob once, however many sessions reference it.
type blobChecker struct {
	seen sync.Map // blob name -> its check's error (nil: sound)
}

func (b *blobChecker) check(ctx context.Context, r *repo.Repo, name string, limit int64) error {
	if err, ok := b.seen.Load(name); ok {
		err, _ := err.(error)
		return err
	}
	_, err := fetchBlob(ctx, r, "", name, limit, false)
	b.seen.Store(name, err)
	return err
}
