package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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

// The state file, written a stream at a time, loads back as the state it
// was, paths that need escaping among them, and is the valid JSON that
// json.Marshal of the state would give.
func TestStateFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := newState("m")
	s.RepoID, s.Remote, s.CatalogAt = "r1", "s3://b", time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s.setBlob("blob1", time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	odd := "sessions/-x/\xff\"name\".jsonl" // not UTF-8, and quotes
	for i, p := range []string{"sessions/-x/a.jsonl", odd, "sessions/-y/c.jsonl"} {
		id := string(rune('a' + i))
		s.Streams[streamKey(id, "session")] = &FileState{SessionID: id, Stream: "session", Path: p, Offset: int64(10 * i), HashState: []byte{1, 2, byte(i)}}
	}
	if err := s.save(dir); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(raw) || s.snapshotBytes != int64(len(raw)) {
		t.Fatalf("state file: valid %t, %d bytes, recorded %d", json.Valid(raw), len(raw), s.snapshotBytes)
	}
	got, err := LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.RepoID != "r1" || got.Remote != "s3://b" || !got.CatalogAt.Equal(s.CatalogAt) || !got.Blobs["blob1"] || !got.BlobMtimes["blob1"].Equal(s.BlobMtimes["blob1"]) {
		t.Fatalf("loaded state: %+v", got)
	}
	if len(got.Streams) != 3 {
		t.Fatalf("%d streams loaded, want 3", len(got.Streams))
	}
	for k, want := range s.Streams {
		g := got.Streams[k]
		if g == nil || g.Path != want.Path || g.Offset != want.Offset || string(g.HashState) != string(want.HashState) {
			t.Errorf("stream %s: loaded %+v, want %+v", k, g, want)
		}
	}
}

// A state file that is not one whole state object is damaged, whichever
// part is wrong, and says so.
func TestDamagedStateFileRefused(t *testing.T) {
	good := `{"v":1,"machine":"m","streams":{"a/session":{"session_id":"a","stream":"session","path":"sessions/-x/a.jsonl"}}}`
	for name, body := range map[string]string{
		"cut":            good[:len(good)-3],
		"trailing":       good + `{"v":1}`,
		"streams array":  `{"v":1,"machine":"m","streams":[]}`,
		"streams null":   `{"v":1,"machine":"m","streams":null}`,
		"no streams":     `{"v":1,"machine":"m"}`,
		"array":          `[]`,
		"stream null":    `{"v":1,"machine":"m","streams":{"a/session":null}}`,
		"wrong key":      `{"v":1,"machine":"m","streams":{"b/session":{"session_id":"a","stream":"session"}}}`,
		"bad field type": `{"v":"1","machine":"m","streams":{}}`,
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := LoadState(dir)
		if err == nil || !strings.Contains(err.Error(), "state file") {
			t.Errorf("%s: loaded %v, %v; want an error naming the state file", name, s, err)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, stateFile), []byte(good), 0o600)
	if s, err := LoadState(dir); err != nil || s.Streams["a/session"] == nil || s.Machine != "m" {
		t.Fatalf("the good file: %+v, %v", s, err)
	}
}
