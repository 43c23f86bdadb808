package restore

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ompsync/ompsync/atomicfile"
	"github.com/ompsync/ompsync/session"
	"github.com/ompsync/ompsync/store"
)

// outcome is what the merge rule decides for one file.
type outcome struct {
	action Action // Created, Appended, Retitled, Unchanged or Merged
	// body is the file's new content as write takes it (for every action
	// but Unchanged): a copy's verified temp file (or, for a small one,
	// its bytes in memory), the local file, or the merge's temp file, a
	// newer title slot laid over; for Appended, what follows the local
	// file's size is appended.
	body content
	// replace: the title slot changed too, so the file is rewritten whole
	// (to no fewer bytes) rather than appended to.
	replace bool
	// from are the copies the result came from (indexes into copies).
	from []int
	// apart, set only when the copies diverged and cannot be merged line
	// by line (an artifact that is not JSON Lines, a format without entry
	// ids), are the copies (indexes into copies) that went on apart from
	// the result: never empty then.
	apart []int
}

// format is how the merge rule reads one stream: st's session files (slotted)
// may differ in their title slot without having diverged, and the newer
// slot wins; JSON Lines (lines) are merged by st's entry ids when they
// diverged, if st has any.
type format struct {
	st      *store.Store
	slotted bool
	lines   bool
}

func (f format) slotLen(b []byte) int {
	if !f.slotted {
		return 0
	}
	return f.st.SlotLen(b)
}

// decide applies the merge rule, comparing the files a buffer at a time
// instead of holding them: the local file (nil for none)
// equal to a copy, behind one (the rest appended) or ahead of them all,
// one copy and no local file, or a format that cannot be merged line by
// line, cost a few buffers whatever their size. Copies that diverged are
// merged line by line (mergeLines) where the format can.
func (m *merger) decide(rel string, local *body, copies []body, f format) (outcome, error) {
	all, off := copies, 0 // all[i] is copies[i-off], all[0] the local file when off is 1
	if local != nil {
		all, off = append([]body{*local}, copies...), 1
	}
	// The copies no other extends (the first of equals; -1 the local
	// file), found longest first: a prefix of another copy is a prefix of
	// one of those found before it.
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return cmp.Compare(all[j].size, all[i].size) })
	var top []int
next:
	for _, i := range order {
		for _, j := range top {
			in, err := isPrefix(all[i], all[j+off], f)
			if err != nil {
				return outcome{}, fmt.Errorf("%s: %w", rel, err)
			}
			if in {
				continue next
			}
		}
		top = append(top, i-off)
	}
	slices.Sort(top)
	if len(top) > 1 {
		if mf, ok := f.st.MergeFormat(); ok && f.lines {
			return m.mergeLines(rel, local, copies, top, f, mf)
		}
		return divergedBody(local, copies, top), nil
	}
	k := top[0]
	if k < 0 {
		return keepLocalBody(*local, copies, f), nil
	}
	c := content{src: copies[k], slot: newerSlot(copies[k].head, local, copies, f)}
	if local == nil {
		return outcome{action: Created, body: c, from: []int{k}}, nil
	}
	// copies[k] extends the local file: they differ at most in the slot.
	n := f.slotLen(c.src.head)
	replace := n > 0 && !bytes.Equal(c.head()[:n], local.head[:n])
	return outcome{action: Appended, body: c, from: []int{k}, replace: replace}, nil
}

// divergedBody is diverged for copies read through: top are the copies no
// other extends (-1 the local file, first).
func divergedBody(local *body, copies []body, top []int) outcome {
	out := outcome{action: Unchanged}
	if local == nil {
		out = outcome{action: Created, body: content{src: copies[top[0]]}, from: []int{top[0]}}
	}
	for _, i := range top {
		if i >= 0 && (local != nil || i != top[0]) {
			out.apart = append(out.apart, i)
		}
	}
	return out
}

