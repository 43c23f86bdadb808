package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// tailLen is how many bytes before the uploaded offset are re-hashed on every
// change to check that the uploaded prefix is still what the file holds.
const tailLen = 4096

// source is an open view of a file's bytes, n of them: a live file, or
// the content of an archived one inflated into a temp file (temp), which
// Close removes: memory stays a buffer whatever the session's size.
type source struct {
	*os.File
	n    int64
	temp string
}

func (s *source) size() int64 { return s.n }

// Close closes the file, and removes it if it is a temp file.
func (s *source) Close() error {
	err := s.File.Close()
	if s.temp == "" {
		return err
	}
	if rerr := os.Remove(s.temp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
		err = rerr
	}
	return err
}

// errFileChanged means a read returned fewer bytes than the stat promised,
// or the bytes before the uploaded offset changed while a chunk was read:
// the file changed under the agent, and nothing of that read is uploaded.
var errFileChanged = errors.New("the file changed while it was read")

// readFull fills b from src at off, or fails: a short read is the file
// shrinking under the agent (truncated between its stat and the read), and
// the bytes it did not return must never be uploaded as if they were NULs.
func readFull(src *source, b []byte, off int64) error {
	n, err := src.ReadAt(b, off)
	switch {
	case n == len(b):
		return nil
	case err == nil || errors.Is(err, io.EOF):
		return fmt.Errorf("%w: %d of %d bytes at offset %d", errFileChanged, n, len(b), off)
	}
	return err
}

// copyFull hashes (or copies) exactly n bytes of src from off into w.
func copyFull(w io.Writer, src *source, off, n int64) error {
	got, err := io.Copy(w, io.NewSectionReader(src, off, n))
	if err == nil && got != n {
		err = fmt.Errorf("%w: %d of %d bytes at offset %d", errFileChanged, got, n, off)
	}
	return err
}

// hashRange is the SHA-256 of src's bytes [from, to): its running state,
// marshalled (FileState.HashState), and its sum in hex.
func hashRange(src *source, from, to int64) (state []byte, sum string, err error) {
	h := sha256.New()
	if err := copyFull(h, src, from, to-from); err != nil {
		return nil, "", err
	}
	state, err = h.(encoding.BinaryMarshaler).MarshalBinary()
	return state, hex.EncodeToString(h.Sum(nil)), err
}

func hashHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// syncResult says what one stream's sync did, for logs and metrics.
type syncResult struct {
	objects int64
	changed bool // anything the catalog shows changed
}

// syncFile brings the remote copy of one live file up to date.
func (a *Agent) syncFile(ctx context.Context, fst *FileState, audit bool) (syncResult, error) {
	fi, err := os.Stat(a.abs(fst.Path))
	if err != nil {
		return syncResult{}, err
	}
	if !audit && fst.unchanged(fi) {
		return syncResult{}, nil // one stat
	}
	// What follows may change the stream's state; an unchanged file's,
	// left out, keeps the journal of a full pass to what it looked at.
	a.state.touch(fst)
	// A file that changed while it was read uploads nothing of that read;
	// the next look, at once, decides from what it holds then (usually a
	// new generation). One that keeps changing is left to the next pass.
	var res syncResult
	for try := 1; ; try++ {
		r, err := a.syncOpen(ctx, fst, audit)
		res.objects, res.changed = res.objects+r.objects, res.changed || r.changed
		if !errors.Is(err, errFileChanged) || try == 3 {
			return res, err
		}
		a.log.Debug("file changed while it was read; looking again", "path", fst.Path, "err", err)
	}
}

// unchanged reports whether fi is the stat f recorded once every settled
// byte of its file was up, under the path its meta names, and f waits for
// no match against the remote (Adopt): nothing to send.
func (f *FileState) unchanged(fi fs.FileInfo) bool {
	return f.Generation != "" && !f.Adopt && f.MetaPath == f.Path && fi.Size() == f.Size && fi.ModTime().UnixNano() == f.MtimeNs && inodeOf(fi) == f.Inode
}

