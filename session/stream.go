package session

import (
	"bufio"
	"container/heap"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// Source is one copy of a session file as an Index reads it: the first
// Size bytes of R. R must not change while the Index is in use.
type Source struct {
	R    io.ReaderAt
	Size int64
}

// LineCost is what an Index charges its budget for each line it reads
// (every copy's, repeats too): its share of the graph, the key map and a
// copy's id map while that copy is read, with room above the 106-130
// bytes measured where a copy shares half its lines with another
// (TestIndexLineCost, BenchmarkRestoreMergeDiverged1GiB). A line whose
// entry another copy holds in other bytes is charged twice. Line bytes
// are never held but the one being read, which is charged too.
const LineCost = 192

// IndexLimitError is NewIndex's answer when the copies have more lines
// than its budget allows.
type IndexLimitError struct {
	Lines  int64 // lines read when the budget ran out
	Budget int64
}

func (e *IndexLimitError) Error() string {
	return fmt.Sprintf("merge index: more than the %d bytes allowed at line %d", e.Budget, e.Lines)
}

// ErrSourceChanged means a copy no longer holds the bytes it was indexed
// with.
var ErrSourceChanged = errors.New("a copy changed while it was merged")

// Index is the merge of copies (Merge's rule, with the same bytes out)
// read through once and kept as a graph of their lines without the lines'
// bytes: per line where it is (copy, offset, length), its time and a hash;
// entries and other lines are known by hashes of their keys and bytes
// (SHA-256, cut to 128 bits), not by the keys themselves. WriteTo then
// reads each line back to write the merge. Its memory is within LineCost
// a line, whatever the lines' sizes.
type Index struct {
	f      Format
	srcs   []Source
	nodes  []snode
	edges  []sedge
	copies []scopy
	// allowed is, per line's bytes (their hash) in a chain of nodes
	// whose copies disagree on bytes (disputed), the most times any copy
	// holds them; WriteTo counts it down.
	allowed map[sum128]int32
	// disputed maps each node of a disputed chain to the chain's first
	// node + 1 (0: none).
	disputed map[int32]int32
	union    int64 // how many lines the copies hold, as the most of each
	maxLine  int
	written  bool
}

type sum128 [16]byte

// skey is how a line is known: an entry by a hash of its id and
// timestamp, any other line by a hash of its bytes.
type skey struct {
	h    sum128
	kind byte // 'e' entry (the header too), 'o' other
}

// snode is one line of the merge: the first copy's bytes that made it.
type snode struct {
	off   int64
	sec   int64  // the line's timestamp: Unix seconds
	sum   sum128 // of its bytes, to see them read back unchanged
	n     uint32 // length, without the newline
	nsec  uint32 // and nanoseconds; entryBit set for an entry
	src   int32
	child int32 // first edge to a child in edges, -1 for none
	occ   int32 // the node of the next occurrence of the key, -1 for none
	// parents is, during WriteTo, the edges not yet satisfied.
	parents int32
}

const entryBit = 1 << 31

type sedge struct{ child, next int32 }

type scopy struct {
	slot   []byte
	lines  []int32 // nodes
	n      int64   // len(lines), kept once WriteTo drops them
	header int     // index in lines, or -1
}

// mismatch is a line of copy that a node of other bytes stands for: a
// chain (first) whose copies disagree on an entry's bytes.
type mismatch struct {
	copy, node, first int32
	sum               sum128
}

// occurrence is where the index stands on one key: its first node, and
// the node of the latest occurrence in copy.
type occurrence struct {
	first, cur, copy int32
}

// NewIndex reads every copy once and indexes it for a merge, within
// budget bytes (LineCost a line and the longest line); past the budget it
// stops with an *IndexLimitError. As Merge, it refuses only no copies.
func (f Format) NewIndex(budget int64, srcs ...Source) (*Index, error) {
	return f.newIndex(budget, nil, srcs...)
}

// newIndex is NewIndex calling read, when not nil, as each copy is read,
// before what only its reading holds is let go (TestIndexLineCost).
func (f Format) newIndex(budget int64, read func(), srcs ...Source) (*Index, error) {
	if len(srcs) == 0 {
		return nil, errors.New("merge: no copies")
	}
	x := &Index{f: f, srcs: srcs, copies: make([]scopy, len(srcs))}
	index := map[skey]occurrence{}
	var lines int64
	var buf []byte
	var mismatches []mismatch
	for ci, s := range srcs {
		if err := x.parse(ci, s, index, &lines, budget, &buf, read, &mismatches); err != nil {
			return nil, err
		}
	}
	x.allow(mismatches)
	return x, nil
}

// allow counts the lines Merge's allowed map would hold back. The nodes
// that carry the same bytes are all of one chain (the bytes make the
// key); where every line of a chain has its node's bytes, the copy that
// holds the chain's key most holds each of its nodes' bytes as often as
// the chain does, so none is held back, and the union counts each node
// once. Only chains where copies disagree on an entry's bytes (a rewrite:
// rare) are counted line by line, as Merge counts every line.
func (x *Index) allow(mismatches []mismatch) {
	x.disputed, x.allowed = map[int32]int32{}, map[sum128]int32{}
	for _, m := range mismatches {
		for n := m.first; n >= 0 && x.disputed[n] != m.first+1; n = x.nodes[n].occ {
			x.disputed[n] = m.first + 1 // +1: 0 is no chain
		}
	}
	x.union = int64(len(x.nodes) - len(x.disputed))
	if len(mismatches) == 0 {
		return
	}
	for ci, c := range x.copies {
		counts := map[sum128]int32{}
		for _, n := range c.lines {
			if x.disputed[n] != 0 {
				counts[x.nodes[n].sum]++
			}
		}
		for _, m := range mismatches {
			if m.copy == int32(ci) {
				counts[x.nodes[m.node].sum]--
				counts[m.sum]++
			}
		}
		for v, k := range counts {
			x.allowed[v] = max(x.allowed[v], k)
		}
	}
	for _, k := range x.allowed {
		x.union += int64(k)
	}
}

// Holds reports whether copy i holds every line some copy holds, as many
// times as the copy that holds it most (the other copies add nothing).
func (x *Index) Holds(i int) bool { return x.copies[i].n == x.union }

// parse indexes copy ci, as merger.parse does.
func (x *Index) parse(ci int, s Source, index map[skey]occurrence, read *int64, budget int64, buf *[]byte, hook func(), mismatches *[]mismatch) error {
	c := &x.copies[ci]
	c.header = -1
	head := make([]byte, min(s.Size, TitleSlotSize))
	if err := readFull(s.R, head, 0); err != nil {
		return err
	}
	var start int64
	if _, ok := ParseTitleSlot(head); ok && x.f.Slot {
		c.slot, start = head, TitleSlotSize
	}
	byID := map[sum128]int32{} // entry id -> node, first occurrence in this copy
	type pending struct {
		child  int32
		parent sum128
	}
	var links []pending
	r := bufio.NewReaderSize(io.NewSectionReader(s.R, start, s.Size-start), 64<<10)
	off := start
	for off < s.Size {
		*read++
		// A line a node of other bytes stands for costs another: what
		// allow counts of it (rare, but a copy may rewrite every line).
		room := budget - (*read+int64(len(*mismatches)))*LineCost // what the line may take
		if room < int64(x.maxLine) || len(x.nodes) >= 1<<31-1 {
			return &IndexLimitError{Lines: *read, Budget: budget}
		}
		raw, err := readLine(r, buf, int(min(room, 1<<32-1)))
		if errors.Is(err, errLineLimit) {
			return &IndexLimitError{Lines: *read, Budget: budget}
		}
		if err != nil {
			return err
		}
		x.maxLine = max(x.maxLine, len(raw))
		lineOff := off
		off += int64(len(raw)) + 1 // the last line may lack its newline: off passes Size
		sum := sha256.Sum256(raw)
		lsum := sum128(sum[:16])

		e, isEntry := x.f.Entry(raw)
		if c.header < 0 && isEntry && e.Type == "session" {
			c.header = len(c.lines)
		}
		entry := isEntry && e.ID != ""
		k := skey{h: lsum, kind: 'o'}
		if entry {
			k = skey{h: keyHash(e.ID, e.Timestamp), kind: 'e'}
		}
		n, first := x.occur(ci, index, k, func() int32 { return x.node(ci, lineOff, raw, lsum, e.Timestamp, entry) })
		if x.nodes[n].sum != lsum {
			*mismatches = append(*mismatches, mismatch{copy: int32(ci), node: n, first: first, sum: lsum})
		}
		c.lines = append(c.lines, n)
		if entry {
			id := idHash(e.ID)
			if _, seen := byID[id]; !seen {
				byID[id] = n
			}
			if e.ParentID != nil && *e.ParentID != "" {
				// A parent seen already is its first occurrence; others
				// resolve once the copy is read (ids are unique only
				// within a file). The order edges come in changes nothing.
				p := idHash(*e.ParentID)
				if parent, ok := byID[p]; ok {
					x.edge(parent, n)
				} else {
					links = append(links, pending{n, p})
				}
			}
		}
	}
	if hook != nil {
		hook()
	}
	for _, l := range links {
		if parent, ok := byID[l.parent]; ok {
			x.edge(parent, l.child)
		}
	}
	c.n = int64(len(c.lines))
	return nil
}

// occur is the node copy ci's next line of key k stands for, made by
// mk when it is new, and the key's first node. The j-th time a copy holds
// a key is the key's j-th node: the nodes of one key are chained in the
// order they were made.
func (x *Index) occur(ci int, index map[skey]occurrence, k skey, mk func() int32) (int32, int32) {
	var n int32
	o, ok := index[k]
	switch {
	case !ok:
		n = mk()
		o = occurrence{first: n, cur: n, copy: int32(ci)}
	case o.copy != int32(ci):
		n = o.first
		o.cur, o.copy = n, int32(ci)
	default:
		n = x.nodes[o.cur].occ
		if n < 0 {
			n = mk()
			x.nodes[o.cur].occ = n
		}
		o.cur = n
	}
	index[k] = o
	return n, o.first
}

func (x *Index) node(ci int, off int64, raw []byte, sum sum128, ts string, entry bool) int32 {
	t := ParseTime(ts)
	nd := snode{off: off, sec: t.Unix(), nsec: uint32(t.Nanosecond()), sum: sum, n: uint32(len(raw)), src: int32(ci), child: -1, occ: -1}
	if entry {
		nd.nsec |= entryBit
	}
	x.nodes = append(x.nodes, nd)
	return int32(len(x.nodes) - 1)
}

func (x *Index) edge(parent, child int32) {
	if parent == child {
		return
	}
	// Merge keeps each edge once; a repeat here counts twice in parents
	// and is satisfied twice by the same parent, which orders alike.
	x.edges = append(x.edges, sedge{child: child, next: x.nodes[parent].child})
	x.nodes[parent].child = int32(len(x.edges) - 1)
}

// keyHash is the hash an entry is known by: its id and timestamp, each
// length-prefixed so that no two pairs share their bytes.
func keyHash(id, ts string) sum128 {
	var buf [128]byte // on the stack for the ids and times agents write
	k := binary.AppendUvarint(buf[:0], uint64(len(id)))
	k = append(append(k, id...), ts...)
	sum := sha256.Sum256(k)
	return sum128(sum[:16])
}

func idHash(id string) sum128 {
	sum := sha256.Sum256([]byte(id))
	return sum128(sum[:16])
}

var errLineLimit = errors.New("line too long")

// readLine reads the next line without its newline (the last one may have
// none) into buf, grown to the longest line but never past limit bytes.
func readLine(r *bufio.Reader, buf *[]byte, limit int) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	*buf = append((*buf)[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) && len(*buf) <= limit+1 {
		line, err = r.ReadSlice('\n')
		*buf = append(*buf, line...)
	}
	switch {
	case len(*buf) > limit+1 || len(*buf) == limit+1 && (*buf)[limit] != '\n':
		return nil, errLineLimit
	case err == nil:
		return (*buf)[:len(*buf)-1], nil
	case errors.Is(err, io.EOF) && len(*buf) > 0:
		return *buf, nil
	case errors.Is(err, io.EOF):
		return nil, ErrSourceChanged // shorter than its size
	}
	return nil, err
}

func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return ErrSourceChanged
	}
	return err
}

