package repo

import (
	"encoding/json"
	"fmt"
	"time"
)

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
	if m.V != 1 {
		return Meta{}, fmt.Errorf("meta: unknown version %d", m.V)
	}
	m.Path = DecodePath(m.Path)
	if !SafeRelPath(m.Path) {
		return Meta{}, fmt.Errorf("meta: unsafe path %q", m.Path)
	}
	return m, nil
}
