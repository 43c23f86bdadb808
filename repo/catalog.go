package repo

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/safename"
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
	Base time.Time `json:"base,omitzero"`
	// Writer is the agent that wrote this object (nil when written by an
	// ompsync before writers were recorded, or by a command).
	Writer   *Writer        `json:"writer,omitempty"`
	Sessions []CatalogEntry `json:"sessions"`
	// Blobs gives the mtime of each blob the machine uploaded, which the
	// blob object cannot carry (it is the blob's bytes alone); in a recent
	// object, those added or changed since its base. Readers before it
	// ignore the member.
	Blobs []BlobEntry `json:"blobs,omitempty"`
	// Refused says which entries DecodeCatalog dropped as unsafe; the
	// others are usable.
	Refused []string `json:"-"`
	// Encoded is the size of the catalog as stored (plaintext), when it
	// was read from or written to the remote.
	Encoded int `json:"-"`
}

// Writer says which agent wrote a catalog or recent object: a machine name
// belongs to one state dir at a time, and the next agent to start there
// checks that it is the one. Host and StateDir are for the message that
// names the other agent; HostID (a hash of the host's machine-id, never the
// id itself) tells two hosts of the same name apart.
type Writer struct {
	Instance string `json:"instance"`
	Host     string `json:"host,omitempty"`
	HostID   string `json:"host_id,omitempty"`
	StateDir string `json:"state_dir,omitempty"`
}

// maxWriterField bounds what a catalog may say of its writer.
const maxWriterField = 4096

// checkStamp checks what a catalog or recent object says of itself: its
// version, its machine's name, and a writer that is one an agent writes.
func checkStamp(what string, v int, machine string, w *Writer) error {
	switch {
	case v != 1:
		return fmt.Errorf("%s: unknown version %d", what, v)
	case !safename.Machine(machine):
		return fmt.Errorf("%s: unsafe machine name %q", what, machine)
	case w == nil:
		return nil
	case !ValidID(w.Instance):
		return fmt.Errorf("%s: bad writer instance %q", what, w.Instance)
	case w.HostID != "" && !ValidID(w.HostID):
		return fmt.Errorf("%s: bad writer host id %q", what, w.HostID)
	case len(w.Host) > maxWriterField || len(w.StateDir) > maxWriterField:
		return fmt.Errorf("%s: writer's host or state dir longer than %d bytes", what, maxWriterField)
	}
	return nil
}

// CatalogEntry is one session as its machine last saw it.
type CatalogEntry struct {
	ID   string `json:"id"`
	Path string `json:"path"`
	Cwd  string `json:"cwd,omitempty"`
	// Project is the project the backing-up machine found cwd in: its
	// repository's origin, the folder inside it and under the home
	// (a compatible addition; docs/FORMAT.md).
	Project    *project.ID `json:"project,omitempty"`
	Title      string      `json:"title,omitempty"`
	Generation string      `json:"generation"`
	// Size is how many bytes of the generation are on the remote.
	Size int64 `json:"size"`
	// Mtime is the file's modification time when it was last uploaded;
	// restore gives it back so omp's listing order is kept.
	Mtime   time.Time `json:"mtime"`
	State   string    `json:"state"`
	Changed time.Time `json:"changed"`
}

// BlobEntry is one blob in a catalog: its name (the sha256) and the file's
// modification time when it was uploaded.
type BlobEntry struct {
	Name  string    `json:"name"`
	Mtime time.Time `json:"mtime"`
}

// MaxCatalogSize bounds a catalog's plaintext (about 150,000 sessions). A
// catalog is decoded whole, in the memory of every reader and of every
// agent that pulls, so a hostile one must be refused long before it could
// exhaust it.
const MaxCatalogSize = 64 << 20

// EncodeCatalog renders c with its sessions sorted by id.
func EncodeCatalog(c Catalog) []byte {
	c.V = 1
	c.Sessions = slices.SortedStableFunc(slices.Values(c.Sessions), byID)
	for i := range c.Sessions {
		c.Sessions[i].Path = EncodePath(c.Sessions[i].Path)
	}
	c.Blobs = sortedBlobs(c.Blobs)
	b, _ := json.Marshal(c)
	return b
}

// byID orders a catalog's sessions as it is stored.
func byID(a, b CatalogEntry) int { return cmp.Compare(a.ID, b.ID) }

func sortedBlobs(b []BlobEntry) []BlobEntry {
	return slices.SortedStableFunc(slices.Values(b), func(x, y BlobEntry) int { return cmp.Compare(x.Name, y.Name) })
}

// checkBlobs drops the blob entries that do not name a blob, or name one
// twice, saying so in refused.
func checkBlobs(what string, blobs []BlobEntry, refused *[]string) []BlobEntry {
	seen := make(map[string]bool, len(blobs))
	kept := blobs[:0]
	for _, b := range blobs {
		switch {
		case !BlobName(b.Name):
			*refused = append(*refused, fmt.Sprintf("%s: blob entry %q is not a sha256 name", what, b.Name))
		case seen[b.Name]:
			*refused = append(*refused, fmt.Sprintf("%s: blob %s listed twice", what, b.Name))
		default:
			seen[b.Name] = true
			kept = append(kept, b)
		}
	}
	return kept
}

