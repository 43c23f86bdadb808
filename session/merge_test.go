package session_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/mergeref"
	"github.com/ompsync/ompsync/session"
)

// makeSlot builds a 256-byte title slot as omp writes it.
func makeSlot(t testing.TB, title string, at time.Time) []byte {
	t.Helper()
	head, _ := json.Marshal(struct {
		Type      string `json:"type"`
		V         int    `json:"v"`
		Title     string `json:"title"`
		UpdatedAt string `json:"updatedAt"`
	}{"title", 1, title, at.UTC().Format("2006-01-02T15:04:05.000Z")})
	pad := session.TitleSlotSize - 1 - len(head) - len(`,"pad":""`)
	if pad < 0 {
		t.Fatalf("title %q too long for a slot", title)
	}
	s := string(head[:len(head)-1]) + `,"pad":"` + strings.Repeat(" ", pad) + `"}` + "\n"
	if len(s) != session.TitleSlotSize {
		t.Fatalf("slot is %d bytes", len(s))
	}
	return []byte(s)
}

func ts(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func entryLine(id, parent string, at time.Time, text string) string {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	return fmt.Sprintf(`{"type":"message","id":"%s","parentId":%s,"timestamp":"%s","message":{"role":"user","content":[{"type":"text","text":%q}]}}`, id, p, ts(at), text)
}

// splitOut separates a merged file into its slot and lines.
func splitOut(t testing.TB, b []byte) ([]byte, []string) {
	t.Helper()
	var slot []byte
	if _, ok := session.ParseTitleSlot(b); ok {
		slot, b = b[:session.TitleSlotSize], b[session.TitleSlotSize:]
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("merged output does not end with a newline")
	}
	if len(b) == 0 {
		return slot, nil
	}
	return slot, strings.Split(string(b[:len(b)-1]), "\n")
}

func copyLines(b []byte) []string {
	if _, ok := session.ParseTitleSlot(b); ok {
		b = b[session.TitleSlotSize:]
	}
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

var t0 = time.Date(2026, 10, 7, 0, 45, 40, 0, time.UTC)

func TestMergeTwoBranches(t *testing.T) {
	slotOld := makeSlot(t, "", t0)
	slotNew := makeSlot(t, "Fix the login bug", t0.Add(3*time.Minute))
	header := `{"type":"session","version":3,"id":"01a113d2-be76-73c7-986b-d3ac6e3fbb83","timestamp":"2026-10-07T00:45:40.000Z","cwd":"/home/u/w"}`
	e1 := entryLine("aaaa0001", "", t0.Add(time.Second), "hello")
	e2 := entryLine("aaaa0002", "aaaa0001", t0.Add(2*time.Second), "shared")
	l1 := entryLine("bbbb0001", "aaaa0002", t0.Add(time.Minute), "laptop work")
	d1 := entryLine("cccc0001", "aaaa0002", t0.Add(2*time.Minute), "desktop work")
	d2 := `{"type":"title_change","id":"cccc0002","parentId":"cccc0001","timestamp":"` + ts(t0.Add(3*time.Minute)) + `","title":"Fix the login bug"}`
	local := string(slotOld) + strings.Join([]string{header, e1, e2, l1}, "\n") + "\n"
	remote := string(slotNew) + strings.Join([]string{header, e1, e2, d1, d2}, "\n") + "\n"

	got, err := mergeref.OMP([]byte(local), []byte(remote))
	if err != nil {
		t.Fatal(err)
	}
	want := string(slotNew) + strings.Join([]string{header, e1, e2, l1, d1, d2}, "\n") + "\n"
	if string(got) != want {
		t.Fatalf("merge:\n%s\nwant:\n%s", got, want)
	}
	// The order of the arguments changes only which copy gives the header.
	got2, _ := mergeref.OMP([]byte(remote), []byte(local))
	if string(got2) != want {
		t.Fatalf("merge (remote first):\n%s\nwant:\n%s", got2, want)
	}
}

func TestMergeKeepsOddLines(t *testing.T) {
	header := `{"type":"session","version":3,"id":"s","timestamp":"2026-10-07T00:45:40.000Z","cwd":"/w"}`
	e1 := entryLine("aaaa0001", "", t0.Add(time.Second), "one")
	a := header + "\n" + e1 + "\nnot json\n" + entryLine("aaaa0002", "aaaa0001", t0.Add(2*time.Second), "a") + "\n{\"type\":\"message\",\"id\":\"half"
	b := header + "\n" + e1 + "\nnot json\nnot json\n" + entryLine("bbbb0002", "aaaa0001", t0.Add(3*time.Second), "b") + "\n"
	got, err := mergeref.OMP([]byte(a), []byte(b))
	if err != nil {
		t.Fatal(err)
	}
	_, lines := splitOut(t, got)
	count := map[string]int{}
	for _, l := range lines {
		count[l]++
	}
	// "not json" appears twice in b, so twice in the merge; the cut-off line
	// is kept and now ends with a newline.
	if count["not json"] != 2 || count[`{"type":"message","id":"half`] != 1 || len(lines) != 7 {
		t.Fatalf("merged lines: %q", lines)
	}
	if lines[len(lines)-1] != entryLine("bbbb0002", "aaaa0001", t0.Add(3*time.Second), "b") {
		t.Fatalf("last line is not the newest entry: %q", lines[len(lines)-1])
	}
}

func TestMergeSameIDOtherTime(t *testing.T) {
	// Two branches that drew the same 8-hex id are different entries.
	header := `{"type":"session","version":3,"id":"s","timestamp":"2026-10-07T00:45:40.000Z","cwd":"/w"}`
	e1 := entryLine("aaaa0001", "", t0, "one")
	a := entryLine("deadbeef", "aaaa0001", t0.Add(time.Minute), "laptop")
	b := entryLine("deadbeef", "aaaa0001", t0.Add(2*time.Minute), "desktop")
	got, _ := mergeref.OMP([]byte(header+"\n"+e1+"\n"+a+"\n"), []byte(header+"\n"+e1+"\n"+b+"\n"))
	if _, lines := splitOut(t, got); len(lines) != 4 {
		t.Fatalf("merged %d lines, want 4: %q", len(lines), lines)
	}
}

func TestMergeRewrittenEntryKeepsFirstCopy(t *testing.T) {
	header := `{"type":"session","version":3,"id":"s","timestamp":"2026-10-07T00:45:40.000Z","cwd":"/w"}`
	long := entryLine("aaaa0001", "", t0, strings.Repeat("tool output ", 20))
	pruned := entryLine("aaaa0001", "", t0, "[pruned]")
	got, _ := mergeref.OMP([]byte(header+"\n"+long+"\n"), []byte(header+"\n"+pruned+"\n"))
	if string(got) != header+"\n"+long+"\n" {
		t.Fatalf("merge kept %q", got)
	}
}

func TestMergeChildBeforeParent(t *testing.T) {
	// A damaged copy lists a child first, and another holds a parent cycle:
	// every line still comes out once, parents first where possible.
	c := entryLine("cccc0001", "pppp0001", t0.Add(time.Second), "child")
	p := entryLine("pppp0001", "", t0, "parent")
	x := entryLine("xxxx0001", "yyyy0001", t0, "x")
	y := entryLine("yyyy0001", "xxxx0001", t0, "y")
	got, _ := mergeref.OMP([]byte(c+"\n"+p+"\n"), []byte(x+"\n"+y+"\n"))
	_, lines := splitOut(t, got)
	if len(lines) != 4 {
		t.Fatalf("lines: %q", lines)
	}
	if idx(lines, p) > idx(lines, c) {
		t.Fatalf("child before parent: %q", lines)
	}
}

func idx(lines []string, l string) int {
	for i, x := range lines {
		if x == l {
			return i
		}
	}
	return -1
}

func TestMergeOneCopyIsIdentity(t *testing.T) {
	files, _ := filepath.Glob("../testdata/corpus/*.jsonl")
	if len(files) == 0 {
		t.Skip("no corpus")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := mergeref.OMP(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Errorf("%s: Merge of one copy changed it", filepath.Base(f))
		}
		got, _ = mergeref.OMP(b, b, b)
		if !bytes.Equal(got, b) {
			t.Errorf("%s: Merge of three equal copies changed it", filepath.Base(f))
		}
	}
}

// history simulates omp sessions going on in several places: a shared start,
// then each machine appends entries (sometimes on a new branch, sometimes a
// malformed or id-less line, sometimes a rename), and now and then a machine
// takes another's copy (a restore or sync) and goes on from there.
type history struct {
	copies [][]byte
	newest string // the entry with the newest timestamp
	title  []byte // the newest title slot
}

type machine struct {
	lines []string
	ids   []string // entry ids in this copy
	slot  []byte
	skew  time.Duration
}

func genHistory(t testing.TB, r *rand.Rand, n int, skew bool) history {
	clock := t0
	tick := func() time.Time {
		clock = clock.Add(time.Duration(1+r.IntN(5000)) * time.Millisecond)
		return clock
	}
	nextID := 0
	newID := func() string { nextID++; return fmt.Sprintf("%08x", nextID) }
	header := `{"type":"session","version":3,"id":"01a113d2-be76-73c7-986b-d3ac6e3fbb83","timestamp":"` + ts(t0) + `","cwd":"/home/u/w"}`
	withSlot := r.IntN(4) != 0
	var h history
	var newestAt time.Time
	base := machine{lines: []string{header}}
	if withSlot {
		base.slot = makeSlot(t, "", t0)
	}
	add := func(m *machine, line string, id string) {
		m.lines = append(m.lines, line)
		if id != "" {
			m.ids = append(m.ids, id)
		}
	}
	for range 1 + r.IntN(5) {
		at := tick()
		id := newID()
		parent := ""
		if len(base.ids) > 0 {
			parent = base.ids[len(base.ids)-1]
		}
		add(&base, entryLine(id, parent, at, "shared"), id)
	}
	ms := make([]*machine, n)
	for i := range ms {
		m := base
		m.lines = append([]string(nil), base.lines...)
		m.ids = append([]string(nil), base.ids...)
		if skew {
			m.skew = time.Duration(r.IntN(7200)-3600) * time.Second
		}
		ms[i] = &m
	}
	titles := 0
	for range 5 + r.IntN(40) {
		m := ms[r.IntN(n)]
		at := tick().Add(m.skew)
		switch k := r.IntN(20); {
		case k == 0 && n > 1: // take another machine's copy
			o := ms[r.IntN(n)]
			m.lines = append([]string(nil), o.lines...)
			m.ids = append([]string(nil), o.ids...)
			m.slot = o.slot
		case k == 1:
			add(m, fmt.Sprintf("malformed line %d {", r.Int()), "")
		case k == 2:
			add(m, fmt.Sprintf(`{"type":"message","timestamp":"%s","legacy":%d}`, ts(at), r.Int()), "")
		case k == 3 && m.slot != nil: // rename: new slot and a title_change entry
			titles++
			m.slot = makeSlot(t, fmt.Sprintf("title %d", titles), at)
			id := newID()
			add(m, fmt.Sprintf(`{"type":"title_change","id":"%s","parentId":"%s","timestamp":"%s","title":"title %d"}`, id, m.ids[len(m.ids)-1], ts(at), titles), id)
		default:
			id := newID()
			parent := m.ids[len(m.ids)-1]
			if r.IntN(5) == 0 {
				parent = m.ids[r.IntN(len(m.ids))] // branch
			}
			add(m, entryLine(id, parent, at, fmt.Sprintf("work %d", r.Int())), id)
		}
	}
	// What counts is what the copies hold now: a machine that took
	// another's copy dropped its own lines.
	h.newest, h.title, newestAt = "", nil, time.Time{}
	for _, m := range ms {
		h.copies = append(h.copies, []byte(string(m.slot)+strings.Join(m.lines, "\n")+"\n"))
		for _, l := range m.lines {
			if e, ok := session.ParseEntry([]byte(l)); ok && e.ID != "" && session.ParseTime(e.Timestamp).After(newestAt) {
				newestAt, h.newest = session.ParseTime(e.Timestamp), l
			}
		}
		if m.slot != nil && (h.title == nil || mustSlotTime(t, m.slot).After(mustSlotTime(t, h.title))) {
			h.title = m.slot
		}
	}
	return h
}

func mustSlotTime(t testing.TB, slot []byte) time.Time {
	s, ok := session.ParseTitleSlot(slot)
	if !ok {
		t.Fatalf("not a slot: %q", slot)
	}
	return session.ParseTime(s.UpdatedAt)
}

// checkMerge asserts what must hold for any merge of histories whose lines
// are unique: nothing lost, nothing repeated, nothing changed, parents first.
func checkMerge(t *testing.T, copies [][]byte, got []byte) {
	t.Helper()
	slot, lines := splitOut(t, got)
	in := map[string]bool{}
	hasSlot := false
	for _, c := range copies {
		if _, ok := session.ParseTitleSlot(c); ok {
			hasSlot = true
		}
		for _, l := range copyLines(c) {
			in[l] = true
		}
	}
	if hasSlot != (slot != nil) {
		t.Fatalf("inputs have a title slot: %v; output: %v", hasSlot, slot != nil)
	}
	pos := map[string]int{}
	byID := map[string]int{}
	for i, l := range lines {
		if !in[l] {
			t.Fatalf("output line %d is in no input: %q", i, l)
		}
		if _, dup := pos[l]; dup {
			t.Fatalf("output repeats line %q", l)
		}
		pos[l] = i
		if e, ok := session.ParseEntry([]byte(l)); ok && e.ID != "" {
			byID[e.ID] = i
		}
	}
	for l := range in {
		if _, ok := pos[l]; !ok {
			t.Fatalf("line lost: %q", l)
		}
	}
	for i, l := range lines {
		e, ok := session.ParseEntry([]byte(l))
		if !ok || e.ParentID == nil {
			continue
		}
		if p, ok := byID[*e.ParentID]; ok && p >= i {
			t.Fatalf("entry %s (line %d) comes before its parent (line %d)", e.ID, i, p)
		}
	}
	if e, ok := session.ParseEntry([]byte(lines[0])); !ok || e.Type != "session" {
		t.Fatalf("first line is not the header: %q", lines[0])
	}
}

func TestMergeProperties(t *testing.T) {
	for _, n := range []int{2, 3} {
		for _, skew := range []bool{false, true} {
			t.Run(fmt.Sprintf("machines=%d/skew=%v", n, skew), func(t *testing.T) {
				for seed := range uint64(200) {
					r := rand.New(rand.NewPCG(seed, uint64(n)))
					h := genHistory(t, r, n, skew)
					got, err := mergeref.OMP(h.copies...)
					if err != nil {
						t.Fatal(err)
					}
					t.Run(fmt.Sprint(seed), func(t *testing.T) {
						checkMerge(t, h.copies, got)
						if skew {
							return
						}
						_, lines := splitOut(t, got)
						last := ""
						for _, l := range lines {
							if e, ok := session.ParseEntry([]byte(l)); ok && e.ID != "" {
								last = l
							}
						}
						if last != h.newest {
							t.Fatalf("last entry is\n%s\nwant the newest\n%s", last, h.newest)
						}
						if slot, _ := splitOut(t, got); h.title != nil && !bytes.Equal(slot, h.title) {
							t.Fatalf("title slot %q, want the newest %q", slot, h.title)
						}
					})
					// Any order of the copies gives the same lines.
					rev := make([][]byte, len(h.copies))
					for i, c := range h.copies {
						rev[len(rev)-1-i] = c
					}
					got2, _ := mergeref.OMP(rev...)
					checkMerge(t, rev, got2)
				}
			})
		}
	}
}

func FuzzMerge(f *testing.F) {
	header := `{"type":"session","version":3,"id":"s","timestamp":"2026-10-07T00:45:40.000Z","cwd":"/w"}` + "\n"
	e1 := entryLine("aaaa0001", "", t0, "one") + "\n"
	f.Add([]byte(header+e1), []byte(header+e1+entryLine("bbbb0001", "aaaa0001", t0.Add(time.Second), "b")+"\n"))
	f.Add(append(makeSlot(f, "x", t0), header+e1...), []byte(header+"garbage\n\n\n"+e1))
	f.Add([]byte(entryLine("a", "b", t0, "")+"\n"+entryLine("b", "a", t0, "")), []byte("{}\n{\"id\":1}\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		got, err := mergeref.OMP(a, b)
		if err != nil {
			t.Fatal(err)
		}
		// The streamed merge writes the same bytes, with and without slots.
		checkStreamed(t, session.OMPFormat(), a, b)
		checkStreamed(t, session.Format{Entry: session.ParseEntry}, a, b)
		hasSlot := false
		for _, c := range [][]byte{a, b} {
			if _, ok := session.ParseTitleSlot(c); ok {
				hasSlot = true
			}
		}
		var lines []string
		if hasSlot {
			_, lines = splitOut(t, got)
		} else if len(got) > 0 {
			if got[len(got)-1] != '\n' {
				t.Fatal("output does not end with a newline")
			}
			lines = strings.Split(string(got[:len(got)-1]), "\n")
		}
		in := map[string]int{}
		for _, c := range [][]byte{a, b} {
			cnt := map[string]int{}
			for _, l := range copyLines(c) {
				cnt[l]++
			}
			for l, n := range cnt {
				in[l] = max(in[l], n)
			}
		}
		out := map[string]int{}
		for _, l := range lines {
			out[l]++
			if out[l] > in[l] {
				t.Fatalf("output holds %q %d times; no input holds it that often", l, out[l])
			}
		}
		// Nothing of the first copy (the local file) is ever lost.
		local := map[string]int{}
		for _, l := range copyLines(a) {
			local[l]++
		}
		for l, n := range local {
			if out[l] < n {
				t.Fatalf("local line lost: %q", l)
			}
		}
		if len(got) > len(a)+len(b)+2 {
			t.Fatalf("output %d bytes from inputs of %d and %d", len(got), len(a), len(b))
		}
	})
}

// BenchmarkMerge merges two copies of the largest corpus file that diverged
// after half of it.
func BenchmarkMerge(b *testing.B) {
	data, err := os.ReadFile("../testdata/corpus/pi-v1-before-compaction-branchedFrom_pi-mono-fixture.jsonl")
	if err != nil {
		b.Skip(err)
	}
	half := bytes.LastIndexByte(data[:len(data)/2], '\n') + 1
	other := append(bytes.Clone(data[:half]), entryLine("bbbb0001", "", t0, "other machine")+"\n"...)
	b.SetBytes(int64(len(data) + len(other)))
	for b.Loop() {
		if _, err := mergeref.OMP(data, other); err != nil {
			b.Fatal(err)
		}
	}
}