// syncOpen is one look at a live file: open, stat, upload what is new.
func (a *Agent) syncOpen(ctx context.Context, fst *FileState, audit bool) (syncResult, error) {
	src, fi, err := a.openSource(fst.Path, false)
	if err != nil {
		return syncResult{}, err
	}
	defer src.Close()
	settleAll := fst.Stream != repo.SessionStream && !strings.HasSuffix(fst.Path, ".jsonl")
	return a.syncSource(ctx, fst, src, inodeOf(fi), fi.ModTime(), settleAll, audit)
}

// openSource opens the file at rel to upload from: the live file or, for
// an archived session (rel its archive), the archive inflated (bounded by
// maxArchive) into a temp file of the state dir, which Close removes. Its
// stat is the open descriptor's: a rename over the path while it is read
// leaves a consistent old file.
func (a *Agent) openSource(rel string, archived bool) (*source, fs.FileInfo, error) {
	if archived {
		tmp, err := a.tempDir()
		if err != nil {
			return nil, nil, err
		}
		return readArchiveFile(a.opts.Store, a.abs(rel), rel, maxArchive, tmp)
	}
	f, err := os.Open(a.abs(rel))
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return &source{File: f, n: fi.Size()}, fi, nil
}

// errPastLimit: a file is larger than restore takes. It stays so until
// someone acts, so it is reported as an unreadable path is, not every pass.
var errPastLimit = errors.New("more than restore takes")

// syncSource uploads what src holds beyond what the remote has, starting a
// new generation when bytes already uploaded have changed.
func (a *Agent) syncSource(ctx context.Context, fst *FileState, src *source, inode uint64, mtime time.Time, settleAll, audit bool) (syncResult, error) {
	var res syncResult
	if size := src.size(); size > repo.MaxStreamSize {
		// Restore takes no stream past the bound: bytes that go up past it
		// would be a backup it refuses, the whole session with them.
		return res, fmt.Errorf("%s is %d bytes, %w (a file: at most %d bytes); nothing more of it is backed up: add it to exclude, or move it out of the agent dir", fst.Path, size, errPastLimit, int64(repo.MaxStreamSize))
	}
	if fst.Adopt {
		// Rebuilt from the catalog, or not trusted: matched against the
		// remote before anything goes up.
		a.adoptSource(ctx, fst, src)
	} else if fst.stale && fst.Generation != "" {
		if err := a.checkStale(ctx, fst, src); err != nil {
			return res, err
		}
	}
	reason, err := a.whyNewGeneration(fst, src, inode, audit)
	if err != nil {
		return res, err
	}
	fst.rewound = false // one try: a failed put may have landed other bytes
	if reason != "" {
		if err := a.startGeneration(fst, src, reason); err != nil {
			return res, err
		}
		res.changed = true
	}
	if err := a.syncSlot(ctx, fst, src, &res); err != nil {
		return res, err
	}
	end, err := settledEnd(src, fst.Offset, settleAll)
	if err != nil {
		return res, fmt.Errorf("read %s: %w", fst.Path, err)
	}
	objs, err := a.uploadRange(ctx, fst, src, mtime, end, settleAll)
	res.objects += objs
	res.changed = res.changed || objs > 0
	if err != nil {
		return res, err
	}
	if fst.Offset > 0 && fst.MetaPath != fst.Path {
		// Moved since its meta was written: the meta, put once its new
		// bytes are up, names the path it has now.
		if err := a.putMeta(ctx, fst); err != nil {
			return res, err
		}
		res.objects++
		res.changed = true
	}
	if fst.Offset == end {
		// Everything settled is up: remember the stat so that an unchanged
		// file costs one stat next time.
		fst.Size, fst.MtimeNs, fst.Inode = src.size(), mtime.UnixNano(), inode
		fst.SyncedAt = a.now().UTC()
	} else {
		fst.Size = -1
	}
	fst.UploadedMtime = mtime.UTC()
	return res, nil
}