// time is the line's timestamp: the same instant as ParseTime's, the zero
// time's too, which is all blockOrder compares.
func (t *snode) time() time.Time {
	return time.Unix(t.sec, int64(t.nsec&^entryBit))
}

// WriteTo writes the merge to w, the bytes Merge gives for the same
// copies, reading each line back from its copy; it can be called once.
func (x *Index) WriteTo(w io.Writer) (int64, error) {
	if x.written {
		return 0, errors.New("merge index written already")
	}
	x.written = true
	slots := make([][]byte, len(x.copies)) // nil for a copy without one
	for i, c := range x.copies {
		slots[i] = c.slot
	}
	slot := NewestSlot(slots)
	order := x.blockOrder()

	// The preferred sequence: the header, then each copy's lines that are
	// not placed yet, copies in block order.
	seq := make([]int32, 0, len(x.nodes))
	placed := make([]bool, len(x.nodes))
	place := func(n int32) {
		if !placed[n] {
			placed[n] = true
			seq = append(seq, n)
		}
	}
	for _, c := range x.copies {
		if c.header >= 0 {
			place(c.lines[c.header])
			break
		}
	}
	for _, ci := range order {
		for _, n := range x.copies[ci].lines {
			place(n)
		}
	}
	placed = nil
	for i := range x.copies {
		x.copies[i].lines = nil
	}
	return x.emit(w, seq, slot)
}

