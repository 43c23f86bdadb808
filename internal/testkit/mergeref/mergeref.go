// Package mergeref is the reference merge: the merge rule of
// session.Format in memory, written for clarity rather than bounds. Tests
// hold the streamed merge every product path takes (MergeTo: an
// session.Index written out) to its bytes. Nothing but tests imports it.
package mergeref

import (
	"bytes"
	"container/heap"
	"crypto/sha256"
	"errors"
	"io"
	"slices"
	"time"

	"github.com/ompsync/ompsync/session"
)

func OMP(copies ...[]byte) ([]byte, error) { return Merge(session.OMPFormat(), copies...) }

// Merge is the merge rule with f's entries.
func Merge(f session.Format, copies ...[]byte) ([]byte, error) {
	if len(copies) == 0 {
		return nil, errors.New("merge: no copies")
	}
	m := merger{index: map[lineKey]int{}, allowed: map[string]int{}, f: f}
	parsed := make([]parsedCopy, len(copies))
	for i, c := range copies {
		parsed[i] = m.parse(c)
		counts := map[string]int{}
		body := c[m.slotLen(c):]
		if len(body) == 0 {
			continue
		}
		for _, l := range bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n")) {
			counts[string(l)]++
		}
		for l, n := range counts {
			m.allowed[l] = max(m.allowed[l], n)
		}
	}
	slot := newestSlot(parsed)
	order := blockOrder(parsed, len(m.nodes))

	// The preferred sequence: the header, then each copy's lines that are
	// not placed yet, copies in block order.
	seq := make([]int, 0, len(m.nodes))
	placed := make([]bool, len(m.nodes))
	place := func(n int) {
		if !placed[n] {
			placed[n] = true
			seq = append(seq, n)
		}
	}
	for _, p := range parsed {
		if p.header >= 0 {
			place(p.lines[p.header].node)
			break
		}
	}
	for _, ci := range order {
		for _, l := range parsed[ci].lines {
			place(l.node)
		}
	}
	out := m.emit(seq, slot)
	return out, nil
}

// lineKey identifies a line across copies: an entry by id and timestamp, any
// other line by its hash. occ counts repeats within one copy.
type lineKey struct {
	kind byte // 'e' entry (the header too), 'o' other
	id   string
	ts   string
	sum  [sha256.Size]byte
	occ  int
}

type node struct {
	raw      []byte
	children []int
	parents  int // edges not yet satisfied, during emit
}

type line struct {
	node  int
	ts    time.Time // zero when absent or unparsable
	entry bool      // has an id
}

type parsedCopy struct {
	slot     []byte
	slotTime time.Time
	lines    []line
	header   int // index in lines, or -1
}

type merger struct {
	nodes []node
	index map[lineKey]int
	edges map[[2]int]bool
	// allowed is, per line's bytes, the most times any copy holds it.
	allowed map[string]int
	f       session.Format
}

func (m *merger) slotLen(b []byte) int {
	if !m.f.Slot {
		return 0
	}
	return session.SlotLen(b)
}

func (m *merger) node(k lineKey, raw []byte) int {
	if n, ok := m.index[k]; ok {
		return n
	}
	m.nodes = append(m.nodes, node{raw: raw})
	m.index[k] = len(m.nodes) - 1
	return len(m.nodes) - 1
}

func (m *merger) edge(parent, child int) {
	if parent == child {
		return
	}
	if m.edges == nil {
		m.edges = map[[2]int]bool{}
	}
	e := [2]int{parent, child}
	if m.edges[e] {
		return
	}
	m.edges[e] = true
	m.nodes[parent].children = append(m.nodes[parent].children, child)
}

func (m *merger) parse(b []byte) parsedCopy {
	p := parsedCopy{header: -1}
	if ts, ok := session.ParseTitleSlot(b); ok && m.f.Slot {
		p.slot = b[:session.TitleSlotSize]
		p.slotTime = parseTime(ts.UpdatedAt)
		b = b[session.TitleSlotSize:]
	}
	occ := map[lineKey]int{}
	byID := map[string]int{} // entry id -> node, first occurrence in this copy
	type pending struct {
		child  int
		parent string
	}
	var links []pending
	for len(b) > 0 {
		var raw []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			raw, b = b[:i], b[i+1:]
		} else {
			raw, b = b, nil
		}
		e, isEntry := m.f.Entry(raw)
		var k lineKey
		if p.header < 0 && isEntry && e.Type == "session" {
			p.header = len(p.lines)
		}
		switch {
		case isEntry && e.ID != "":
			k = lineKey{kind: 'e', id: e.ID, ts: e.Timestamp}
		default:
			k = lineKey{kind: 'o', sum: sha256.Sum256(raw)}
		}
		base := k
		k.occ = occ[base]
		occ[base]++
		n := m.node(k, raw)
		p.lines = append(p.lines, line{node: n, ts: parseTime(e.Timestamp), entry: isEntry && e.ID != ""})
		if isEntry && e.ID != "" {
			if _, seen := byID[e.ID]; !seen {
				byID[e.ID] = n
			}
			if e.ParentID != nil && *e.ParentID != "" {
				links = append(links, pending{n, *e.ParentID})
			}
		}
	}
	// Parents resolve within the copy: ids are only unique within a file.
	for _, l := range links {
		if parent, ok := byID[l.parent]; ok {
			m.edge(parent, l.child)
		}
	}
	return p
}

