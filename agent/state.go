package agent

import (
	"bufio"
	"crypto/sha256"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ompsync/ompsync/atomicfile"
	"github.com/ompsync/ompsync/repo"
)

// stateFile is the agent's record of what it uploaded. It is a cache: the
// remote is the truth, and a lost or damaged state file is rebuilt from it.
const stateFile = "state.json"

// FileState is what the agent knows of one stream: a session file or an
// artifact file. Only bytes [0, Offset) of Generation are on the remote.
type FileState struct {
	SessionID  string `json:"session_id"`
	Stream     string `json:"stream"`
	Path       string `json:"path"` // relative to the agent dir, slash-separated
	Generation string `json:"generation,omitempty"`
	Offset     int64  `json:"offset"`
	HashFrom   int64  `json:"hash_from"`
	// HashState is the running SHA-256 of [HashFrom, Offset), marshalled,
	// so that appends never need the earlier bytes again.
	HashState []byte `json:"hash_state,omitempty"`
	// TailHash covers the last bytes before Offset: a cheap check that the
	// uploaded prefix is still what the file holds.
	TailHash string `json:"tail_hash,omitempty"`
	SlotHash string `json:"slot_hash,omitempty"`
	Inode    uint64 `json:"inode"`
	// Size and MtimeNs are the last stat seen: when both are unchanged the
	// file is not read at all.
	Size    int64 `json:"size"`
	MtimeNs int64 `json:"mtime_ns"`

	Cwd           string    `json:"cwd,omitempty"`
	Title         string    `json:"title,omitempty"`
	UploadedMtime time.Time `json:"uploaded_mtime"`
	State         string    `json:"state"`
	Changed       time.Time `json:"changed"`
	// MetaPath is the path the remote's meta records: its meta object,
	// or else the header of its first chunk.
	MetaPath string `json:"meta_path,omitempty"`
	// MetaObject: this generation's meta object was put (after a move),
	// so a listing without one means the remote lost it, even where the
	// first chunk makes it complete.
	MetaObject bool `json:"meta_object,omitempty"`
	// Verified is when the whole uploaded prefix was last re-hashed.
	Verified time.Time `json:"verified"`
	// PrevGeneration and GenReason go into the meta of a new generation.
	PrevGeneration string `json:"prev_generation,omitempty"`
	GenReason      string `json:"gen_reason,omitempty"`
	// Adopt asks to match the file against the remote before uploading:
	// set for streams rebuilt from the catalog after the state was lost.
	Adopt bool `json:"adopt,omitempty"`
	// SyncedAt is when every settled byte was last on the remote; the age
	// of the oldest pending byte is at most now - SyncedAt.
	SyncedAt time.Time `json:"synced_at"`
	// Pulled are byte ranges that sync wrote from another machine's copy:
	// they are uploaded as references to that copy, not as this machine's
	// new work.
	Pulled []PulledRange `json:"pulled,omitempty"`
	// Confirmed is how far a LIST has shown the generation's objects on the
	// remote. Uploads past it are checked at the next reconcile, so an
	// object the remote lost after acknowledging it is uploaded again.
	Confirmed int64 `json:"confirmed"`
	// ConfirmedAt is when the whole generation was last listed; the audit
	// lists it again after AuditInterval to catch objects lost later.
	ConfirmedAt time.Time `json:"confirmed_at"`
	// SmallChunks counts chunks uploaded since the last compaction, and
	// IdleCompacted says the stream was compacted since it was last idle.
	SmallChunks   int  `json:"small_chunks,omitempty"`
	IdleCompacted bool `json:"idle_compacted,omitempty"`
	// HeadUnconfirmed: a head object was put and not yet read back.
	HeadUnconfirmed bool `json:"head_unconfirmed,omitempty"`
	// MetaUnconfirmed: a meta object was put over an earlier one (a move)
	// and not yet read back.
	MetaUnconfirmed bool `json:"meta_unconfirmed,omitempty"`
	// Unseen: known from this machine's catalog only (the state was
	// rebuilt, or the name taken over), and its file not yet seen here.
	// Its absence is "not on this machine", never a deletion.
	Unseen bool `json:"unseen,omitempty"`

	// stale: loaded from disk, and not yet checked against the remote,
	// which may hold more than the state says (checkStale).
	stale bool
	// rewound: Offset went back to 0 in this generation after its local
	// bytes were proven (rewind): the first chunk goes up again under
	// this generation rather than a new one, so a damaged one is
	// replaced. Not saved: after a restart a new generation is the safe
	// choice.
	rewound bool
}

// onDisk is f as the state file records it: paths whose bytes are not
// UTF-8, which JSON would replace with U+FFFD, escaped (repo.EncodePath). f
// itself when nothing needs escaping, as nearly always.
func (f *FileState) onDisk() *FileState {
	if f == nil {
		return nil
	}
	p, m := repo.EncodePath(f.Path), repo.EncodePath(f.MetaPath)
	if p == f.Path && m == f.MetaPath {
		return f
	}
	c := *f
	c.Path, c.MetaPath = p, m
	return &c
}

