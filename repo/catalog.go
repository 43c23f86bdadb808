package repo

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/ompsync/ompsync/session"
)

// Session states in a catalog.
const (
	StatePresent  = "present"
	StateDeleted  = "deleted"
	StateArchived = "archived"
)

// Catalog lists what one machine holds, so that listing every session costs
// one GET per machine rather than one LIST per session.
type Catalog struct {
	V       int       `json:"v"`
	Machine string    `json:"machine"`
	Updated time.Time `json:"updated"`
	// Base, in a recent object, is the Updated of the catalog it amends;
	// readers ignore a recent object whose base is not the catalog's.
	Base     time.Time      `json:"base,omitzero"`
	Sessions []CatalogEntry `json:"sessions"`
	// Refused says which entries DecodeCatalog dropped as unsafe; the
	// others are usable.
	Refused []string `json:"-"`
}

// CatalogEntry is one session as its machine last saw it.
type CatalogEntry struct {
	ID         string `json:"id"`
	Path       string `json:"path"`
	Cwd        string `json:"cwd,omitempty"`
	Title      string `json:"title,omitempty"`
	Generation string `json:"generation"`
	// Size is how many bytes of the generation are on the remote.
	Size int64 `json:"size"`
	// Mtime is the file's modification time when it was last uploaded;
	// restore gives it back so omp's listing order is kept.
	Mtime   time.Time `json:"mtime"`
	State   string    `json:"state"`
	Changed time.Time `json:"changed"`
}

// MaxCatalogSize bounds a catalog's plaintext (about a million sessions).
const MaxCatalogSize = 512 << 20

// EncodeCatalog renders c with its sessions sorted by id.
func EncodeCatalog(c Catalog) []byte {
	c.V = 1
	sort.Slice(c.Sessions, func(i, j int) bool { return c.Sessions[i].ID < c.Sessions[j].ID })
	b, _ := json.Marshal(c)
	return b
}

// DecodeCatalog parses c and checks every entry, so nothing unsafe reaches
// restore: an unsafe entry is dropped and named in Refused, and the rest of
// the machine's sessions stay usable.
func DecodeCatalog(b []byte) (Catalog, error) {
	var c Catalog
	if err := json.Unmarshal(b, &c); err != nil {
		return Catalog{}, fmt.Errorf("catalog: %w", err)
	}
	if c.V != 1 {
		return Catalog{}, fmt.Errorf("catalog: unknown version %d", c.V)
	}
	if !ValidMachine(c.Machine) {
		return Catalog{}, fmt.Errorf("catalog: unsafe machine name %q", c.Machine)
	}
	kept := c.Sessions[:0]
	for _, e := range c.Sessions {
		if why := entryProblem(e); why != "" {
			c.Refused = append(c.Refused, fmt.Sprintf("catalog of %s: %s", c.Machine, why))
			continue
		}
		kept = append(kept, e)
	}
	c.Sessions = kept
	return c, nil
}

// entryProblem says what makes a catalog entry unsafe, or "".
func entryProblem(e CatalogEntry) string {
	switch {
	case !session.ValidID(e.ID):
		return fmt.Sprintf("unsafe session id %q", e.ID)
	case !SafeRelPath(e.Path):
		return fmt.Sprintf("session %s has unsafe path %q", e.ID, e.Path)
	case e.Generation != "" && !ValidGeneration(e.Generation):
		return fmt.Sprintf("session %s has bad generation %q", e.ID, e.Generation)
	}
	switch e.State {
	case StatePresent, StateDeleted, StateArchived:
		return ""
	}
	return fmt.Sprintf("session %s has unknown state %q", e.ID, e.State)
}