// keepLocalBody is keepLocal for a local file read through: unchanged, or
// retitled with another copy's newer title slot.
func keepLocalBody(local body, copies []body, f format) outcome {
	if s := newerSlot(local.head, &local, copies, f); s != nil {
		// from names the copy the title came from, for its mtime.
		out := outcome{action: Retitled, body: content{src: local, slot: s}, replace: true}
		for i, c := range copies {
			if bytes.HasPrefix(c.head, s) {
				out.from = []int{i}
				break
			}
		}
		return out
	}
	return outcome{action: Unchanged}
}

// newerSlot is the newest title slot of the local file's and the copies'
// when it is not the one head starts with and can take its place (nil
// otherwise, and for a format without slots), as withNewestSlot decides.
func newerSlot(head []byte, local *body, copies []body, f format) []byte {
	if !f.slotted {
		return nil
	}
	var heads [][]byte
	if local != nil {
		heads = append(heads, local.head)
	}
	for _, c := range copies {
		heads = append(heads, c.head)
	}
	s, n := f.st.NewestSlot(heads), f.slotLen(head)
	if s == nil || n == 0 || len(s) != n || bytes.Equal(s, head[:n]) {
		return nil
	}
	return append([]byte(nil), s...)
}

// mergeLines merges copies that diverged line by line (the merge rule of
// session.Format, or a copy that holds every line, a merge made
// elsewhere, adopted) without holding them: a first pass reads each copy
// once into an index of its lines (session.Index: tens of bytes a line,
// never the lines, within MaxMergeSize), a second reads each line back and
// writes the merge to a temp file in the agent dir, which write then
// renames into place; the local file is not touched until then. One
// session merges at a time. top are the copies no other extends (-1 the
// local file, first).
func (m *merger) mergeLines(rel string, local *body, copies []body, top []int, f format, mf session.Format) (outcome, error) {
	var srcs []session.Source
	var in []body
	var from []int
	if local != nil {
		in = append(in, *local) // first: its header and its bytes win
		srcs = append(srcs, session.Source{R: local.r, Size: local.size})
	}
	for _, i := range top {
		if i >= 0 {
			in = append(in, copies[i])
			srcs = append(srcs, session.Source{R: copies[i].r, Size: copies[i].size})
			from = append(from, i)
		}
	}
	m.mergeMu.Lock()
	defer m.mergeMu.Unlock()
	x, err := mf.NewIndex(m.MaxMergeSize, srcs...)
	var limit *session.IndexLimitError
	if errors.As(err, &limit) {
		return outcome{}, fmt.Errorf("%s: the copies went on apart, and merging them line by line takes an index of their lines: more than the %d MiB allowed (restore.max_merge_size) at line %d; raise it, or restore each machine's copy to another folder (restore --machine <name> --to <folder>)", rel, m.MaxMergeSize>>20, limit.Lines)
	}
	if err != nil {
		return outcome{}, fmt.Errorf("%s: %w", rel, mergeErr(err))
	}
	var out outcome
	adopted := false
	if local != nil && top[0] < 0 {
		// adoptComplete: a copy that holds every line any of them holds
		// (a merge made elsewhere) is taken as it is, the one with the
		// smallest hash when several do, as every machine chooses.
		best := -1
		var bestSum string
		for i, b := range in {
			if !x.Holds(i) {
				continue
			}
			sum, err := content{src: b}.sum(int64(f.slotLen(b.head)))
			if err != nil {
				return outcome{}, fmt.Errorf("%s: %w", rel, mergeErr(err))
			}
			if best < 0 || sum < bestSum {
				best, bestSum = i, sum
			}
		}
		switch {
		case best == 0:
			return keepLocalBody(*local, copies, f), nil
		case best > 0:
			c := content{src: in[best], slot: newerSlot(in[best].head, local, copies, f)}
			out, adopted = outcome{action: Merged, body: c, from: []int{from[best-1]}}, true
		}
	}
	if out.action == "" {
		b, err := m.writeMerge(x)
		if err != nil {
			return outcome{}, fmt.Errorf("%s: %w", rel, err)
		}
		out = outcome{action: Merged, body: content{src: b}, from: from}
	}
	// The index is done with (garbage from here): the checks below read
	// the files again.
	if local == nil {
		out.action = Created
		return out, nil
	}
	if err := keepsLocalBody(*local, out.body, f); err != nil {
		return outcome{}, fmt.Errorf("%s: refusing to write: %w (please report this)", rel, err)
	}
	if !adopted && out.body.size() == local.size {
		// Every local line and nothing more: the remote adds nothing, as
		// after an earlier merge, but perhaps a newer title.
		return keepLocalBody(*local, copies, f), nil
	}
	return out, nil
}

