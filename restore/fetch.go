package restore

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ompsync/ompsync/atomicfile"
	"github.com/ompsync/ompsync/compact"
	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// copyData is one machine's verified copy of a stream.
type copyData struct {
	machine    string
	generation string
	data       []byte
	// file, instead of data, is a verified temp file in the agent dir
	// holding size bytes: a session copy streamed (see streamed).
	file string
	size int64
	// refs are the blobs a streamed copy references, found as its bytes
	// went by (the file is not read again for them).
	refs map[string]bool
	// mtime is what the catalog recorded; for an artifact, what its
	// chunks carry (zero from agents before chunk mtimes).
	mtime time.Time
	// mapped: the copy's folders were rewritten for this machine (size is
	// then what was written, not what the remote holds).
	mapped bool
}

// fetched is everything one session needs, verified.
type fetched struct {
	session   []copyData            // the newest copy (first) and the others
	artifacts map[string][]copyData // by path inside the artifact folder
	// blobs are those missing locally, by sha256 hex: each a verified
	// temp file in the agent dir, placed by the merger (empty in a dry run).
	blobs     map[string]string
	blobLinks map[string][]blobLink // the other names of those blobs
	notes     []string
	missing   []string // see Result.Missing
	// refs are the blobs the copies reference, found as each streamed.
	refs map[string]bool
	// buffers takes back the copies' buffers when they are discarded.
	buffers *buffers
}

// slack is how much more than its recorded size a stream may hold: the
// catalog may lag the chunks by a few upload passes (a running agent puts it
// every 5 intervals while sessions grow), but never by this much.
// The recorded size is the remote's word, so the bound is never more than
// max, the local limit.
func slack(recorded, max int64) int64 {
	if recorded >= max/2 {
		return max
	}
	return min(2*recorded+16<<20, max)
}

// fetch reassembles and verifies the copies of t's session stream (the
// newest generation of each machine, or opts.Generation), its artifact
// streams, and the blobs they reference that the agent dir lacks. Any failed
// check fails the whole session.
// listed, when not nil, is the session's part of a listing of every
// session, taken after the catalogs were read; the first attempt plans
// from it.
func fetch(ctx context.Context, r *repo.Repo, t *target, opts Options, listed *repo.SessionObjects) (*fetched, error) {
	for attempt := 1; ; attempt++ {
		f, err := fetchOnce(ctx, r, t, opts, listed)
		if attempt == 3 || !compactedMeanwhile(err) {
			return f, err
		}
		listed = nil
	}
}

// compactedMeanwhile reports a read that found a listed chunk gone or a
// gap: what a compaction deleting chunks between the listing and the
// reads looks like. fetch, verify and grep list again on it, twice at
// most, before they call it damage.
func compactedMeanwhile(err error) bool {
	return errors.Is(err, remote.ErrNotFound) || errors.Is(err, repo.ErrGap)
}

// inventory lists one session's objects, or takes them from listed.
func inventory(ctx context.Context, r *repo.Repo, id string, opts Options, listed *repo.SessionObjects) ([]*repo.StreamInventory, error) {
	if listed != nil {
		return listed.Streams, listed.Err
	}
	return retried(ctx, func() ([]*repo.StreamInventory, error) { return r.Inventory(ctx, id, opts.Machine) })
}

