package repo

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/safename"
)

// Repo reads and writes the repository layout on a remote through a codec.
type Repo struct {
	client remote.Client
	codec  Codec

	mu          sync.Mutex
	marker      *Marker // as last read or written (nil: none)
	markerKnown bool
	markerAt    time.Time // when marker was last read or written
	recheck     bool      // the next CheckWrite reads the marker

	// log, when set, hears every change of recipients this Repo makes.
	log *slog.Logger

	// refReads, when not 0, replaces maxRefReads (tests).
	refReads int

	bufs streamBufs
}

// New returns a Repo over client using codec.
func New(client remote.Client, codec Codec) *Repo {
	return &Repo{client: client, codec: codec}
}

// Client is the underlying remote.
func (r *Repo) Client() remote.Client { return r.client }

// getAll reads a whole object, refusing one larger than limit bytes.
func (r *Repo) getAll(ctx context.Context, key string, limit int64) ([]byte, error) {
	rc, err := r.client.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	// A body that breaks off is the network failing (storedBody); one
	// byte past limit is enough to refuse it, with a message of its own.
	body := &storedBody{ctx: ctx, key: key, rc: rc, left: limit + 1}
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("read %s: object larger than %d bytes", key, limit)
	}
	return b, nil
}

// sealedLimit is the largest stored object that can hold plain bytes of up to
// limit: compression or encryption never grows data by more than this.
func sealedLimit(limit int64) int64 { return limit + limit/8 + 64<<10 }

func (r *Repo) getOpen(ctx context.Context, key string, limit int64) ([]byte, error) {
	sealed, err := r.getAll(ctx, key, sealedLimit(limit))
	if err != nil {
		return nil, err
	}
	return r.open(ctx, key, sealed, limit)
}

