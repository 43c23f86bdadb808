package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The journal holds the changes since state.json was last written whole:
// one JSON line per changed stream, blob or seen entry. Appending the few
// streams a pass touched costs a small write and one fsync, where rewriting
// the state of ten thousand sessions would cost megabytes every interval.
// Its name carries the state's JournalSeq, so a journal left behind by a
// crash during a save is never replayed onto the newer state.
func journalPath(dir string, seq int) string {
	return filepath.Join(dir, fmt.Sprintf("state.journal.%d", seq))
}

// journalRecord is one line of the journal. A stream record with a nil
// State removes the stream.
type journalRecord struct {
	Key   string     `json:"k,omitempty"`
	State *FileState `json:"s,omitempty"`
	Gone  bool       `json:"gone,omitempty"`
	Blob  string     `json:"blob,omitempty"`
	Mtime time.Time  `json:"mtime,omitzero"` // the blob's
	Seen  string     `json:"seen,omitempty"`
	Sig   string     `json:"sig,omitempty"`
}

// changes records what changed since the last save.
type changes struct {
	streams map[string]bool
	recs    []journalRecord // blobs and seen entries, as they were set
	// all asks for the whole state to be written (start-up, prune).
	all bool
}

// touch notes that a stream's state changed.
func (s *State) touch(f *FileState) { s.changedStream(streamKey(f.SessionID, f.Stream)) }

// forget removes a stream.
func (s *State) forget(key string) {
	delete(s.Streams, key)
	s.changedStream(key)
}

func (s *State) changedStream(key string) {
	s.mu.Lock()
	made(&s.changed.streams)[key] = true
	s.mu.Unlock()
}

func (s *State) setSeen(key, sig string) {
	s.Seen[key] = sig
	s.mu.Lock() // changed is shared with setBlob
	s.changed.recs = append(s.changed.recs, journalRecord{Seen: key, Sig: sig})
	s.mu.Unlock()
}

// persist saves what changed: appended to the journal, or, when asked or
// when the journal has grown past half the state's size, the whole state
// (which empties the journal). A crash leaves the old or new state and at
// most a torn last journal line, which loading ignores.
func (s *State) persist(dir string) error {
	if !s.changed.all && len(s.changed.streams) == 0 && len(s.changed.recs) == 0 {
		return nil
	}
	if s.changed.all || s.journalBytes > max(1<<20, s.snapshotBytes/2) {
		return s.save(dir)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for key := range s.changed.streams {
		rec := journalRecord{Key: key, State: s.Streams[key].onDisk(), Gone: s.Streams[key] == nil}
		if err := enc.Encode(rec); err != nil {
			return err
		}
	}
	for _, rec := range s.changed.recs {
		if err := enc.Encode(rec); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(journalPath(dir, s.JournalSeq), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open state journal: %w", err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		// Part of it may be written (a full disk): appending after it would
		// hide what follows from the next load, so write the state whole.
		s.changed.all = true
		f.Close()
		return fmt.Errorf("write state journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		s.changed.all = true
		f.Close()
		return fmt.Errorf("sync state journal: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	s.journalBytes += int64(buf.Len())
	s.changed = changes{}
	return nil
}

// replay applies the journal to a state loaded from state.json. It stops at
// the first line it cannot read: a torn write from a crash.
func (s *State) replay(dir string) error {
	b, err := os.ReadFile(journalPath(dir, s.JournalSeq))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read state journal: %w", err)
	}
	s.journalBytes = int64(len(b))
	for line := range bytes.Lines(b) {
		var rec journalRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			// A torn line: what is appended after it would never be
			// read, so the next persist writes the whole state instead.
			s.changed.all = true
			break
		}
		switch {
		case rec.Blob != "":
			s.Blobs[rec.Blob] = true
			if !rec.Mtime.IsZero() {
				s.BlobMtimes[rec.Blob] = rec.Mtime
			}
		case rec.Seen != "":
			s.Seen[rec.Seen] = rec.Sig
		case rec.Key != "" && rec.Gone:
			delete(s.Streams, rec.Key)
		case rec.Key != "" && rec.State != nil && rec.Key == streamKey(rec.State.SessionID, rec.State.Stream):
			rec.State.fromDisk()
			rec.State.stale = true
			s.Streams[rec.Key] = rec.State
		default:
			s.changed.all = true
			return nil // not a record this version writes: stop here
		}
	}
	return nil
}