func fetchOnce(ctx context.Context, r *repo.Repo, t *target, opts Options, listed *repo.SessionObjects) (_ *fetched, err error) {
	invs, err := inventory(ctx, r, t.id, opts, listed)
	if err != nil {
		return nil, fmt.Errorf("list session %s: %w", t.id, err)
	}
	f := &fetched{artifacts: map[string][]copyData{}, blobs: map[string]string{}, blobLinks: map[string][]blobLink{}, refs: map[string]bool{}, buffers: opts.buffers}
	defer func() {
		if err != nil {
			f.discard() // the copies streamed before the failure
		}
	}()
	var gens []string
	// An artifact copy past the local bound is left out, not the session
	// with it: the conversation is restored, the artifact named missing.
	refused := map[string]string{}
	for _, inv := range invs {
		s := inv.Stream
		if opts.sessionOnly && s.Name != repo.SessionStream {
			continue
		}
		if s.Name == repo.SessionStream {
			for _, g := range inv.Generations {
				gens = append(gens, s.Machine+"/"+g.Name)
			}
		}
		if err := f.fetchStream(ctx, r, t, inv, refused, opts); err != nil {
			return nil, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(refused)) {
		rel, _ := repo.ArtifactPath(name)
		if len(f.artifacts[rel]) == 0 {
			f.missing = append(f.missing, fmt.Sprintf("artifact %s: %s", rel, refused[name]))
		} else {
			f.notes = append(f.notes, fmt.Sprintf("artifact %s: %s; restored another machine's", rel, refused[name]))
		}
	}
	if len(f.session) == 0 {
		if !opts.At.IsZero() {
			return nil, fmt.Errorf("session %s: the remote held no copy of it at %s (see 'ompsync history' for when each copy began): %w", t.id, opts.At.Format(time.RFC3339), errNoCopy)
		}
		if opts.Generation != "" {
			sort.Strings(gens)
			return nil, fmt.Errorf("session %s has no generation %s (it has %s)", t.id, opts.Generation, strings.Join(gens, ", "))
		}
		return nil, fmt.Errorf("session %s: the remote holds no complete copy of it", t.id)
	}
	if opts.sessionOnly {
		return f, nil
	}
	if err := f.fetchBlobs(ctx, r, opts); err != nil {
		return nil, fmt.Errorf("session %s: %w", t.id, err)
	}
	return f, nil
}

// fetchStream adds to f the copy of inv's stream fetch takes: the newest
// generation, or opts.Generation of the session stream. An artifact's copy
// past the local bound is left out, and named in refused.
func (f *fetched) fetchStream(ctx context.Context, r *repo.Repo, t *target, inv *repo.StreamInventory, refused map[string]string, opts Options) error {
	s := inv.Stream
	g := inv.Newest()
	if s.Name == repo.SessionStream && opts.Generation != "" {
		g = inv.Find(opts.Generation)
	}
	if g == nil || !g.HasMeta {
		return nil
	}
	limit := opts.MaxStreamSize
	var mtime time.Time
	if s.Name == repo.SessionStream {
		limit = slack(t.recordedSize(), opts.MaxStreamSize)
		if e := t.entry(s.Machine); e != nil {
			mtime = e.Mtime
		}
		if e := t.cataloged(s, g); e != nil {
			limit = slack(e.Size, opts.MaxStreamSize)
		}
	}
	// Every copy, session or artifact, streams to a temp file past its
	// first MiB: the merge reads them through, whatever their size.
	rel, ok := repo.ArtifactPath(s.Name)
	if s.Name != repo.SessionStream && !ok {
		return fmt.Errorf("session %s: artifact stream %q has an unsafe path", t.id, s.Name)
	}
	var c copyData
	var err error
	if opts.At.IsZero() {
		c, err = streamCopy(ctx, r, t, s, g, limit, opts)
	} else {
		c, err = streamAt(ctx, r, t, s, inv, limit, opts)
		mtime = c.mtime // when its last bytes reached the remote
	}
	if tl := (*repo.TooLargeError)(nil); s.Name != repo.SessionStream && errors.As(err, &tl) {
		refused[s.Name] = fmt.Sprintf("the copy of machine %s is %d bytes, more than the %d a file may hold (the local limit)", s.Machine, tl.Size, tl.Max)
		return nil
	}
	if err != nil {
		return err
	}
	if s.Name == repo.SessionStream && opts.Generation == "" && opts.At.IsZero() {
		if note := shrunkNote(ctx, r, opts, t, inv, g, c.size); note != "" {
			f.notes = append(f.notes, note)
		}
	}
	maps.Copy(f.refs, c.refs)
	switch {
	case c.generation == "":
		// No copy on this machine at opts.At.
	case s.Name != repo.SessionStream:
		f.artifacts[rel] = append(f.artifacts[rel], c)
	case s.Machine == t.newest().machine:
		c.mtime = mtime
		f.session = append([]copyData{c}, f.session...)
	default:
		c.mtime = mtime
		f.session = append(f.session, c)
	}
	return nil
}

// discard removes the temp files the merger did not place and gives the
// copies' buffers back: nothing may read f's copies after it.
func (f *fetched) discard() {
	for _, tmp := range f.blobs {
		if tmp != "" {
			os.Remove(tmp)
		}
	}
	drop := func(c *copyData) {
		if c.file != "" {
			os.Remove(c.file)
		}
		f.buffers.put(c.data)
		c.data = nil
	}
	for i := range f.session {
		drop(&f.session[i])
	}
	for _, cs := range f.artifacts {
		for i := range cs {
			drop(&cs[i])
		}
	}
}

// buffers reuses the buffers of copies held in memory, each spillAt bytes
// of capacity: one made for every session was a twentieth of a restore's
// CPU in zeroing and collecting 500 MB for 1,000 sessions. A nil *buffers
// makes a new buffer every time.
type buffers struct{ pool sync.Pool }

// pooledFrom is the smallest listed size whose copy takes a pooled buffer;
// a smaller one gets a buffer of its own size, not a MiB.
const pooledFrom = 64 << 10

func (b *buffers) get(size int64) []byte {
	if b == nil || size < pooledFrom {
		return make([]byte, 0, min(spillAt, max(size, 4<<10)))
	}
	if p, _ := b.pool.Get().(*[]byte); p != nil {
		return (*p)[:0]
	}
	return make([]byte, 0, spillAt)
}

// put takes back a buffer get gave out; others are left to the collector.
func (b *buffers) put(buf []byte) {
	if b == nil || cap(buf) != spillAt {
		return
	}
	buf = buf[:0]
	b.pool.Put(&buf)
}

// streamCopy streams one copy of a session or an artifact, verified as it
// arrives, with its title slot laid over it: a copy of up to spillAt bytes
// is kept in memory, a larger one goes to a hidden temp file in the agent
// dir (in a dry run, the system's temp folder), so that no more than a few
// buffers of it are ever in memory and the merge reads it through. The
// blobs it references are found as it goes by. With opts.At, only the bytes
// uploaded by then are kept (see streamAt); a dry run's temp file is not
// synced.
func streamCopy(ctx context.Context, r *repo.Repo, t *target, s repo.Stream, g *repo.Generation, limit int64, opts Options) (copyData, error) {
	c := copyData{machine: s.Machine, generation: g.Name}
	var head []byte
	var st repo.Streamed
	err := retry(ctx, func() (err error) {
		if c.file != "" {
			os.Remove(c.file) // an attempt before's
		}
		// Sized once from the listed size, as the head is.
		sp := &spill{dir: opts.AgentDir, buf: opts.buffers.get(repo.MaxEnd(g.Chunks))}
		if opts.DryRun {
			sp.dir = "" // nothing written to the agent dir
		}
		// The stream writes 64 KiB at a time, straight to the spill; its
		// head is the spill's (a copy of every copy's first MiB, grown by
		// doubling, was a sixth of a restore's CPU).
		sw, rw := t.mappedScan(s, sp)
		st, err = streamOnce(ctx, r, s, g, limit, sw, rw, false, opts.At)
		if err == nil && st.Head != nil {
			err = sp.overlay(st.Head)
		}
		head, c.refs = sp.first(), sw.refs
		err = cmp.Or(err, sp.close(err == nil && !opts.DryRun))
		c.data, c.file, c.size = sp.buf, sp.name, st.Size
		if rw != nil {
			c.size, c.mapped = rw.Written, rw.Changed > 0
		}
		return err
	})
	c.mtime = st.Mtime // an artifact's, from its chunks
	if !opts.At.IsZero() {
		c.mtime = st.Uploaded
	}
	if err != nil {
		err = fmt.Errorf("session %s, machine %s, %s: %w", s.SessionID, s.Machine, s.Name, err)
	} else if s.Name == repo.SessionStream {
		if info, ok := opts.Store.Describe(head); ok && info.ID != "" && info.ID != t.id {
			err = fmt.Errorf("session %s, machine %s: the copy's header names session %q", t.id, s.Machine, info.ID)
		} else if opts.At.IsZero() {
			err = t.short(s, g, st.Size) // the remote's size, not the mapped copy's
		}
	}
	if err != nil && c.file != "" {
		os.Remove(c.file)
	}
	return c, err
}

// mappedScan is w behind this machine's folder mapping of s (rw, nil for
// none: a session copy is rewritten from its machine's recorded folder to
// t.cwd, the folder the session runs in here) and a scan for the blobs the
// bytes reference, as fetch and verify stream every copy.
func (t *target) mappedScan(s repo.Stream, w io.Writer) (*scanWriter, *project.Rewriter) {
	var rw *project.Rewriter
	if e := t.entry(s.Machine); s.Name == repo.SessionStream && e != nil && t.cwd != "" {
		if m := (project.Mapping{From: e.Cwd, To: t.cwd}); !m.Identity() {
			rw = m.Writer(w)
			w = rw
		}
	}
	return &scanWriter{w: w, refs: map[string]bool{}}, rw
}

// streamOnce streams generation g of s to sw (behind which rw, when not
// nil, is closed at the end), every hash checked with every, cut at at
// when it is not zero; the head object's blob references join sw's.
func streamOnce(ctx context.Context, r *repo.Repo, s repo.Stream, g *repo.Generation, limit int64, sw *scanWriter, rw *project.Rewriter, every bool, at time.Time) (repo.Streamed, error) {
	var st repo.Streamed
	var err error
	if at.IsZero() {
		st, err = r.StreamGeneration(ctx, s, g, limit, sw, every)
	} else {
		st, err = r.StreamGenerationAt(ctx, s, g, limit, sw, at)
	}
	if err == nil && rw != nil {
		err = rw.Close()
	}
	blobRefs(st.Head, sw.refs)
	return st, err
}

// spillAt is the most of a streamed copy kept in memory: most sessions and
// artifacts are smaller and cost no temp file (a file, its fsync and its
// removal made a restore onto 300 unchanged sessions 8 times slower).
const spillAt = 1 << 20

// spill keeps what is written to it in memory, up to spillAt bytes, and
// from then on in a hidden temp file in dir (created then, with what was
// kept), synced when closed.
type spill struct {
	dir  string
	buf  []byte
	f    *os.File
	name string
	// head is a spilled copy's first scanHead bytes (kept from buf).
	head []byte
}

// first is the copy's first bytes: all of them in memory, else its first
// scanHead.
func (s *spill) first() []byte {
	if s.f == nil {
		return s.buf
	}
	return s.head
}

func (s *spill) Write(p []byte) (int, error) {
	if s.f == nil && len(s.buf)+len(p) <= spillAt {
		s.buf = append(s.buf, p...)
		return len(p), nil
	}
	if s.f == nil {
		if s.dir != "" {
			if err := os.MkdirAll(s.dir, 0o700); err != nil {
				return 0, err
			}
		}
		f, err := os.CreateTemp(s.dir, atomicfile.TempPattern("session"))
		if err != nil {
			return 0, err
		}
		s.f, s.name = f, f.Name()
		if _, err := f.Write(s.buf); err != nil {
			return 0, err
		}
		s.head = append(s.buf, p[:min(len(p), max(scanHead-len(s.buf), 0))]...)
		s.buf = nil
	}
	return s.f.Write(p)
}

// overlay writes b over the first bytes.
func (s *spill) overlay(b []byte) error {
	if s.f == nil {
		copy(s.buf, b)
		return nil
	}
	copy(s.head, b)
	_, err := s.f.WriteAt(b, 0)
	return err
}

// close syncs (with sync) and closes the temp file, if there is one.
func (s *spill) close(sync bool) error {
	if s.f == nil {
		return nil
	}
	if !sync {
		return s.f.Close()
	}
	return syncClose(s.f)
}

// syncClose syncs and closes f, and returns the first error.
func syncClose(f *os.File) error {
	return cmp.Or(f.Sync(), f.Close())
}

// scanHead is how much of a spilled copy is kept in memory: enough for any
// store's header (omp's title slot and header line).
const scanHead = 1 << 20

// scanWriter passes a streamed copy on to w, finding the blob references
// in it as it goes by, so the temp file it is written to is not read back
// for them (with its header, that cost a restore of 500 MB a sixth of its
// CPU). With refs nil it only passes the bytes on.
type scanWriter struct {
	w    io.Writer
	tail []byte // the last bytes: a reference cut between writes is seen whole
	refs map[string]bool
}

func (s *scanWriter) Write(p []byte) (int, error) {
	const keep = len(blobTag) + 64
	if s.refs == nil {
		return s.w.Write(p)
	}
	if len(s.tail) > 0 {
		// A reference that starts in the bytes before p ends in its first
		// keep bytes.
		blobRefs(append(s.tail[:len(s.tail):len(s.tail)], p[:min(len(p), keep)]...), s.refs)
	}
	blobRefs(p, s.refs)
	// The last keep bytes of the tail and p.
	s.tail = append(s.tail, p[max(0, len(p)-keep):]...)
	s.tail = append(s.tail[:0], s.tail[max(0, len(s.tail)-keep):]...)
	return s.w.Write(p)
}

// blobTag starts a reference to one of omp's blobs: blob:sha256:<64 hex>.
const blobTag = "blob:sha256:"

// blobRefs lists the blobs b references, each once. (What the regular
// expression blob:sha256:([0-9a-f]{64}) finds, at a fraction of its cost
// over every restored byte.)
func blobRefs(b []byte, into map[string]bool) {
	for into != nil {
		i := bytes.Index(b, []byte(blobTag))
		if i < 0 {
			return
		}
		b = b[i+len(blobTag):]
		if len(b) >= 64 && repo.BlobName(string(b[:64])) {
			into[string(b[:64])] = true
		}
	}
}

// fetchBlobs fetches the referenced blobs the agent dir does not have. A
// blob whose bytes do not hash to its name fails the session; one missing
// from the remote is a note (omp may have referenced it before it existed).
func (f *fetched) fetchBlobs(ctx context.Context, r *repo.Repo, opts Options) error {
	for _, name := range slices.Sorted(maps.Keys(f.refs)) {
		if hasBlob(opts.AgentDir, name) {
			continue
		}
		tmp, err := fetchBlob(ctx, r, opts.AgentDir, name, opts.MaxBlobSize, !opts.DryRun)
		if errors.Is(err, remote.ErrNotFound) {
			if _, backedUp := opts.blobMtimes[name]; backedUp {
				// A catalog lists it: it was backed up, and the remote lost it.
				f.missing = append(f.missing, fmt.Sprintf("blob %s was backed up but is no longer on the remote", name))
			} else {
				f.notes = append(f.notes, fmt.Sprintf("blob %s is referenced but not on the remote", name))
			}
			continue
		}
		if err != nil {
			return err
		}
		f.blobs[name] = tmp
		if f.blobLinks[name], err = blobLinks(ctx, r, name, opts.MaxBlobSize); err != nil {
			return err
		}
	}
	return nil
}

// hasBlob reports whether the agent dir holds something under blob name.
func hasBlob(agentDir, name string) bool {
	_, err := os.Lstat(abs(agentDir, store.BlobRel(name)))
	return err == nil
}

// fetchBlob reads one blob as it arrives, hashing it, into a temp file in
// the agent dir (with keep; otherwise it only checks it), and returns the
// file once its bytes hash to its name: a blob of any size costs a few
// buffers, and a wrong one leaves nothing behind.
func fetchBlob(ctx context.Context, r *repo.Repo, agentDir, name string, limit int64, keep bool) (string, error) {
	tmp, err := retried(ctx, func() (string, error) {
		rc, err := r.OpenBlob(ctx, name, limit)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		check := func(w io.Writer) error {
			h := sha256.New()
			if _, err := io.Copy(io.MultiWriter(h, w), rc); err != nil {
				return err
			}
			if hex.EncodeToString(h.Sum(nil)) != name {
				return errors.New("content does not match its sha256")
			}
			return nil
		}
		if !keep {
			return "", check(io.Discard)
		}
		// In the agent dir itself, hidden: on the same file system as
		// blobs/, where it is linked into place, and never backed up.
		if err := os.MkdirAll(agentDir, 0o700); err != nil {
			return "", err
		}
		return atomicfile.Temp(agentDir, "blob", check)
	})
	if err != nil {
		return "", fmt.Errorf("blob %s: %w", name, err)
	}
	return tmp, nil
}

// blobListing is every blob key on the remote, as restore --all lists them
// while it restores the sessions (one round trip fewer at the end).
type blobListing struct {
	names, problems []string
	links           []blobLink
	err             error
}

// listBlobs lists every blob on the remote.
func listBlobs(ctx context.Context, r *repo.Repo) blobListing {
	var l blobListing
	prefix := repo.BlobKey("")
	for obj, err := range r.Client().List(ctx, prefix, remote.ListOptions{}) {
		if err != nil {
			l.err = fmt.Errorf("list blobs: %w", err)
			return l
		}
		name := strings.TrimPrefix(obj.Key, prefix)
		if _, _, ok := repo.BlobLink(name); ok {
			l.links = append(l.links, blobLink{name: name, size: obj.Size})
			continue
		}
		if !repo.BlobName(name) {
			// omp names blobs by their sha256; anything else cannot be
			// checked, so it is not restored.
			l.problems = append(l.problems, fmt.Sprintf("blob key %q is not a sha256 name; not restored", obj.Key))
			continue
		}
		l.names = append(l.names, name)
	}
	return l
}

// restoreAllBlobs brings back every blob of l that the agent dir lacks
// (restore --all reproduces the whole tree, not only what sessions
// reference), opts.Parallel at a time.
func restoreAllBlobs(ctx context.Context, r *repo.Repo, l blobListing, opts Options) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	names := slices.DeleteFunc(l.names, func(name string) bool { return hasBlob(opts.AgentDir, name) })
	links := slices.DeleteFunc(l.links, func(lk blobLink) bool { return hasBlob(opts.AgentDir, lk.name) })
	var mu sync.Mutex
	n := 0
	var failed []string
	parallel(len(names), opts.Parallel, func(i int) {
		tmp, err := fetchBlob(ctx, r, opts.AgentDir, names[i], opts.MaxBlobSize, !opts.DryRun)
		wrote := opts.DryRun
		if err == nil && !opts.DryRun {
			wrote, err = placeBlob(opts.AgentDir, names[i], tmp, opts.blobMtimes[names[i]])
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed = append(failed, err.Error())
		} else if wrote {
			n++
		}
	})
	sort.Strings(failed) // in the order of the names, whatever finished first
	problems := append(l.problems, failed...)
	if err := fetchLinkBytes(ctx, r, links, opts.MaxBlobSize); err != nil {
		problems = append(problems, err.Error())
	} else if !opts.DryRun {
		for _, l := range links {
			if err := writeBlobLink(opts.AgentDir, l); err != nil {
				problems = append(problems, err.Error())
			}
		}
	}
	if len(problems) > 0 {
		return n, errors.New(strings.Join(problems, "; "))
	}
	return n, nil
}

