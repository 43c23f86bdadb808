package repo

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ompsync/ompsync/safename"
	"github.com/ompsync/ompsync/session"
)

// HeadSize is the size of a title slot: the hash_from of a generation that
// starts with one, and the size of its head object. Only omp writes one
// (its first line, rewritten in place on every rename).
const HeadSize = session.TitleSlotSize

// ValidHead reports whether b is a title slot as a head object must hold
// it: exactly the slot, as omp's session format reads one.
func ValidHead(b []byte) bool {
	_, ok := session.ParseTitleSlot(b)
	return ok && len(b) == HeadSize
}

// Meta describes one generation of a stream. It is replaced when the file
// moves; chunks never are.
type Meta struct {
	V          int    `json:"v"`
	SessionID  string `json:"session_id"`
	Machine    string `json:"machine"`
	Stream     string `json:"stream"`
	Generation string `json:"generation"`
	// Path is where the file lives, relative to the agent dir, slash-separated.
	Path     string    `json:"path"`
	Cwd      string    `json:"cwd,omitempty"`
	HashFrom int64     `json:"hash_from"`
	Created  time.Time `json:"created"`
	// Previous is the generation this one replaced, and Reason why.
	Previous string `json:"previous,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// MaxMetaSize bounds metadata and head objects a reader accepts.
const MaxMetaSize = 1 << 20

// EncodeMeta renders m.
func EncodeMeta(m Meta) []byte {
	m.V = 1
	m.Path = EncodePath(m.Path)
	b, _ := json.Marshal(m)
	return b
}

// DecodeMeta parses and checks m.
func DecodeMeta(b []byte) (Meta, error) {
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("meta: %w", err)
	}
	if err := m.decode(); err != nil {
		return Meta{}, fmt.Errorf("meta: %w", err)
	}
	return m, nil
}

// decode checks a meta as read, wherever it was stored, and decodes its
// path.
func (m *Meta) decode() error {
	if m.V != 1 {
		return fmt.Errorf("unknown version %d", m.V)
	}
	m.Path = DecodePath(m.Path)
	if !safename.RelPath(m.Path) {
		return fmt.Errorf("unsafe path %q", m.Path)
	}
	return nil
}