// DecodeCatalog parses c and checks every entry, so nothing unsafe reaches
// restore: an unsafe entry is dropped and named in Refused, and the rest of
// the machine's sessions stay usable.
func DecodeCatalog(b []byte) (Catalog, error) {
	var c Catalog
	if err := json.Unmarshal(b, &c); err != nil {
		return Catalog{}, fmt.Errorf("catalog: %w", err)
	}
	if err := checkStamp("catalog", c.V, c.Machine, c.Writer); err != nil {
		return Catalog{}, err
	}
	c.Encoded = len(b)
	kept := c.Sessions[:0]
	for _, e := range c.Sessions {
		e.Path = DecodePath(e.Path)
		if why := entryProblem(e); why != "" {
			c.Refused = append(c.Refused, fmt.Sprintf("catalog of %s: %s", c.Machine, why))
			continue
		}
		kept = append(kept, e)
	}
	c.Sessions = kept
	c.Blobs = checkBlobs("catalog of "+c.Machine, c.Blobs, &c.Refused)
	return c, nil
}

// entryProblem says what makes a catalog entry unsafe, or "".
func entryProblem(e CatalogEntry) string {
	switch {
	case !safename.SessionID(e.ID):
		return fmt.Sprintf("unsafe session id %q", e.ID)
	case !safename.RelPath(e.Path):
		return fmt.Sprintf("session %s has unsafe path %q", e.ID, e.Path)
	case e.Generation != "" && !ValidGeneration(e.Generation):
		return fmt.Sprintf("session %s has bad generation %q", e.ID, e.Generation)
	case e.Project != nil && e.Project.Problem() != "":
		return fmt.Sprintf("session %s: %s", e.ID, e.Project.Problem())
	}
	switch e.State {
	case StatePresent, StateDeleted, StateArchived:
		return ""
	}
	return fmt.Sprintf("session %s has unknown state %q", e.ID, e.State)
}

// CatalogIndex holds a catalog's entries by id with their positions in the
// stored catalog (sorted by id, as EncodeCatalog writes it), for writing
// recent objects against it.
type CatalogIndex struct {
	entries map[string]indexedEntry // one map: an agent holds this for every session
}

type indexedEntry struct {
	CatalogEntry
	pos int
}

// IndexCatalog indexes the sessions of a catalog as EncodeCatalog stores them.
func IndexCatalog(sessions []CatalogEntry) *CatalogIndex {
	x := &CatalogIndex{entries: make(map[string]indexedEntry, len(sessions))}
	stored := slices.SortedStableFunc(slices.Values(sessions), byID)
	for i, e := range stored {
		x.entries[e.ID] = indexedEntry{CatalogEntry: e, pos: i}
	}
	return x
}

// Get returns the catalog's entry for a session (none in a nil index).
func (x *CatalogIndex) Get(id string) (CatalogEntry, bool) {
	if x == nil {
		return CatalogEntry{}, false
	}
	e, ok := x.entries[id]
	return e.CatalogEntry, ok
}

// Len is how many sessions the catalog lists.
func (x *CatalogIndex) Len() int {
	if x == nil {
		return 0
	}
	return len(x.entries)
}

// entryPatch is an entry of a recent object: the session, and only the
// fields that differ from the catalog's entry for it. A session the catalog
// lists is named by its position there (N), which costs a few bytes where
// its id costs some twenty; one the catalog lacks by its id, with every
// field. Most changes are a new size and mtime, so an active machine's
// recent object stays a small fraction of its catalog.
type entryPatch struct {
	ID         string      `json:"id,omitempty"`
	N          *int        `json:"n,omitempty"`
	Path       *string     `json:"path,omitempty"`
	Cwd        *string     `json:"cwd,omitempty"`
	Project    *project.ID `json:"project,omitempty"`
	Title      *string     `json:"title,omitempty"`
	Generation *string     `json:"generation,omitempty"`
	Size       *int64      `json:"size,omitempty"`
	Mtime      *time.Time  `json:"mtime,omitempty"`
	State      *string     `json:"state,omitempty"`
	Changed    *time.Time  `json:"changed,omitempty"`
}

type recentObject struct {
	V        int          `json:"v"`
	Machine  string       `json:"machine"`
	Updated  time.Time    `json:"updated"`
	Base     time.Time    `json:"base"`
	Writer   *Writer      `json:"writer,omitempty"`
	Sessions []entryPatch `json:"sessions"`
	Blobs    []BlobEntry  `json:"blobs,omitempty"`
}