// whyNewGeneration says why src starts a new generation of fst, or ""
// when the bytes uploaded of it are still what it holds.
func (a *Agent) whyNewGeneration(fst *FileState, src *source, inode uint64, audit bool) (string, error) {
	size := src.size()
	switch {
	case fst.Generation == "":
		return "new", nil
	case size < fst.Offset:
		if inode == fst.Inode && fst.isSession() {
			// Cut short in place, which omp never does (its rewrites
			// replace the file): damage, or a user's edit. The old
			// generation is the only complete copy; retention keeps it.
			a.log.Warn("session file cut short below what was backed up: a new generation follows it; the complete copy stays on the remote",
				"path", fst.Path, "backed_up_bytes", fst.Offset, "bytes", size, "old_generation", fst.Generation,
				"to_get_it_back", "ompsync restore --generation "+fst.Generation+" "+fst.SessionID)
		}
		return "shrank", nil
	case fst.rewound:
		// Back at 0 in this generation, its bytes just proven (rewind):
		// its first chunk, lost or damaged, goes up again under it.
	case fst.Offset == 0:
		// Nothing of this generation is up: its first upload failed, or
		// the file has no whole line yet. It starts again from the file
		// as it is now, under a fresh name (a put that failed may still
		// have landed), which changes nothing backed up. startGeneration
		// keeps the reason the generation began for; this one only says
		// that it begins again.
		return "not uploaded yet", nil
	case inode != fst.Inode || audit:
		// Replaced by a rename, or a periodic audit: only a full re-hash
		// tells an extended copy from a rewrite.
		same, err := prefixMatches(src, fst)
		if err != nil || !same {
			return "rewritten", err
		}
		fst.Verified = time.Now().UTC()
	default:
		// Something is uploaded (Offset > 0) and the file holds it all
		// (size >= Offset): the bytes just before Offset tell cheaply.
		tail, err := tailHash(src, fst)
		same := tail == fst.TailHash
		if err == nil && same && size == fst.Offset && !slotChanged(src, fst) {
			// Written to (the stat changed) yet neither grown nor retitled:
			// only a full re-hash tells whether uploaded bytes changed.
			same, err = prefixMatches(src, fst)
		}
		if err != nil || !same {
			return "changed in place", err
		}
	}
	return "", nil
}

// syncSlot uploads the title slot when it changed: the slot may change in
// place, and travels as its own object.
func (a *Agent) syncSlot(ctx context.Context, fst *FileState, src *source, res *syncResult) error {
	if fst.HashFrom != repo.HeadSize || fst.Offset < repo.HeadSize {
		return nil
	}
	slot := make([]byte, repo.HeadSize)
	if err := readFull(src, slot, 0); err != nil {
		return fmt.Errorf("read title slot: %w", err)
	}
	h := hashHex(slot)
	if h == fst.SlotHash {
		return nil
	}
	if title, ok := a.opts.Store.SlotTitle(slot); !ok {
		// The slot is no longer a slot: treat as a rewrite.
		if err := a.startGeneration(fst, src, "title slot replaced"); err != nil {
			return err
		}
	} else {
		if err := a.repo.PutHead(ctx, fst.stream(a.opts.Machine), fst.Generation, slot); err != nil {
			return fmt.Errorf("upload title slot: %w", err)
		}
		res.objects++
		fst.SlotHash = h
		if title != "" { // an untitled slot keeps the first prompt as the title
			fst.Title = title
		}
		fst.HeadUnconfirmed = true
	}
	res.changed = true
	return nil
}

