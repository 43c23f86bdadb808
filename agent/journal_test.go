package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// Changes go to the journal; loading replays it, ignores a torn last line,
// and never replays a journal that belongs to an older state file.
func TestStateJournal(t *testing.T) {
	dir := t.TempDir()
	s := newState("m")
	a := &FileState{SessionID: "a", Stream: "session", Path: "sessions/-x/a.jsonl", Offset: 10}
	b := &FileState{SessionID: "b", Stream: "session", Path: "sessions/-x/b.jsonl", Offset: 20}
	s.Streams[streamKey("a", "session")] = a
	if err := s.save(dir); err != nil {
		t.Fatal(err)
	}
	a.Offset = 11
	s.touch(a)
	s.Streams[streamKey("b", "session")] = b
	s.touch(b)
	s.setBlob("blob1")
	s.setSeen("desk/a", "sig")
	if err := s.persist(dir); err != nil {
		t.Fatal(err)
	}
	s.forget(streamKey("b", "session"))
	if err := s.persist(dir); err != nil {
		t.Fatal(err)
	}
	// A torn line, as a crash mid-append leaves.
	f, err := os.OpenFile(journalPath(dir, s.JournalSeq), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"k":"a/session","s":{"session_id":"a","str`)
	f.Close()

	got, err := LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ga := got.Streams[streamKey("a", "session")]; ga == nil || ga.Offset != 11 {
		t.Fatalf("stream a after replay: %+v", ga)
	}
	if _, ok := got.Streams[streamKey("b", "session")]; ok {
		t.Fatal("a forgotten stream came back")
	}
	if !got.Blobs["blob1"] || got.Seen["desk/a"] != "sig" {
		t.Fatalf("blobs %v seen %v", got.Blobs, got.Seen)
	}

	// A save starts a new journal; the old one, if a crash left it, is not
	// replayed onto the newer state.
	old := journalPath(dir, got.JournalSeq)
	stale, _ := os.ReadFile(old)
	got.Streams[streamKey("a", "session")].Offset = 13
	if err := got.save(dir); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(old, stale, 0o600)
	again, err := LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.Streams[streamKey("a", "session")].Offset != 13 {
		t.Fatalf("offset %d after a save, want the saved 13: a stale journal was replayed", again.Streams[streamKey("a", "session")].Offset)
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile)); err != nil {
		t.Fatal(err)
	}
}