// writeMerge writes the merge x holds to a synced temp file in the agent
// dir (in a dry run, the system's temp folder), opened as a body; done
// removes it unless write took it.
func (m *merger) writeMerge(x *session.Index) (body, error) {
	dir := m.AgentDir
	if m.DryRun {
		dir = ""
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return body{}, err
	}
	var n int64
	tmp, err := atomicfile.Temp(dir, "session", func(w io.Writer) (err error) {
		n, err = x.WriteTo(onlyWriter{w})
		return err
	})
	if err != nil {
		// A full disk or an I/O error: nothing was written in place.
		return body{}, fmt.Errorf("writing the merge failed, the local file left as it was: %w", mergeErr(err))
	}
	m.undo = append(m.undo, func() { os.Remove(tmp) })
	b, err := m.openBody(tmp, n)
	b.file = tmp
	return b, err
}

// mergeErr says what a copy changing under the merge means.
func mergeErr(err error) error {
	if errors.Is(err, session.ErrSourceChanged) {
		return errors.New("a copy changed while merging; nothing written (run the restore again)")
	}
	return err
}

// keepsLocalBody is keepsLocal reading the files through: the new content
// holds every line the local file held (its title slot aside), and is no
// shorter. Lines are counted by their SHA-256, never held.
func keepsLocalBody(local body, c content, f format) error {
	if c.size() < local.size {
		return fmt.Errorf("would shrink the local file from %d to %d bytes", local.size, c.size())
	}
	sl, sd := f.slotLen(local.head), f.slotLen(c.head())
	if sd == sl {
		if same, err := sameBytes(local.r, c, int64(sl), local.size); err != nil || same {
			return err
		}
	}
	need := map[[sha256.Size]byte]int{}
	if err := eachLineSum(local.r, int64(sl), local.size, func(s [sha256.Size]byte) { need[s]++ }); err != nil {
		return err
	}
	if err := eachLineSum(c, int64(sd), c.size(), func(s [sha256.Size]byte) {
		if need[s] > 1 {
			need[s]--
		} else {
			delete(need, s)
		}
	}); err != nil {
		return err
	}
	if len(need) > 0 {
		return fmt.Errorf("would lose a local line")
	}
	return nil
}

// eachLineSum calls fn with the SHA-256 of each line of r's bytes [from,
// to), without its newline (the last may have none), as splitLines splits.
func eachLineSum(r io.ReaderAt, from, to int64, fn func([sha256.Size]byte)) error {
	br := bufio.NewReaderSize(io.NewSectionReader(r, from, to-from), compareBuf)
	h := sha256.New()
	var sum [sha256.Size]byte
	open := false // bytes of a line were hashed
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			h.Write(chunk[:len(chunk)-1])
			fn([sha256.Size]byte(h.Sum(sum[:0])))
			h.Reset()
			open = false
		} else if len(chunk) > 0 {
			h.Write(chunk)
			open = true
		}
		switch {
		case err == nil || errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			if open {
				fn([sha256.Size]byte(h.Sum(sum[:0])))
			}
			return nil
		default:
			return err
		}
	}
}

// openBody opens the file at p to read its first size bytes through; apply
// closes it when done.
func (m *merger) openBody(p string, size int64) (body, error) {
	f, err := os.Open(p)
	if err != nil {
		return body{}, err
	}
	m.undo = append(m.undo, func() { f.Close() })
	return fileBody(f, size)
}

// done closes what plan opened and removes the merges write did not take,
// the last first (a merge's file is closed before it is removed).
func (m *merger) done() {
	for _, u := range slices.Backward(m.undo) {
		u()
	}
	m.undo = nil
}