// settledEnd is where the uploadable bytes end: after the last newline of
// a session log (a partial last line may still be being written), or the
// whole file otherwise.
func settledEnd(src *source, from int64, settleAll bool) (int64, error) {
	size := src.size()
	if settleAll || size <= from {
		return size, nil
	}
	// Scan backwards for the last newline.
	buf := make([]byte, 64<<10)
	for end := size; end > from; {
		start := max(from, end-int64(len(buf)))
		b := buf[:end-start]
		if err := readFull(src, b, start); err != nil {
			return from, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return from, nil
}

// startGeneration resets fst to upload src from offset 0 as a new generation.
func (a *Agent) startGeneration(fst *FileState, src *source, reason string) error {
	head := make([]byte, min(src.size(), 64<<10))
	if err := readFull(src, head, 0); err != nil {
		return fmt.Errorf("read header: %w", err)
	}
	prev := fst.Generation
	unsent := fst.Offset == 0 && prev != ""
	if unsent {
		// prev never reached the remote: this one takes its place, and
		// its history (what it followed, and why).
		prev, reason = fst.PrevGeneration, fst.GenReason
	}
	fst.Generation = repo.NewGeneration(a.now().UnixNano())
	fst.Offset, fst.Confirmed = 0, 0
	fst.HashFrom = int64(a.opts.Store.SlotLen(head))
	fst.HashState = nil
	fst.TailHash = ""
	fst.SlotHash = ""
	fst.MetaPath = "" // written in the first chunk's header
	fst.MetaObject, fst.MetaUnconfirmed = false, false
	fst.Verified = time.Now().UTC()
	if fst.HashFrom > 0 {
		fst.SlotHash = hashHex(head[:fst.HashFrom])
	}
	if info, ok := a.opts.Store.Describe(head); ok {
		fst.Cwd, fst.Title = info.Cwd, info.Title
	}
	if prev != "" && !unsent {
		a.log.Info("file changed under the backup: starting a new generation; the old one stays on the remote",
			"path", fst.Path, "reason", reason, "old_generation", prev, "generation", fst.Generation)
	}
	fst.PrevGeneration, fst.GenReason = prev, reason
	fst.SmallChunks, fst.IdleCompacted = 0, false
	fst.HeadUnconfirmed = false
	return nil
}

// uploadRange uploads the settled bytes past fst.Offset, up to end, as chunks of at most
// ChunkSize (a single longer line makes one longer chunk); a range sync
// pulled from another machine goes up as a reference chunk to that
// machine's copy while the file still holds it (holdsPulled). An
// artifact's chunks carry mtime, the file's as stat saw it before the
// read: restore has no catalog entry to take it from. It returns the
// objects it put.
func (a *Agent) uploadRange(ctx context.Context, fst *FileState, src *source, mtime time.Time, end int64, settleAll bool) (objects int64, err error) {
	var fileMtime time.Time
	if !fst.isSession() {
		fileMtime = mtime.UTC()
	}
	if end <= fst.Offset {
		return 0, nil
	}
	h, err := fst.runningHash()
	if err != nil {
		return 0, err
	}
	// tail is the bytes before the offset as the checks found them, to
	// tell after each read that the chunk still follows them.
	tail, err := tailHash(src, fst)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", fst.Path, err)
	}
	for fst.Offset < end {
		if err := ctx.Err(); err != nil {
			return objects, err
		}
		start := fst.Offset
		pulled, next := fst.pulledAt(start)
		ref := false
		if pulled != nil && pulled.End <= end {
			if ref, err = holdsPulled(fst, src, pulled); err != nil {
				return objects, fmt.Errorf("read %s: %w", fst.Path, err)
			}
			if !ref {
				fst.dropPulled(start + 1)
			}
		}
		hdr := repo.ChunkHeader{Start: start, HashFrom: fst.HashFrom, Mtime: fileMtime}
		var data []byte
		if ref {
			hdr.End, hdr.SHA256 = pulled.End, pulled.SHA256
			hdr.Ref = &repo.ChunkSource{Machine: pulled.Machine, Generation: pulled.Generation}
			err = copyFull(h, src, start, pulled.End-start)
		} else {
			data, err = a.readChunk(fst, src, start, next, end, settleAll, tail)
			hdr.End, hdr.SHA256 = start+int64(len(data)), hashHex(data)
			if from := fst.HashFrom - start; err == nil && from < int64(len(data)) {
				h.Write(data[max(from, 0):])
			}
		}
		if err != nil {
			return objects, fmt.Errorf("read %s: %w", fst.Path, err)
		}
		hdr.StreamSHA256, hdr.Uploaded = hex.EncodeToString(h.Sum(nil)), repo.UploadMark(hdr.End, a.now())
		put, err := a.putChunk(ctx, fst, &hdr, data)
		objects += put
		if err != nil {
			return objects, err
		}
		if err := a.committed(fst, src, h, hdr.End); err != nil {
			return objects, err
		}
		if ref {
			fst.dropPulled(start + 1)
		}
		tail = fst.TailHash
	}
	return objects, nil
}

// holdsPulled reports whether src still holds exactly the bytes of p, a
// range sync pulled from another machine, past the title slot.
func holdsPulled(fst *FileState, src *source, p *PulledRange) (bool, error) {
	if p.Start < fst.HashFrom {
		return false, nil
	}
	_, sum, err := hashRange(src, p.Start, p.End)
	return err == nil && sum == p.SHA256, err
}

// readChunk reads the next chunk, from start: up to ChunkSize and next
// (where a pulled range begins), cut at a line boundary unless settleAll.
// It fails when the bytes before start are no longer tail, those uploaded.
func (a *Agent) readChunk(fst *FileState, src *source, start, next, end int64, settleAll bool, tail string) ([]byte, error) {
	stop := min(end, start+a.opts.ChunkSize)
	if next > start {
		stop = min(stop, next)
	}
	if a.beforeRead != nil {
		a.beforeRead(fst.Path)
	}
	data := make([]byte, stop-start)
	if err := readFull(src, data, start); err != nil {
		return nil, err
	}
	if stop < end && !settleAll {
		// Cut at a line boundary; a line longer than a chunk goes
		// whole, up to what a reader takes one chunk to hold.
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			data = data[:i+1]
		} else {
			more, err := readLine(src, stop, min(end, start+repo.MaxChunkSize))
			if err != nil {
				return nil, err
			}
			data = append(data, more...)
		}
	}
	// Bytes appended to what the remote holds must follow the bytes it
	// holds: a file rewritten in place while this chunk was read shows it
	// in the tail before start, read again after the chunk.
	now, err := tailHash(src, fst)
	if err == nil && now != tail {
		err = fmt.Errorf("%w: the bytes before offset %d are no longer those uploaded", errFileChanged, start)
	}
	return data, err
}

