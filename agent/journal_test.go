package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"
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
	s.setBlob("blob1", time.Time{})
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

// After a crash tore the journal's last line, the next changes are not
// appended after the torn line, where the next load would never read them.
func TestStateJournalAfterTornLine(t *testing.T) {
	dir := t.TempDir()
	s := newState("m")
	a := &FileState{SessionID: "a", Stream: "session", Path: "sessions/-x/a.jsonl", Offset: 10}
	s.Streams[streamKey("a", "session")] = a
	if err := s.save(dir); err != nil {
		t.Fatal(err)
	}
	a.Offset = 11
	s.touch(a)
	if err := s.persist(dir); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(journalPath(dir, s.JournalSeq), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"k":"a/session","s":{"session_id":"a","str`) // ENOSPC or SIGKILL mid-write
	f.Close()

	got, err := LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	ga := got.Streams[streamKey("a", "session")]
	ga.Offset = 12
	got.touch(ga)
	if err := got.persist(dir); err != nil {
		t.Fatal(err)
	}
	again, err := LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if off := again.Streams[streamKey("a", "session")].Offset; off != 12 {
		t.Fatalf("offset after reload %d, want 12: the change was lost behind the torn line", off)
	}
}