// merger decides by the merge rule and writes what it decided, as the
// run's options say (mergeMu, which Run and Cat set, lets one session at a
// time merge diverged copies line by line, within MaxMergeSize).
type merger struct {
	Options
	// undo closes the files plan opened and removes the merges written
	// (unless write took them), when apply ends.
	undo []func()
	// later, when set, takes over syncing and placing a new session file.
	later *later
	// live, when set, looks again whether the session became live since
	// it was fetched (and then records why in the result): right before
	// its files are written, since a merge of large diverged copies takes
	// a minute, long enough for omp to open the session.
	live func() bool
}

// fileWrite is one planned write.
type fileWrite struct {
	rel    string
	out    outcome
	local  body
	before fs.FileInfo // the local file as read; nil when there was none
	mtime  time.Time   // zero: leave as written
}

// apply merges a fetched session (its file at rel, which exists locally
// when hasLocal) and writes it: blobs first, then artifacts, then the session
// file, so that a session never appears before what it references.
func (m *merger) apply(f *fetched, rel string, hasLocal bool, res *Result) error {
	defer m.done()
	sw, err := m.plan(rel, hasLocal, f.session, format{m.Store, true, true})
	if err != nil {
		return err
	}
	res.Action = sw.out.action
	for _, i := range sw.out.from {
		res.Sources = append(res.Sources, Source{Machine: f.session[i].machine, Generation: f.session[i].generation})
	}
	beside, err := m.planBeside(f, rel, sw.out.apart, res)
	if err != nil {
		return err
	}
	arts, err := m.planArtifacts(f, rel, res)
	if err != nil {
		return err
	}
	if err := m.account(sw, rel, res); err != nil {
		return err
	}
	res.Artifacts = len(arts)
	res.Blobs = len(f.blobs)
	if m.DryRun {
		return nil
	}
	if res.Blobs, err = m.placeBlobs(f); err != nil {
		return err
	}
	if m.live != nil && m.live() {
		return nil // nothing of the session written; its blobs are content-named
	}
	for _, w := range append(arts, beside...) {
		if _, err := m.write(w, nil); err != nil {
			return err
		}
	}
	backup, err := m.write(sw, m.later)
	if err != nil {
		return err
	}
	res.Backup = backup
	return nil
}

// planBeside plans the copies the agent's format cannot merge (apart):
// each other machine's goes beside the session, under a name the agent
// does not take for one.
func (m *merger) planBeside(f *fetched, rel string, apart []int, res *Result) ([]fileWrite, error) {
	var beside []fileWrite
	for _, i := range apart {
		c := f.session[i]
		brel, ok := m.Store.Beside(rel, c.machine)
		if !ok {
			res.Missing = append(res.Missing, fmt.Sprintf("the copy of machine %s went on apart from this one and cannot be merged; kept on the remote (restore --machine %s --to another folder to read it)", c.machine, c.machine))
			continue
		}
		fi, err := os.Lstat(abs(m.AgentDir, brel))
		has := err == nil
		if has && !fi.Mode().IsRegular() {
			res.Missing = append(res.Missing, fmt.Sprintf("the copy of machine %s is not written beside: something else is at %s", c.machine, brel))
			continue
		}
		w, err := m.plan(brel, has, []copyData{c}, format{st: m.Store})
		if err != nil {
			return nil, err
		}
		res.Notes = append(res.Notes, fmt.Sprintf("the copy of machine %s went on apart from this one and %s lines carry no entry ids to merge by: it is at %s", c.machine, m.Store.Name(), brel))
		if w.out.action != Unchanged {
			beside = append(beside, w)
		}
	}
	return beside, nil
}