// putChunk puts one chunk (data nil: a reference chunk) and returns the
// objects it put. A chunk at offset 0 carries its generation's meta: the
// one PUT of a new session, its meta with it (docs/FORMAT.md, "Streams and
// generations"). A meta too large for the header goes first as its own
// object, so a listed chunk at 0 always has its meta.
func (a *Agent) putChunk(ctx context.Context, fst *FileState, hdr *repo.ChunkHeader, data []byte) (int64, error) {
	var put int64
	if hdr.Start == 0 {
		if m := a.meta(fst); repo.MetaFits(*hdr, m) {
			hdr.Meta = &m
		} else if err := a.putMeta(ctx, fst); err != nil {
			return 0, err
		} else {
			put++
		}
	}
	stored, err := a.repo.PutChunk(ctx, fst.stream(a.opts.Machine), fst.Generation, *hdr, data, remote.PutOptions{})
	if err != nil {
		return put, fmt.Errorf("upload %s [%d, %d): %w", fst.Path, hdr.Start, hdr.End, err)
	}
	if hdr.Meta != nil {
		fst.MetaPath = hdr.Meta.Path
	}
	a.metrics.uploaded(int64(stored), 1)
	return put + 1, nil
}

// committed records that the chunk ending at stop is on the remote.
func (a *Agent) committed(fst *FileState, src *source, h hash.Hash, stop int64) error {
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return err
	}
	fst.Offset, fst.HashState = stop, state
	fst.SmallChunks++
	fst.IdleCompacted = false
	th, err := tailHash(src, fst)
	if err != nil {
		return err
	}
	fst.TailHash = th
	return nil
}