// blockOrder is blockOrder's order of the copies.
func (x *Index) blockOrder() []int {
	held := make([]int32, len(x.nodes))
	seen := make([]int32, len(x.nodes)) // the last copy (+1) that held it
	for ci, c := range x.copies {
		for _, n := range c.lines {
			if seen[n] != int32(ci)+1 {
				seen[n] = int32(ci) + 1
				held[n]++
			}
		}
	}
	type times struct{ entry, any time.Time }
	newest := make([]times, len(x.copies))
	order := make([]int, len(x.copies))
	for i, c := range x.copies {
		order[i] = i
		for _, n := range c.lines {
			if held[n] == int32(len(x.copies)) {
				continue
			}
			nd := &x.nodes[n]
			ts := nd.time()
			if nd.nsec&entryBit != 0 && ts.After(newest[i].entry) {
				newest[i].entry = ts
			}
			if ts.After(newest[i].any) {
				newest[i].any = ts
			}
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := newest[a].entry.Compare(newest[b].entry); c != 0 {
			return c
		}
		return newest[a].any.Compare(newest[b].any)
	})
	return order
}

// emit is merger.emit, reading each line back from its copy.
func (x *Index) emit(w io.Writer, seq []int32, slot []byte) (int64, error) {
	rank := make([]int32, len(x.nodes))
	for i, n := range seq {
		rank[n] = int32(i)
	}
	for _, e := range x.edges {
		x.nodes[e.child].parents++
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	written := int64(len(slot))
	if _, err := bw.Write(slot); err != nil {
		return 0, err
	}
	line := make([]byte, x.maxLine+1)
	done := make([]bool, len(x.nodes))
	ready := &rankHeap32{rank: rank}
	for _, n := range seq {
		if x.nodes[n].parents == 0 {
			heap.Push(ready, n)
		}
	}
	next := 0 // the earliest node in seq that may not be done, for cycles
	for emitted := 0; emitted < len(seq); {
		var n int32
		if ready.Len() > 0 {
			n = heap.Pop(ready).(int32)
			if done[n] {
				continue
			}
		} else {
			for done[seq[next]] {
				next++
			}
			n = seq[next]
		}
		done[n] = true
		emitted++
		nd := &x.nodes[n]
		raw := line[:nd.n]
		if err := readFull(x.srcs[nd.src].R, raw, nd.off); err != nil {
			return written, err
		}
		if sum := sha256.Sum256(raw); sum128(sum[:16]) != nd.sum {
			return written, ErrSourceChanged
		}
		// When copies disagree on an entry's bytes the first copy's win,
		// which can make two nodes carry the same bytes; never write a
		// line more often than some copy holds it.
		write := true
		if x.disputed[n] != 0 {
			write = x.allowed[nd.sum] > 0
			x.allowed[nd.sum]--
		}
		if write {
			raw = append(raw, '\n') // line has room for it
			if _, err := bw.Write(raw); err != nil {
				return written, err
			}
			written += int64(len(raw))
		}
		for e := nd.child; e >= 0; e = x.edges[e].next {
			c := x.edges[e].child
			x.nodes[c].parents--
			if x.nodes[c].parents == 0 && !done[c] {
				heap.Push(ready, c)
			}
		}
	}
	return written, bw.Flush()
}

type rankHeap32 struct {
	items []int32
	rank  []int32
}

func (h *rankHeap32) Len() int           { return len(h.items) }
func (h *rankHeap32) Less(i, j int) bool { return h.rank[h.items[i]] < h.rank[h.items[j]] }
func (h *rankHeap32) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *rankHeap32) Push(x any)         { h.items = append(h.items, x.(int32)) }
func (h *rankHeap32) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