// planArtifacts plans the session's artifacts, by path.
func (m *merger) planArtifacts(f *fetched, rel string, res *Result) ([]fileWrite, error) {
	var arts []fileWrite
	for _, ar := range slices.Sorted(maps.Keys(f.artifacts)) {
		dst, ok := m.Store.ArtifactRel(rel, ar)
		if !ok {
			res.Missing = append(res.Missing, fmt.Sprintf("artifact %q: not a path %s uses", ar, m.Store.Name()))
			continue
		}
		fi, err := os.Lstat(abs(m.AgentDir, dst))
		has := err == nil
		if has && !fi.Mode().IsRegular() {
			res.Missing = append(res.Missing, fmt.Sprintf("artifact %s: something else is in its place (move it away and restore again)", dst))
			continue
		}
		w, err := m.plan(dst, has, f.artifacts[ar], format{m.Store, false, strings.HasSuffix(ar, ".jsonl")})
		if err != nil {
			return nil, err
		}
		if len(w.out.apart) > 0 {
			if has {
				res.Notes = append(res.Notes, fmt.Sprintf("artifact %s differs from the backup; the local file was kept", dst))
			} else {
				res.Notes = append(res.Notes, fmt.Sprintf("artifact %s differs between machines; restored the copy of %s", dst, f.artifacts[ar][w.out.from[0]].machine))
			}
		}
		if w.out.action != Unchanged {
			arts = append(arts, w)
		}
	}
	return arts, nil
}

// account records in res what writing the session file sw adds: its
// bytes, the span added (with m.HashWritten) and the backup a merge makes.
func (m *merger) account(sw fileWrite, rel string, res *Result) error {
	size := sw.out.body.size()
	switch sw.out.action {
	case Appended:
		res.Bytes = size - sw.local.size
	case Created, Merged:
		res.Bytes = size
	case Retitled:
		res.Bytes = int64(m.Store.SlotLen(sw.out.body.head()))
	}
	if m.HashWritten && !m.DryRun && (sw.out.action == Created || sw.out.action == Appended) {
		// What is added after the title slot, from what is written, not
		// from the file, which omp may change the moment it appears.
		start := int64(m.Store.SlotLen(sw.out.body.head()))
		if sw.out.action == Appended {
			start = max(start, sw.local.size)
		}
		if start < size {
			sum, err := sw.out.body.sum(start)
			if err != nil {
				return fmt.Errorf("read what is restored: %w", err)
			}
			res.Added = &Span{Start: start, End: size, SHA256: sum}
		}
	}
	if sw.out.action == Merged {
		res.Backup = m.backupName(rel)
	}
	return nil
}