// EncodeRecent renders a recent object: its entries, in the order of the
// catalog's sessions and then by id, each as a patch over base's entry for
// the same session.
func EncodeRecent(recent Catalog, base *CatalogIndex) []byte {
	out := recentObject{V: 1, Machine: recent.Machine, Updated: recent.Updated, Base: recent.Base, Writer: recent.Writer, Blobs: sortedBlobs(recent.Blobs)}
	for _, e := range recent.Sessions {
		var b indexedEntry
		inBase := false
		if base != nil {
			b, inBase = base.entries[e.ID]
		}
		p := entryPatch{ID: e.ID}
		if inBase {
			n := b.pos
			p.ID, p.N = "", &n
		}
		diff := func(changed bool) bool { return !inBase || changed }
		if diff(b.Path != e.Path) {
			enc := EncodePath(e.Path)
			p.Path = &enc
		}
		patch(&p.Cwd, &e.Cwd, diff(b.Cwd != e.Cwd))
		if diff(!sameProject(b.Project, e.Project)) {
			p.Project = e.Project
			if p.Project == nil && inBase {
				p.Project = &project.ID{} // removed: the zero ID
			}
		}
		patch(&p.Title, &e.Title, diff(b.Title != e.Title))
		patch(&p.Generation, &e.Generation, diff(b.Generation != e.Generation))
		patch(&p.Size, &e.Size, diff(b.Size != e.Size))
		patch(&p.Mtime, &e.Mtime, diff(!b.Mtime.Equal(e.Mtime)))
		patch(&p.State, &e.State, diff(b.State != e.State))
		patch(&p.Changed, &e.Changed, diff(!b.Changed.Equal(e.Changed)))
		out.Sessions = append(out.Sessions, p)
	}
	pos := func(p entryPatch) int { // positions first, in order; then ids
		if p.N == nil {
			return math.MaxInt
		}
		return *p.N
	}
	slices.SortFunc(out.Sessions, func(a, b entryPatch) int { return cmp.Or(cmp.Compare(pos(a), pos(b)), cmp.Compare(a.ID, b.ID)) })
	b, _ := json.Marshal(out)
	return b
}

// DecodeRecent parses a recent object and lays each patch over base's entry
// for its session, then checks the result as DecodeCatalog checks entries.
// (A complete entry is a patch of every field, so recent objects written
// whole read the same.) Positions name base's sessions as stored, so a
// base that had entries refused takes no patch by position.
func DecodeRecent(b []byte, base Catalog) (Catalog, error) {
	var r recentObject
	if err := json.Unmarshal(b, &r); err != nil {
		return Catalog{}, fmt.Errorf("recent catalog changes: %w", err)
	}
	if err := checkStamp("recent catalog changes", r.V, r.Machine, r.Writer); err != nil {
		return Catalog{}, err
	}
	at := make(map[string]CatalogEntry, len(base.Sessions))
	for _, e := range base.Sessions {
		at[e.ID] = e
	}
	sorted := len(base.Refused) == 0 && slices.IsSortedFunc(base.Sessions, byID)
	c := Catalog{V: 1, Machine: r.Machine, Updated: r.Updated, Base: r.Base, Writer: r.Writer}
	refuse := func(why string) {
		c.Refused = append(c.Refused, fmt.Sprintf("recent catalog changes of %s: %s", r.Machine, why))
	}
	seen := make(map[string]bool, len(r.Sessions))
	for _, p := range r.Sessions {
		id := p.ID
		if p.N != nil {
			if !sorted || *p.N < 0 || *p.N >= len(base.Sessions) || id != "" && id != base.Sessions[*p.N].ID {
				refuse(fmt.Sprintf("a change names session number %d, which the catalog does not hold", *p.N))
				continue
			}
			id = base.Sessions[*p.N].ID
		}
		if seen[id] {
			refuse(fmt.Sprintf("session %q listed twice", id))
			continue
		}
		seen[id] = true
		e, ok := at[id]
		if !ok {
			e = CatalogEntry{ID: id}
		}
		if p.Path != nil {
			e.Path = DecodePath(*p.Path)
		}
		set(&e.Cwd, p.Cwd)
		if p.Project != nil {
			e.Project = p.Project
			if e.Project.Zero() {
				e.Project = nil
			}
		}
		set(&e.Title, p.Title)
		set(&e.Generation, p.Generation)
		set(&e.Size, p.Size)
		set(&e.Mtime, p.Mtime)
		set(&e.State, p.State)
		set(&e.Changed, p.Changed)
		if why := entryProblem(e); why != "" {
			refuse(why)
			continue
		}
		c.Sessions = append(c.Sessions, e)
	}
	c.Blobs = checkBlobs("recent catalog changes of "+r.Machine, r.Blobs, &c.Refused)
	return c, nil
}

func sameProject(a, b *project.ID) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// patch sets a patch's field to v when it changed.
func patch[T any](dst **T, v *T, changed bool) {
	if changed {
		*dst = v
	}
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}
