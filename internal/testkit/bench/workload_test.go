package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ompsync/ompsync/session"
	"github.com/ompsync/ompsync/store"
)

const corpusDir = "../../../testdata/corpus"

func loadCorpus(t *testing.T) *Corpus {
	t.Helper()
	c, err := LoadCorpus(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkSession checks what omp's readers check: a title slot, a header
// whose id is the one in the file name, and entry lines chained by
// parentId, every line complete JSON.
func checkSession(t *testing.T, path string) (title string, entries int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, slot, err := session.ReadHeader(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if session.SlotLen(b) != session.TitleSlotSize {
		t.Fatalf("%s: no title slot", path)
	}
	if id, ok := store.OMP().IDFromName(path); !ok || id != h.ID {
		t.Fatalf("file name id %q, header id %q", id, h.ID)
	}
	if !bytes.HasSuffix(b, []byte("\n")) {
		t.Fatal("last line has no newline")
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	prev := ""
	for i, line := range lines[2:] {
		var e struct {
			ID       string  `json:"id"`
			ParentID *string `json:"parentId"`
			Type     string  `json:"type"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("line %d is not JSON: %v", i+2, err)
		}
		if e.ID == "" || e.Type == "" {
			t.Fatalf("line %d has no id or type: %.100s", i+2, line)
		}
		if (prev == "") != (e.ParentID == nil) || e.ParentID != nil && *e.ParentID != prev {
			t.Fatalf("line %d: parentId %v, want %q", i+2, e.ParentID, prev)
		}
		prev = e.ID
	}
	return slot.Title, len(lines) - 2
}

func TestSessionsLookLikeOmps(t *testing.T) {
	c := loadCorpus(t)
	if c.Lines() < 1000 {
		t.Fatalf("corpus has %d entry lines, want the real files' thousands", c.Lines())
	}
	dir := t.TempDir()
	g := NewGen(c, 1)
	g.BigProb = 0.5 // make sure large tool results are well formed too
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	s, err := g.NewSession(dir, "-src-x", now, 20)
	if err != nil {
		t.Fatal(err)
	}
	if title, n := checkSession(t, s.Abs); title != "" || n != 20 {
		t.Fatalf("new session: title %q, %d entries; want none, 20", title, n)
	}
	fi, _ := os.Stat(s.Abs)
	if fi.Size() != s.Size {
		t.Fatalf("Size %d, file %d", s.Size, fi.Size())
	}
	if got, _ := filepath.Rel(dir, s.Abs); filepath.ToSlash(got) != s.Rel || store.OMP().Classify(s.Rel) != store.KindSession {
		t.Fatalf("Rel %q is not the session path %q", s.Rel, got)
	}

	size := s.Size
	n, err := g.Append(s, now.Add(time.Second), 3)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(s.Abs); n <= 0 || fi.Size() != size+n || s.Size != fi.Size() {
		t.Fatalf("after append: file %d, Size %d, was %d, appended %d", fi.Size(), s.Size, size, n)
	}
	before, _ := os.ReadFile(s.Abs)
	n, err = g.Retitle(s, now.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(s.Abs)
	if int64(len(after)) != int64(len(before))+n || !bytes.Equal(after[session.TitleSlotSize:len(before)], before[session.TitleSlotSize:]) {
		t.Fatal("a rename must change only the title slot and append one line")
	}
	title, entries := checkSession(t, s.Abs)
	if title == "" || entries != 24 {
		t.Fatalf("after rename: title %q, %d entries; want a title, 24", title, entries)
	}
	if !bytes.Contains(after[len(before):], []byte(`"type":"title_change"`)) {
		t.Fatal("no title_change line after a rename")
	}
}

func TestGenIsDeterministic(t *testing.T) {
	c := loadCorpus(t)
	read := func() []byte {
		dir := t.TempDir()
		s, err := NewGen(c, 42).NewSessionSize(dir, "-p", time.Unix(1e9, 0), 200<<10)
		if err != nil {
			t.Fatal(err)
		}
		if s.Size < 200<<10 {
			t.Fatalf("NewSessionSize made %d bytes, want at least %d", s.Size, 200<<10)
		}
		b, _ := os.ReadFile(s.Abs)
		return b
	}
	if !bytes.Equal(read(), read()) {
		t.Fatal("the same seed made different sessions")
	}
}

func TestBigResultsAreLarge(t *testing.T) {
	g := NewGen(loadCorpus(t), 3)
	g.BigProb = 1
	s, err := g.NewSession(t.TempDir(), "-p", time.Unix(1e9, 0), 2)
	if err != nil {
		t.Fatal(err)
	}
	if s.Size < 2*int64(g.BigMin) {
		t.Fatalf("two large tool results make %d bytes, want at least %d", s.Size, 2*g.BigMin)
	}
	checkSession(t, s.Abs)
}

func TestTitleSlotIsOmpsSize(t *testing.T) {
	slot, err := TitleSlot("Fix the login bug", time.Unix(1e9, 0))
	if err != nil {
		t.Fatal(err)
	}
	ts, ok := session.ParseTitleSlot(slot)
	if len(slot) != session.TitleSlotSize || !ok || ts.Title != "Fix the login bug" {
		t.Fatalf("slot of %d bytes, parsed %v %+v", len(slot), ok, ts)
	}
	if _, err := TitleSlot(string(bytes.Repeat([]byte("x"), 300)), time.Unix(1e9, 0)); err == nil {
		t.Fatal("a title longer than the slot was accepted")
	}
}

// A tree's forks are what omp's fork writes: a new id, parentSession, the
// parent's entries again (nearly byte for byte), then entries of their own.
func TestTreeForks(t *testing.T) {
	c := loadCorpus(t)
	dir := t.TempDir()
	tr, err := BuildTree(NewGen(c, 3), dir, 40, 4<<20, 0.1, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Sessions) != 40 || tr.Forks != 4 {
		t.Fatalf("%d sessions, %d forks; want 40, 4", len(tr.Sessions), tr.Forks)
	}
	byID := map[string]*Session{}
	for _, s := range tr.Sessions {
		byID[s.ID] = s
	}
	forks := 0
	for _, s := range tr.Sessions {
		checkSession(t, s.Abs)
		b, _ := os.ReadFile(s.Abs)
		h, _, _ := session.ReadHeader(b)
		if h.ParentSession == "" {
			continue
		}
		forks++
		p := byID[h.ParentSession]
		if p == nil {
			t.Fatalf("fork %s names parent %s, not in the tree", s.ID, h.ParentSession)
		}
		pb, _ := os.ReadFile(p.Abs)
		pl := bytes.Split(pb, []byte("\n"))
		fl := bytes.Split(b, []byte("\n"))
		same := 0
		for i := 2; i < len(pl)-1; i++ {
			if i < len(fl) && bytes.Equal(pl[i], fl[i]) {
				same++
			}
		}
		if len(fl) <= len(pl) || same < (len(pl)-3)/2 {
			t.Errorf("fork %s: %d lines, %d of its parent's %d entries repeated unchanged", s.ID, len(fl), same, len(pl)-3)
		}
	}
	if forks != tr.Forks {
		t.Errorf("%d files name a parent, want %d", forks, tr.Forks)
	}
}

// The corpus, and so every workload, is the same in every run: figures of
// two runs of the harness are of the same bytes.
func TestCorpusDeterministic(t *testing.T) {
	a, b := loadCorpus(t), loadCorpus(t)
	if !bytes.Equal(a.text, b.text) || len(a.rest) != len(b.rest) {
		t.Fatal("two loads of the corpus differ")
	}
}