// placeBlobs places the fetched blobs and their other names, in name
// order, and returns how many it wrote.
func (m *merger) placeBlobs(f *fetched) (int, error) {
	n := 0
	for _, name := range slices.Sorted(maps.Keys(f.blobs)) {
		wrote, err := placeBlob(m.AgentDir, name, f.blobs[name], m.blobMtimes[name])
		if err != nil {
			return n, err
		}
		if wrote {
			n++
		}
		for _, l := range f.blobLinks[name] {
			if err := writeBlobLink(m.AgentDir, l); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// plan reads the local file at rel (when has) and decides by the merge
// rule: a buffer at a time (decide) wherever one copy holds the others,
// line by line (mergeLines) when copies diverged, within MaxMergeSize.
func (m *merger) plan(rel string, has bool, copies []copyData, f format) (fileWrite, error) {
	w := fileWrite{rel: rel}
	var local *body
	if has {
		p := abs(m.AgentDir, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return w, fmt.Errorf("local file %s: %w", rel, err)
		}
		if !fi.Mode().IsRegular() {
			return w, fmt.Errorf("local file %s is not a regular file; not touching it", rel)
		}
		if w.local, err = m.openBody(p, fi.Size()); err != nil {
			return w, fmt.Errorf("read local file: %w", err)
		}
		local, w.before = &w.local, fi
	}
	bodies := make([]body, len(copies))
	for i, c := range copies {
		if c.file == "" {
			bodies[i] = memBody(c.data)
			continue
		}
		b, err := m.openBody(c.file, c.size)
		if err != nil {
			return w, fmt.Errorf("%s: %w", rel, err)
		}
		b.file = c.file
		bodies[i] = b
	}
	var err error
	if w.out, err = m.decide(rel, local, bodies, f); err != nil {
		return w, err
	}
	// The mtime the newest copy had when uploaded, so omp lists the
	// session where it was; never older than the local file's.
	for _, i := range w.out.from {
		if copies[i].mtime.After(w.mtime) {
			w.mtime = copies[i].mtime
		}
	}
	if has && !w.mtime.IsZero() && w.before.ModTime().After(w.mtime) {
		w.mtime = w.before.ModTime()
	}
	return w, nil
}

// backupName is the hidden name the pre-merge local file is kept under: omp
// lists only *.jsonl and the agent skips hidden files.
func (m *merger) backupName(rel string) string { return store.PreMergeName(rel, m.Now()) }

// write carries out one planned write and returns the backup it made. A
// file it creates is durable once its folder is synced: by write, or, when
// later is set, by Run, which later tells (and which then also syncs and
// links a new file held in memory). A local file behind the copy gets the
// rest appended; any other content is put in place whole (put).
func (m *merger) write(w fileWrite, later *later) (backup string, err error) {
	p := abs(m.AgentDir, w.rel)
	c := w.out.body
	switch {
	case w.out.action == Unchanged:
		return "", nil
	case w.out.action == Created:
		return "", create(p, c, w.mtime, later)
	case w.out.action == Appended && !w.out.replace:
		return "", appendFile(p, w.local.size, c.section(w.local.size), w.mtime)
	case w.out.action == Merged:
		if backup, err = m.keepBeside(w); err != nil {
			return "", fmt.Errorf("keep the pre-merge file: %w", err)
		}
	case w.out.action != Retitled && w.out.action != Appended:
		return "", fmt.Errorf("unknown action %q", w.out.action)
	}
	return backup, put(p, w.before, c, atomicfile.Options{Mtime: w.mtime})
}

// create writes c to a new file at p (mode 0600), its folder made; with
// later a copy held in memory is left to the placer to sync and link, and
// the folder to sync once.
func create(p string, c content, mtime time.Time, later *later) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("create folder: %w", err)
	}
	if later == nil {
		return put(p, nil, c, atomicfile.Options{Mtime: mtime})
	}
	if c.src.data != nil {
		f, err := writeUnsynced(p, c)
		if err != nil {
			return err
		}
		later.place(f, p, mtime)
	} else if err := put(p, nil, c, atomicfile.Options{Mtime: mtime, NoDirSync: true}); err != nil {
		return err
	}
	later.syncDir(filepath.Dir(p))
	return nil
}

// keepBeside keeps the local file as it was under its backup name, read
// through into a synced temp file beside it and linked to the first free
// name, its mtime kept.
func (m *merger) keepBeside(w fileWrite) (string, error) {
	p := abs(m.AgentDir, w.rel)
	tmp, err := tempOf(filepath.Dir(p), content{src: w.local})
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	opts := atomicfile.Options{Exclusive: true, Mtime: w.before.ModTime()}
	backup := m.backupName(w.rel)
	for i := 2; ; i++ {
		err := atomicfile.Install(tmp, abs(m.AgentDir, backup), opts)
		if !errors.Is(err, fs.ErrExist) || i > 100 {
			return backup, err
		}
		backup = fmt.Sprintf("%s-%d", m.backupName(w.rel), i)
	}
}

// tempOf returns a synced temp file holding c: a copy's verified temp file
// itself (its slot laid over in place), else a new one in dir.
func tempOf(dir string, c content) (string, error) {
	if tmp := c.src.file; tmp != "" {
		if c.slot == nil {
			return tmp, nil
		}
		f, err := os.OpenFile(tmp, os.O_WRONLY, 0)
		if err != nil {
			return "", err
		}
		_, err = f.WriteAt(c.slot, 0)
		return tmp, cmp.Or(err, syncClose(f))
	}
	return atomicfile.Temp(dir, "session", func(w io.Writer) error {
		_, err := io.CopyBuffer(onlyWriter{w}, c.section(0), make([]byte, compareBuf))
		return err
	})
}

// put makes c the file at p through a synced temp file (tempOf) that
// install puts in place: a new file when before is nil, else the
// replacement of the file read as before.
func put(p string, before fs.FileInfo, c content, opts atomicfile.Options) error {
	tmp, err := tempOf(filepath.Dir(p), c)
	if err != nil && before != nil {
		// A full disk or an I/O error: the file was never touched.
		return fmt.Errorf("replacing %s failed, file left as it was: %w", p, err)
	}
	if err != nil {
		return err
	}
	return install(tmp, p, before, opts)
}

// install makes the synced temp file tmp the file p as opts say (its
// mtime, NoDirSync when the caller syncs the folder), and removes tmp:
// with before nil a new file, linked (atomicfile.Install, Exclusive),
// which fails if anything appeared at p meanwhile: a restore never
// replaces a file it did not read; else the file read as before, renamed
// over once checked unchanged. Where tmp is in another folder and that
// fails (on another file system, a link or rename cannot reach p), tmp is
// copied beside p and put from there.
func install(tmp, p string, before fs.FileInfo, opts atomicfile.Options) error {
	defer os.Remove(tmp)
	if before != nil {
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if !os.SameFile(fi, before) || fi.Size() != before.Size() || !fi.ModTime().Equal(before.ModTime()) {
			return fmt.Errorf("%s changed while restoring; nothing written to it (run the restore again)", p)
		}
	}
	opts.Exclusive = before == nil
	err := atomicfile.Install(tmp, p, opts)
	if err != nil && !errors.Is(err, fs.ErrExist) && filepath.Dir(tmp) != filepath.Dir(p) {
		err = copyInstall(tmp, p, opts)
	}
	switch {
	case errors.Is(err, fs.ErrExist) && before == nil:
		return fmt.Errorf("%s appeared while restoring; not replacing it (run the restore again): %w", p, fs.ErrExist)
	case err != nil && before != nil:
		return fmt.Errorf("replace %s: %w", p, err)
	}
	return err
}

// copyInstall puts a copy of tmp at p as opts say.
func copyInstall(tmp, p string, opts atomicfile.Options) error {
	in, err := os.Open(tmp)
	if err != nil {
		return err
	}
	defer in.Close()
	return atomicfile.WriteFunc(p, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	}, opts)
}