// meta is the meta of fst's generation as it is now.
func (a *Agent) meta(fst *FileState) repo.Meta {
	return repo.Meta{
		SessionID: fst.SessionID, Machine: a.opts.Machine, Stream: fst.Stream,
		Generation: fst.Generation, Path: fst.Path, Cwd: fst.Cwd, HashFrom: fst.HashFrom,
		Created: a.now().UTC(), Previous: fst.PrevGeneration, Reason: fst.GenReason,
	}
}

func (a *Agent) putMeta(ctx context.Context, fst *FileState) error {
	m := a.meta(fst)
	if err := a.repo.PutMeta(ctx, fst.stream(a.opts.Machine), m); err != nil {
		return fmt.Errorf("upload meta of %s: %w", fst.Path, err)
	}
	// A put over an earlier meta object, if lost, leaves that one: only
	// reading it back tells.
	fst.MetaUnconfirmed = fst.MetaObject
	fst.MetaPath, fst.MetaObject = fst.Path, true
	return nil
}

// readLine reads from off up to and including the next newline before end.
func readLine(src *source, off, end int64) ([]byte, error) {
	var out []byte
	buf := make([]byte, 64<<10)
	for off < end {
		b := buf[:min(int64(len(buf)), end-off)]
		if err := readFull(src, b, off); err != nil {
			return nil, err
		}
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			return append(out, b[:i+1]...), nil
		}
		out = append(out, b...)
		off += int64(len(b))
	}
	return out, nil
}

// tailHash hashes the bytes just before fst.Offset (never the title slot).
func tailHash(src *source, fst *FileState) (string, error) {
	from := min(max(fst.HashFrom, fst.Offset-tailLen), fst.Offset)
	b := make([]byte, fst.Offset-from)
	if err := readFull(src, b, from); err != nil {
		return "", err
	}
	return hashHex(b), nil
}

// slotChanged reports whether the title slot differs from the one uploaded.
func slotChanged(src *source, fst *FileState) bool {
	if fst.HashFrom != repo.HeadSize {
		return false
	}
	slot := make([]byte, repo.HeadSize)
	if err := readFull(src, slot, 0); err != nil {
		return true
	}
	return hashHex(slot) != fst.SlotHash
}

// prefixMatches re-hashes [HashFrom, Offset) and compares it with the
// running hash of what was uploaded.
func prefixMatches(src *source, fst *FileState) (bool, error) {
	if fst.HashFrom > 0 {
		// The bytes before HashFrom must still be a title slot.
		slot := make([]byte, fst.HashFrom)
		if err := readFull(src, slot, 0); errors.Is(err, errFileChanged) {
			return false, nil // shorter than its slot now: rewritten
		} else if err != nil {
			return false, err
		}
		if !repo.ValidHead(slot) {
			return false, nil
		}
	}
	want, err := fst.runningHash()
	if err != nil {
		return false, err
	}
	_, sum, err := hashRange(src, fst.HashFrom, fst.Offset)
	if errors.Is(err, errFileChanged) {
		return false, nil // shorter than what was uploaded now: rewritten
	} else if err != nil {
		return false, err
	}
	return sum == hex.EncodeToString(want.Sum(nil)), nil
}

// relOf turns an absolute path under the agent dir into the slash form used
// in state and on the remote.
func (a *Agent) relOf(abs string) (string, bool) {
	rel, ok := strings.CutPrefix(abs, a.opts.AgentDir+string(os.PathSeparator))
	if !ok {
		return "", false
	}
	return path.Clean(strings.ReplaceAll(rel, string(os.PathSeparator), "/")), true
}