// fromDisk reverses onDisk.
func (f *FileState) fromDisk() {
	f.Path, f.MetaPath = repo.DecodePath(f.Path), repo.DecodePath(f.MetaPath)
}

// PulledRange is a range of the local file that came from another machine.
type PulledRange struct {
	Start      int64  `json:"start"`
	End        int64  `json:"end"`
	Machine    string `json:"machine"`
	Generation string `json:"generation"`
	SHA256     string `json:"sha256"`
}

// pulledAt returns the pulled range starting at off, and the start of the
// next pulled range after off (or -1).
func (f *FileState) pulledAt(off int64) (at *PulledRange, next int64) {
	next = -1
	for i := range f.Pulled {
		p := &f.Pulled[i]
		if p.Start == off {
			at = p
		} else if p.Start > off && (next < 0 || p.Start < next) {
			next = p.Start
		}
	}
	return at, next
}

// dropPulled forgets the ranges that start before off: uploaded or stale.
func (f *FileState) dropPulled(off int64) {
	f.Pulled = slices.DeleteFunc(f.Pulled, func(p PulledRange) bool { return p.Start < off })
}

func (f *FileState) stream(machine string) repo.Stream {
	return repo.Stream{SessionID: f.SessionID, Machine: machine, Name: f.Stream}
}

func (f *FileState) isSession() bool { return f.Stream == repo.SessionStream }

// runningHash restores the running hash of [HashFrom, Offset).
func (f *FileState) runningHash() (hash.Hash, error) {
	h := sha256.New()
	if len(f.HashState) == 0 {
		if f.Offset > f.HashFrom {
			return nil, errors.New("missing hash state")
		}
		return h, nil
	}
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(f.HashState); err != nil {
		return nil, fmt.Errorf("hash state: %w", err)
	}
	return h, nil
}

// State is everything the agent persists.
type State struct {
	V       int                   `json:"v"`
	Machine string                `json:"machine"`
	Streams map[string]*FileState `json:"streams"` // by streamKey
	Blobs   map[string]bool       `json:"blobs"`   // names uploaded
	// BlobMtimes is each uploaded blob's mtime, for the catalog: restore
	// gives it back (blob names, "<sha256>.<ext>", share their blob's).
	BlobMtimes map[string]time.Time `json:"blob_mtimes,omitempty"`
	// Seen records, per "<machine>/<session id>", the catalog entry of
	// another machine that sync last merged, so unchanged sessions are
	// not read again.
	Seen map[string]string `json:"seen,omitempty"`
	// LastPrune is when retention last ran.
	LastPrune time.Time `json:"last_prune"`
	// ReadBackAt is when the daily read-back last ran, and ReadBackAfter
	// the key of the last stream it read: the next goes on after it.
	ReadBackAt    time.Time `json:"read_back_at,omitzero"`
	ReadBackAfter string    `json:"read_back_after,omitempty"`
	// BlobsConfirmedAt is when the remote's blobs were last listed.
	BlobsConfirmedAt time.Time `json:"blobs_confirmed_at"`
	// JournalSeq names the journal that amends this file.
	JournalSeq int `json:"journal_seq"`
	// RepoID is the id of the repository this state describes, and Remote
	// where it was (for messages: the id is what counts).
	RepoID string `json:"repo_id,omitempty"`
	Remote string `json:"remote,omitempty"`
	// Instance names this state dir on the remote: the machine's catalog
	// records the instance that wrote it.
	Instance string `json:"instance,omitempty"`
	// CatalogAt is when this instance last wrote the machine's catalog on
	// RepoID, as of the last whole save (it is not journalled, so it may
	// lag: a remote older than it lost what this state wrote).
	CatalogAt time.Time `json:"catalog_at,omitzero"`
	// Displaced are the instances this one took the machine name over
	// from; what they still write is theirs to stop, not this one's.
	Displaced []string `json:"displaced,omitempty"`

	mu sync.Mutex // guards Blobs and changed while uploads run

	changed                     changes // since the last persist
	journalBytes, snapshotBytes int64
}

// setBlob records an uploaded blob and its mtime (zero for a blob's other
// name); uploads run in parallel.
func (s *State) setBlob(name string, mtime time.Time) {
	s.mu.Lock()
	s.Blobs[name] = true
	if !mtime.IsZero() {
		s.BlobMtimes[name] = mtime.UTC()
	}
	s.changed.recs = append(s.changed.recs, journalRecord{Blob: name, Mtime: s.BlobMtimes[name]})
	s.mu.Unlock()
}

func streamKey(sessionID, stream string) string { return sessionID + "/" + stream }