// shrunkNote says, as verify does, when the copy restored (generation g,
// size bytes) began as the file shrank and an older generation holds lines
// it lacks, and the local file lacks them too: restoring the
// newest copy cannot bring those back, --generation can. It costs nothing
// unless an older generation is longer: then the copy's meta and, if it
// says shrank, both generations' lines and the local file are read. A
// check that fails says nothing (verify reports damage).
func shrunkNote(ctx context.Context, r *repo.Repo, opts Options, t *target, inv *repo.StreamInventory, g *repo.Generation, size int64) string {
	var longest *repo.Generation
	var longestEnd int64
	for _, o := range inv.Generations {
		if end := repo.MaxEnd(o.Chunks); o != g && o.HasMeta && end > max(size, longestEnd) {
			longest, longestEnd = o, end
		}
	}
	if longest == nil {
		return ""
	}
	if m, err := r.GenerationMeta(ctx, inv.Stream, g); err != nil || m.Reason != "shrank" {
		return ""
	}
	n, err := firstLacking(ctx, r, opts.Store, inv.Stream, g, longest, opts.AgentDir, t.local)
	if err != nil || n == 0 {
		return ""
	}
	return shrunkLacks(inv.Stream.Machine, longest.Name, longestEnd, n, t.id)
}

// firstLacking is compact.FirstLacking with the lines of the local file
// rel, when there is one: lines it holds are not lacking here.
func firstLacking(ctx context.Context, r *repo.Repo, st compact.Lines, s repo.Stream, cur, old *repo.Generation, agentDir, rel string) (int, error) {
	var local io.Reader
	if rel != "" {
		if f, err := os.Open(abs(agentDir, rel)); err == nil {
			defer f.Close()
			local = f
		}
	}
	return compact.FirstLacking(ctx, r, st, s, cur, old, local)
}

// shrunkLacks is the note that machine's current copy of session id began
// when the file shrank, and that generation gen (size bytes) holds lines
// it lacks from line on, with the command that brings them back.
func shrunkLacks(machine, gen string, size int64, line int, id string) string {
	return fmt.Sprintf("machine %s: the current copy began when the file shrank; generation %s (%d bytes) holds lines it lacks, from line %d: 'ompsync restore --generation %s %s' brings them back",
		machine, gen, size, line, gen, id)
}

// retried is retry of a call that returns a value.
func retried[T any](ctx context.Context, f func() (T, error)) (v T, err error) {
	err = retry(ctx, func() error { v, err = f(); return err })
	return v, err
}

// retry runs f until it succeeds, fails for a reason retrying cannot fix,
// or has failed four times. The remote client retries each request; this
// also covers a body cut off mid-read, which it cannot see.
func retry(ctx context.Context, f func() error) error {
	wait := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || attempt >= 4 || ctx.Err() != nil || !(remote.IsTransient(err) || remote.NetworkTransient(err)) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait *= 2
	}
}