// appendFile appends tail to the file at p, after checking that it still
// holds exactly size bytes, a buffer at a time; on any failure the file is
// cut back to its size and synced.
func appendFile(p string, size int64, tail io.Reader, mtime time.Time) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("open for append: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	if fi.Size() != size {
		f.Close()
		return fmt.Errorf("%s changed while restoring; nothing written to it (run the restore again)", p)
	}
	_, err = io.CopyBuffer(onlyWriter{f}, tail, make([]byte, compareBuf))
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		// A full disk or an I/O error must not leave a torn last line
		// that omp's next append would glue onto: back to what it was.
		undo := f.Truncate(size)
		if undo == nil {
			undo = f.Sync()
		}
		f.Close()
		if undo == nil {
			undo = os.Chtimes(p, fi.ModTime(), fi.ModTime())
		}
		if undo != nil {
			return fmt.Errorf("append to %s failed (%w), and cutting it back to its %d bytes failed too: %v", p, err, size, undo)
		}
		return fmt.Errorf("append to %s failed, file left as it was: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			return fmt.Errorf("set mtime: %w", err)
		}
	}
	return nil
}

// placeBlob links the verified blob in the temp file tmp into place as
// blobs/<name>, unless the agent dir has it, and removes tmp; it reports
// whether it wrote. Its mtime is set before the link: the blob's other
// names share its inode.
func placeBlob(agentDir, name, tmp string, mtime time.Time) (bool, error) {
	defer os.Remove(tmp)
	if hasBlob(agentDir, name) {
		return false, nil
	}
	p := abs(agentDir, store.BlobRel(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return false, fmt.Errorf("create blobs folder: %w", err)
	}
	err := install(tmp, p, nil, atomicfile.Options{Mtime: mtime})
	if errors.Is(err, fs.ErrExist) {
		return false, nil // another session's restore wrote it: same bytes
	}
	if err != nil {
		return false, fmt.Errorf("blob %s: %w", name, err)
	}
	return true, nil
}