// open opens a stored object. An encrypting codec refuses a plaintext
// object; it is accepted only where the marker says plaintext belongs.
func (r *Repo) open(ctx context.Context, key string, sealed []byte, limit int64) ([]byte, error) {
	plain, err := r.codec.Open(sealed, limit)
	if errors.Is(err, ErrNotEncrypted) && r.plaintextAllowed(ctx) {
		plain, err = (&Zstd{}).Open(sealed, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", key, r.explainOpen(ctx, err))
	}
	return plain, nil
}

// putSealed is every put of an object held in memory: checked against the
// marker (CheckWrite), sealed, put at key; it returns the size stored. what
// names the object in a sealing error.
func (r *Repo) putSealed(ctx context.Context, what, key string, plain []byte, opts remote.PutOptions) (int, error) {
	if err := r.CheckWrite(ctx); err != nil {
		return 0, err
	}
	sealed, err := r.codec.Seal(plain)
	if err != nil {
		return 0, fmt.Errorf("seal %s: %w", what, err)
	}
	if err := r.client.Put(ctx, key, sealed, opts); err != nil {
		return 0, err
	}
	return len(sealed), nil
}

// put is putSealed of an object named by its key.
func (r *Repo) put(ctx context.Context, key string, plain []byte) error {
	_, err := r.putSealed(ctx, key, key, plain, remote.PutOptions{})
	return err
}

// PutChunk stores bytes [h.Start, h.End) of a generation; data must be exactly
// that range. Its size on the remote is returned for accounting. With
// opts.IfAbsent a chunk already under the key is left as it is
// (remote.ErrPreconditionFailed).
func (r *Repo) PutChunk(ctx context.Context, s Stream, gen string, h ChunkHeader, data []byte, opts remote.PutOptions) (int, error) {
	return r.putSealed(ctx, "chunk", s.ChunkKey(gen, h.Start, h.End), EncodeChunk(h, data), opts)
}

// GetChunk reads and verifies one chunk.
func (r *Repo) GetChunk(ctx context.Context, s Stream, gen string, start, end int64) (ChunkHeader, []byte, error) {
	plain, err := r.getChunk(ctx, s, gen, start, end)
	if err != nil {
		return ChunkHeader{}, nil, err
	}
	return decodeChunk(plain, start, end, true)
}

// PutMeta stores a generation's metadata.
func (r *Repo) PutMeta(ctx context.Context, s Stream, m Meta) error {
	return r.put(ctx, s.MetaKey(m.Generation), EncodeMeta(m))
}

// GetMeta reads a generation's metadata.
func (r *Repo) GetMeta(ctx context.Context, s Stream, gen string) (Meta, error) {
	b, err := r.getOpen(ctx, s.MetaKey(gen), MaxMetaSize)
	if err != nil {
		return Meta{}, err
	}
	return DecodeMeta(b)
}

// GenerationMeta reads the meta of a complete generation: its meta object,
// or with MetaInChunk the header of its first chunk alone (streamed, the
// rest of the chunk never read), checked against the key (HeaderMeta).
func (r *Repo) GenerationMeta(ctx context.Context, s Stream, g *Generation) (Meta, error) {
	if !g.MetaInChunk {
		return r.GetMeta(ctx, s, g.Name)
	}
	picked, _ := Cover(g.Chunks)
	if len(picked) == 0 || picked[0].Start != 0 {
		return Meta{}, fmt.Errorf("%s generation %s: no meta object and no chunk at offset 0", s.Prefix(), g.Name)
	}
	h, err := r.chunkHeader(ctx, s, g.Name, picked[0])
	if err != nil {
		return Meta{}, err
	}
	return HeaderMeta(s, g.Name, h)
}

// PutHead stores the current title slot of a generation.
func (r *Repo) PutHead(ctx context.Context, s Stream, gen string, slot []byte) error {
	return r.put(ctx, s.HeadKey(gen), slot)
}

// GetHead reads a generation's title slot (ErrNotFound when never replaced).
func (r *Repo) GetHead(ctx context.Context, s Stream, gen string) ([]byte, error) {
	return r.getOpen(ctx, s.HeadKey(gen), MaxMetaSize)
}

// PutCatalog replaces a machine's catalog whole and returns its size as
// stored (plaintext). c.Updated must be new: it invalidates the machine's
// recent object.
func (r *Repo) PutCatalog(ctx context.Context, c Catalog) (int, error) {
	b := EncodeCatalog(c)
	return len(b), r.put(ctx, CatalogKey(c.Machine), b)
}

// PutRecent replaces a machine's recent object: the entries that changed
// since the catalog whose Updated is recent.Base, which lists base.
func (r *Repo) PutRecent(ctx context.Context, recent Catalog, base *CatalogIndex) error {
	return r.put(ctx, RecentKey(recent.Machine), EncodeRecent(recent, base))
}

// GetCatalog reads a machine's catalog with its recent changes laid over it.
func (r *Repo) GetCatalog(ctx context.Context, machine string) (Catalog, error) {
	c, recent, err := r.GetCatalogParts(ctx, machine)
	if err != nil {
		return Catalog{}, err
	}
	return Amend(c, recent), nil
}

// Amend lays a recent object's entries over its catalog (recent may be nil).
func Amend(c Catalog, recent *Catalog) Catalog {
	if recent == nil {
		return c
	}
	c.Sessions = overlay(c.Sessions, recent.Sessions, func(e CatalogEntry) string { return e.ID })
	c.Blobs = overlay(c.Blobs, recent.Blobs, func(b BlobEntry) string { return b.Name })
	c.Refused = append(append([]string(nil), c.Refused...), recent.Refused...)
	c.Writer, c.Updated = LastWrite(c, recent)
	return c
}

// overlay is a copy of base with each of over in place of base's element of
// the same key, or appended.
func overlay[T any](base, over []T, key func(T) string) []T {
	out := append([]T(nil), base...)
	at := make(map[string]int, len(out))
	for i, e := range out {
		at[key(e)] = i
	}
	for _, e := range over {
		if i, ok := at[key(e)]; ok {
			out[i] = e
		} else {
			out = append(out, e)
		}
	}
	return out
}

// LastWrite is who last wrote a machine's catalog, and when: the writer of
// its recent object (nil when none amends it) when that is the newer.
func LastWrite(c Catalog, recent *Catalog) (*Writer, time.Time) {
	if recent != nil && !recent.Updated.Before(c.Updated) {
		return recent.Writer, recent.Updated
	}
	return c.Writer, c.Updated
}

// CatalogWriter reads who last wrote a machine's catalog, and when, for
// the price of one small GET: its recent object, which every agent that
// records its writer puts after each catalog it writes whole. Without one
// (a catalog written by an older ompsync) it reads the catalog itself.
// ErrNotFound when the machine has no catalog.
func (r *Repo) CatalogWriter(ctx context.Context, machine string) (*Writer, time.Time, error) {
	st, err := r.CatalogStamp(ctx, RecentKey(machine), machine)
	if errors.Is(err, remote.ErrNotFound) {
		st, err = r.CatalogStamp(ctx, CatalogKey(machine), machine)
	}
	return st.Writer, st.Updated, err
}

// Stamp is who wrote a catalog or recent object, and when.
type Stamp struct {
	Writer  *Writer
	Updated time.Time
}

// CatalogStamp reads the catalog or recent object at key (CatalogKey or
// RecentKey of machine) no further than its stamp. An agent reads back
// what it put this way: a lost put leaves the object before it in place,
// so that the key exists says nothing.
func (r *Repo) CatalogStamp(ctx context.Context, key, machine string) (Stamp, error) {
	var head struct {
		V       int       `json:"v"`
		Machine string    `json:"machine"`
		Updated time.Time `json:"updated"`
		Writer  *Writer   `json:"writer"`
	}
	b, err := r.getOpen(ctx, key, MaxCatalogSize)
	if err != nil {
		return Stamp{}, err
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return Stamp{}, fmt.Errorf("catalog of %s: %w", machine, err)
	}
	if err := checkStamp("catalog of "+machine, head.V, head.Machine, head.Writer); err != nil {
		return Stamp{}, err
	}
	if head.Machine != machine {
		return Stamp{}, fmt.Errorf("catalog of %s names machine %q", machine, head.Machine)
	}
	return Stamp{head.Writer, head.Updated}, nil
}

// GetCatalogParts reads a machine's catalog and, when there is one that
// amends it, its recent object (nil otherwise). The two are read at once,
// one round trip, not two: a recent object written after the catalog read
// names another base and is ignored, as one read after it would be.
func (r *Repo) GetCatalogParts(ctx context.Context, machine string) (Catalog, *Catalog, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var b []byte
	var berr error
	read := make(chan struct{})
	go func() {
		defer close(read)
		b, berr = r.getOpen(ctx, RecentKey(machine), MaxCatalogSize)
	}()
	c, err := r.getCatalogObject(ctx, CatalogKey(machine), machine)
	if err != nil {
		return Catalog{}, nil, err
	}
	<-read
	if errors.Is(berr, remote.ErrNotFound) {
		return c, nil, nil
	}
	if berr != nil {
		return Catalog{}, nil, berr
	}
	recent, err := DecodeRecent(b, c)
	if err != nil {
		return Catalog{}, nil, err
	}
	if recent.Machine != machine {
		return Catalog{}, nil, fmt.Errorf("recent catalog changes of %s name machine %q", machine, recent.Machine)
	}
	if !recent.Base.Equal(c.Updated) {
		return c, nil, nil // written before the catalog was last rewritten
	}
	return c, &recent, nil
}

func (r *Repo) getCatalogObject(ctx context.Context, key, machine string) (Catalog, error) {
	b, err := r.getOpen(ctx, key, MaxCatalogSize)
	if err != nil {
		return Catalog{}, err
	}
	c, err := DecodeCatalog(b)
	if err != nil {
		return Catalog{}, err
	}
	if c.Machine != machine {
		return Catalog{}, fmt.Errorf("catalog of %s names machine %q", machine, c.Machine)
	}
	return c, nil
}

// MaxMachines bounds the machines a reader lists: each costs a catalog
// read, and a listing that never ends must end somewhere.
const MaxMachines = 1 << 14

// Machines lists the machines that have written a catalog.
func (r *Repo) Machines(ctx context.Context) ([]string, error) {
	return r.folders(ctx, MachinesPrefix(), "machines", MaxMachines, safename.Machine)
}

// PutBlobFrom stores the blob name, the size bytes of src, unless it is
// there, streaming: the sealed object is written to a temp file in tmpDir
// (removed after), then uploaded from it, so memory stays a few blocks
// whatever the blob's size. A src that
// gives fewer than size bytes is an error wrapping io.ErrUnexpectedEOF,
// and nothing is uploaded. It returns the object's size.
func (r *Repo) PutBlobFrom(ctx context.Context, name string, src io.ReaderAt, size int64, tmpDir string) (int64, error) {
	if err := r.CheckWrite(ctx); err != nil {
		return 0, err
	}
	h := sha256.New()
	tmp, n, err := r.sealTemp(tmpDir, ".blob-*.sealed", size, func(w io.Writer) (int64, error) {
		return io.CopyBuffer(w, io.TeeReader(io.NewSectionReader(src, 0, size), h), make([]byte, 256<<10))
	})
	if err != nil {
		return 0, fmt.Errorf("seal blob: %w", err)
	}
	defer removeTemp(tmp)
	if BlobName(name) && hex.EncodeToString(h.Sum(nil)) != name {
		// Written once and never replaced: a blob omp is still writing
		// (it writes them in place) would stay on the remote cut short.
		return 0, ErrBlobMismatch
	}
	err = r.client.PutReader(ctx, BlobKey(name), tmp, n, remote.PutOptions{IfAbsent: true})
	if errors.Is(err, remote.ErrPreconditionFailed) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// sealTemp seals the size bytes that write writes (it returns how many)
// into a new temp file in dir and returns it (nil on error) with the
// sealed size. It is unlinked at once where the system allows (Unix), so a
// crash leaves nothing; elsewhere removeTemp removes it. The written bytes
// are not synced: this process alone reads them back.
func (r *Repo) sealTemp(dir, pattern string, size int64, write func(io.Writer) (int64, error)) (*os.File, int64, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, 0, err
	}
	os.Remove(f.Name())
	n, err := func() (int64, error) {
		bw := bufio.NewWriterSize(f, 256<<10)
		sw, err := r.codec.SealWriter(bw, size)
		if err != nil {
			return 0, err
		}
		copied, err := write(sw)
		if err != nil {
			return 0, err
		}
		if copied != size {
			return 0, fmt.Errorf("%w: read %d of %d bytes", io.ErrUnexpectedEOF, copied, size)
		}
		if err := sw.Close(); err != nil {
			return 0, err
		}
		if err := bw.Flush(); err != nil {
			return 0, err
		}
		return f.Seek(0, io.SeekCurrent)
	}()
	if err != nil {
		removeTemp(f)
		return nil, 0, err
	}
	return f, n, nil
}

// removeTemp closes and removes a temp file of sealTemp.
func removeTemp(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

// PutBlobLink records name, "<sha256>.<ext>", as another name of the blob
// <sha256> (omp's hard link for image viewers): an empty object, since its
// bytes are the blob's (docs/FORMAT.md, "blobs").
func (r *Repo) PutBlobLink(ctx context.Context, name string) error {
	if err := r.CheckWrite(ctx); err != nil {
		return err
	}
	err := r.client.Put(ctx, BlobKey(name), nil, remote.PutOptions{IfAbsent: true})
	if errors.Is(err, remote.ErrPreconditionFailed) {
		return nil
	}
	return err
}

// ErrBlobMismatch means a blob's bytes are not those its name, their
// sha256, says: nothing was uploaded.
var ErrBlobMismatch = errors.New("the blob's bytes do not match its sha256 name")

// MaxBlobSize bounds one blob, for the agent that uploads it and the
// restore that reads it back: a blob the agent cannot promise to restore
// is refused at backup, not found out at restore.
const MaxBlobSize = 512 << 20

// MaxStreamSize bounds one stream (a session file, an artifact file), for
// the agent that uploads it and the restore that reads it back, as
// MaxBlobSize does a blob.
const MaxStreamSize = 1 << 30

// TooLargeError says a generation holds more bytes than its reader takes.
// Its message names the bound: a Max of MaxStreamSize is the local limit;
// a smaller one is what the stream's catalog records, with slack (no
// command lowers restore's MaxStreamSize below the local limit).
type TooLargeError struct {
	Prefix, Generation string
	Size, Max          int64
}

func (e *TooLargeError) Error() string {
	why := "what its catalog records, with slack"
	if e.Max >= MaxStreamSize {
		why = "the local limit of a stream"
	}
	return fmt.Sprintf("%s generation %s: %d bytes, more than the %d allowed (%s)", e.Prefix, e.Generation, e.Size, e.Max, why)
}

// GetBlob reads a blob of at most limit bytes.
func (r *Repo) GetBlob(ctx context.Context, name string, limit int64) ([]byte, error) {
	return r.getOpen(ctx, BlobKey(name), limit)
}

// Generation is what the remote holds of one generation of a stream.
type Generation struct {
	Name string
	// HasMeta says the generation is complete, its meta known: a chunk
	// starting at offset 0 is listed.
	HasMeta bool
	// MetaInChunk says no meta object is listed (the session never
	// moved): the meta is the header's of the chunk Cover takes at 0,
	// which a reader checks (HeaderMeta) when it reads that chunk; one
	// without it is damage.
	MetaInChunk bool
	// MetaObject says a meta object is listed (the session moved), of
	// MetaSize stored bytes; HeadSize is the head's.
	MetaObject         bool
	MetaSize, HeadSize int64
	HasHead            bool
	Chunks             []ChunkRef // sorted by start, then end
	// MetaModTime and HeadModTime are the listing's modification times of
	// meta and head (zero when absent): when the file last moved, and
	// when its title slot was last replaced. With MetaInChunk it is the
	// first chunk's.
	MetaModTime, HeadModTime time.Time
}

// Complete applies the format's rule to a listed generation, its chunks
// sorted: a chunk at offset 0 makes it complete, the meta in that chunk's
// header unless a meta object is listed; a meta object without a chunk at
// 0 does not (a meta too large for a header is put before the first
// chunk, and a crash between the two leaves it alone): every complete
// generation has bytes. Code that builds a Generation itself calls it, as
// Inventory and ListGeneration do.
func (g *Generation) Complete() {
	g.MetaInChunk = false
	picked, _ := Cover(g.Chunks)
	g.HasMeta = len(picked) > 0 && picked[0].Start == 0
	if g.HasMeta && !g.MetaObject {
		g.MetaInChunk = true
		g.MetaModTime = picked[0].ModTime
	}
}

// ChunkRef is a listed chunk.
type ChunkRef struct {
	Start, End int64
	Size       int64 // stored size
	// ModTime is the listing's modification time, when listed: when the
	// chunk was written (by a compaction, for a merged chunk).
	ModTime time.Time
}

// StreamInventory is every generation of one stream, oldest first.
type StreamInventory struct {
	Stream      Stream
	Generations []*Generation
}

// Newest is the newest generation with metadata, or nil.
func (s *StreamInventory) Newest() *Generation {
	for i := len(s.Generations) - 1; i >= 0; i-- {
		if s.Generations[i].HasMeta {
			return s.Generations[i]
		}
	}
	return nil
}

// Find returns the named generation or nil.
func (s *StreamInventory) Find(name string) *Generation {
	for _, g := range s.Generations {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// Inventory lists one session's objects (all machines, or one when machine is
// not empty) with a single paged LIST. Keys that do not parse are reported
// as an error: a remote that holds them is damaged or hostile.
func (r *Repo) Inventory(ctx context.Context, sessionID, machine string) ([]*StreamInventory, error) {
	prefix := SessionPrefix(sessionID)
	if machine != "" {
		prefix += machine + "/"
	}
	b := newInventory()
	for obj, err := range r.client.List(ctx, prefix, remote.ListOptions{}) {
		if err != nil {
			return nil, fmt.Errorf("list session %s: %w", sessionID, err)
		}
		ref, err := ParseSessionKey(obj.Key)
		if err != nil {
			return nil, err
		}
		if ref.Stream.SessionID != sessionID {
			return nil, fmt.Errorf("key %q listed under session %s", obj.Key, sessionID)
		}
		if err := b.add(ref, obj); err != nil {
			return nil, err
		}
	}
	return b.sorted(), nil
}

// Cover picks the fewest chunks that cover [0, end) of a generation, from the
// start, greedily taking the chunk reaching furthest. Overlapping chunks (a
// range uploaded again after a crash, or a compacted one) are fine. It
// returns the covered length: less than the chunks' furthest end means a gap.
// One pass over the chunks by start (sorted first unless they are, as
// listings give them): a hostile listing of many chunks costs O(n log n).
func Cover(chunks []ChunkRef) (picked []ChunkRef, covered int64) {
	byStart := func(a, b ChunkRef) int { return cmp.Compare(a.Start, b.Start) }
	if !slices.IsSortedFunc(chunks, byStart) {
		chunks = slices.Clone(chunks)
		slices.SortStableFunc(chunks, byStart)
	}
	for i := 0; ; {
		best := -1
		// Every chunk that starts inside what is covered is a candidate;
		// those passed over earlier end before covered, as the last pick
		// reached furthest among them.
		for ; i < len(chunks) && chunks[i].Start <= covered; i++ {
			if chunks[i].End > covered && (best < 0 || chunks[i].End > chunks[best].End) {
				best = i
			}
		}
		if best < 0 {
			return picked, covered
		}
		picked = append(picked, chunks[best])
		covered = chunks[best].End
	}
}

// MaxEnd is the furthest end of any chunk.
func MaxEnd(chunks []ChunkRef) int64 {
	var m int64
	for _, c := range chunks {
		m = max(m, c.End)
	}
	return m
}