func newState(machine string) *State {
	return &State{V: 1, Machine: machine, Streams: map[string]*FileState{}, Blobs: map[string]bool{}, BlobMtimes: map[string]time.Time{}, Seen: map[string]string{}}
}

// LoadState reads the state in dir. A missing file is (nil, nil); a damaged
// one is an error the caller reports before rebuilding from the remote.
func LoadState(dir string) (*State, error) {
	f, err := os.Open(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	defer f.Close()
	var s State
	if err := decodeState(json.NewDecoder(bufio.NewReaderSize(f, 64<<10)), &s); err != nil {
		// The file's own read errors come as *fs.PathError; anything
		// else is what the bytes say.
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			return nil, fmt.Errorf("read state: %w", err)
		}
		return nil, fmt.Errorf("state file %s is damaged: %w", filepath.Join(dir, stateFile), err)
	}
	if s.V != 1 || s.Streams == nil {
		return nil, fmt.Errorf("state file %s has an unknown version", filepath.Join(dir, stateFile))
	}
	made(&s.Blobs)
	made(&s.BlobMtimes)
	made(&s.Seen)
	for k, f := range s.Streams {
		if f == nil || k != streamKey(f.SessionID, f.Stream) {
			return nil, fmt.Errorf("state file %s is damaged: entry %q", filepath.Join(dir, stateFile), k)
		}
		f.fromDisk()
		f.stale = true
	}
	if fi, err := f.Stat(); err == nil {
		s.snapshotBytes = fi.Size()
	}
	if err := s.replay(dir); err != nil {
		return nil, err
	}
	return &s, nil
}

// decodeState reads a state file into s as json.Unmarshal would, its
// streams one at a time: unmarshalling the file whole held it, and the
// decoder's copy of it, beside the state (10,000 sessions: 10 MB more at
// every start).
func decodeState(dec *json.Decoder, s *State) error {
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errNotObject(t, err)
	}
	rest := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		if !strings.EqualFold(key, "streams") { // json's own matching
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return err
			}
			rest[key] = raw
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			if t == nil && err == nil { // null: no streams, refused below
				s.Streams = nil
				continue
			}
			return errNotObject(t, err)
		}
		s.Streams = map[string]*FileState{}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return err
			}
			var f *FileState
			if err := dec.Decode(&f); err != nil {
				return err
			}
			s.Streams[t.(string)] = f
		}
		if _, err := dec.Token(); err != nil { // the streams' '}'
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the state's '}'
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the state")
	}
	b, err := json.Marshal(rest)
	if err != nil {
		return err
	}
	streams := s.Streams
	if err := json.Unmarshal(b, s); err != nil {
		return err
	}
	s.Streams = streams
	return nil
}

func errNotObject(t json.Token, err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%v where an object belongs", t)
}

// writeTo writes s as the state file records it (its streams' paths
// escaped where they need it: FileState.onDisk), a stream at a time:
// json.Marshal of the whole state built it in one buffer, 16 MiB for
// 10,000 sessions, which encoding/json then kept pooled while the agent
// idled.
func (s *State) writeTo(w io.Writer) (n int64, err error) {
	rest, err := json.Marshal(struct {
		*State
		// Written below. A field named "streams" at this depth hides the
		// embedded one; nil and omitempty, it writes nothing. (A "-" tag
		// would not hide it: encoding/json drops such a field before it
		// looks for clashes, and State's would be written whole.)
		Streams *struct{} `json:"streams,omitempty"`
	}{State: s})
	if err != nil {
		return 0, err
	}
	// rest is an object with at least "v": it ends in '}'. b holds what
	// is not written yet: the head, then one stream at a time.
	b := append(rest[:len(rest)-1], `,"streams":{`...)
	write := func(b []byte) error {
		m, err := w.Write(b)
		n += int64(m)
		return err
	}
	for i, k := range slices.Sorted(maps.Keys(s.Streams)) {
		key, err := json.Marshal(k)
		if err != nil {
			return n, err
		}
		f, err := json.Marshal(s.Streams[k].onDisk())
		if err != nil {
			return n, err
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, key...), ':'), f...)
		if err := write(b); err != nil {
			return n, err
		}
		b = b[:0]
	}
	err = write(append(b, "}}"...))
	return n, err
}

// save writes the whole state atomically (a crash leaves the old or the new
// file), then empties the journal it replaces.
func (s *State) save(dir string) error {
	old := s.JournalSeq
	s.JournalSeq++
	var size int64
	err := atomicfile.WriteFunc(filepath.Join(dir, stateFile), func(w io.Writer) (err error) {
		size, err = s.writeTo(w)
		return err
	}, atomicfile.Options{Perm: 0o600})
	if err != nil {
		s.JournalSeq = old
		return err
	}
	if err := os.Remove(journalPath(dir, old)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove old state journal: %w", err)
	}
	s.snapshotBytes, s.journalBytes, s.changed = size, 0, changes{}
	return nil
}