// newestSlot picks the title slot with the newest updatedAt.
func newestSlot(parsed []parsedCopy) []byte {
	var slots [][]byte
	for _, p := range parsed {
		if p.slot != nil {
			slots = append(slots, p.slot)
		}
	}
	return session.NewestSlot(slots)
}

// blockOrder sorts copies by the time of their newest entry that not every
// copy holds (their own work), oldest first, so the copy with the newest
// entry comes last and its last entry becomes omp's leaf. Lines without an
// id (legacy files) order copies only when their entries tie. Ties keep the
// given order.
func blockOrder(parsed []parsedCopy, nodes int) []int {
	held := make([]int, nodes)
	for _, p := range parsed {
		seen := map[int]bool{}
		for _, l := range p.lines {
			if !seen[l.node] {
				seen[l.node] = true
				held[l.node]++
			}
		}
	}
	type times struct{ entry, any time.Time }
	newest := make([]times, len(parsed))
	order := make([]int, len(parsed))
	for i, p := range parsed {
		order[i] = i
		for _, l := range p.lines {
			if held[l.node] == len(parsed) {
				continue
			}
			if l.entry && l.ts.After(newest[i].entry) {
				newest[i].entry = l.ts
			}
			if l.ts.After(newest[i].any) {
				newest[i].any = l.ts
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

// emit writes the nodes in seq order, moving an entry only as far as needed
// to follow its parent. A parent cycle (only a damaged file has one) is cut
// at its earliest line, so every line is still written once.
func (m *merger) emit(seq []int, slot []byte) []byte {
	rank := make([]int, len(m.nodes))
	size := len(slot)
	for i, n := range seq {
		rank[n] = i
		size += len(m.nodes[n].raw) + 1
	}
	for _, n := range m.nodes {
		for _, c := range n.children {
			m.nodes[c].parents++
		}
	}
	out := make([]byte, 0, size)
	out = append(out, slot...)
	done := make([]bool, len(m.nodes))
	ready := &rankHeap{rank: rank}
	for _, n := range seq {
		if m.nodes[n].parents == 0 {
			heap.Push(ready, n)
		}
	}
	next := 0 // the earliest node in seq that may not be done, for cycles
	for emitted := 0; emitted < len(seq); {
		var n int
		if ready.Len() > 0 {
			n = heap.Pop(ready).(int)
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
		// When copies disagree on an entry's bytes the first copy's win,
		// which can make two nodes carry the same bytes; never write a
		// line more often than some copy holds it.
		if key := string(m.nodes[n].raw); m.allowed[key] > 0 {
			m.allowed[key]--
			out = append(out, m.nodes[n].raw...)
			out = append(out, '\n')
		}
		for _, c := range m.nodes[n].children {
			m.nodes[c].parents--
			if m.nodes[c].parents == 0 && !done[c] {
				heap.Push(ready, c)
			}
		}
	}
	return out
}

type rankHeap struct {
	items []int
	rank  []int
}

func (h *rankHeap) Len() int           { return len(h.items) }
func (h *rankHeap) Less(i, j int) bool { return h.rank[h.items[i]] < h.rank[h.items[j]] }
func (h *rankHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *rankHeap) Push(x any)         { h.items = append(h.items, x.(int)) }
func (h *rankHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// ByteSources are copies in memory as Sources.
func ByteSources(copies ...[]byte) []session.Source {
	srcs := make([]session.Source, len(copies))
	for i, c := range copies {
		srcs[i] = session.Source{R: bytes.NewReader(c), Size: int64(len(c))}
	}
	return srcs
}

// MergeTo writes the merge of the copies to w (the rule on f), through a
// session.Index within budget, as every product merge does, and returns the
// bytes written.
func MergeTo(f session.Format, w io.Writer, budget int64, srcs ...session.Source) (int64, error) {
	x, err := f.NewIndex(budget, srcs...)
	if err != nil {
		return 0, err
	}
	return x.WriteTo(w)
}
