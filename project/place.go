package project

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// How a session was placed on this machine.
const (
	SamePath   = "same path"   // its folder exists here as recorded
	InCheckout = "checkout"    // a checkout of the same repository here
	HomePath   = "home folder" // the same folder under this machine's home
	PathMap    = "path_map"    // a path_map pair
	Recorded   = "as recorded" // nothing matched: where it was recorded
)

// Placement is where a session recorded in folder From runs on this
// machine, and why.
type Placement struct {
	Cwd string // "" when the session records no folder
	How string // one of the constants above
	// Note says what else the user should know: which of several
	// checkouts was taken, or, placed as recorded, what to set.
	Note string
}

// Placer decides where another machine's session goes on this one.
type Placer struct {
	Home string // this machine's home folder
	// Machine is this machine's name: its own catalog tells which
	// checkouts it worked in (Learn).
	Machine string
	// Index is this machine's checkouts, nil for none.
	Index *Index
	// Maps are the path_map pairs, FROM=TO.
	Maps []Mapping
}

// Place finds the folder on this machine for a session recorded in cwd
// with project id, in order: the same folder when it exists here (and is
// not another repository's); the same folder inside a checkout of the same
// repository, the most recently used one when there are several; the same
// folder under this home (not another repository's either); a path_map
// pair (the user's word); else the folder as recorded.
func (pl *Placer) Place(cwd string, id ID) Placement {
	if cwd == "" {
		return Placement{How: Recorded}
	}
	if isDir(cwd) && filepath.IsAbs(cwd) && sameRepository(cwd, id) {
		return Placement{Cwd: cwd, How: SamePath}
	}
	if id.Problem() != "" {
		id = ID{} // a catalog refuses such an entry; never joined to a folder
	}
	if id.Origin != "" && pl.Index != nil {
		if cs := pl.Index.Of(id.Origin); len(cs) > 0 {
			dir := filepath.Join(cs[0].Root, filepath.FromSlash(id.Path))
			p := Placement{Cwd: dir, How: InCheckout}
			var notes []string
			if !isDir(dir) {
				p.Cwd = cs[0].Root
				notes = append(notes, fmt.Sprintf("%s has no folder %s; placed at its top", cs[0].Root, id.Path))
			}
			if len(cs) > 1 {
				others := make([]string, 0, len(cs)-1)
				for _, c := range cs[1:] {
					others = append(others, c.Root)
				}
				notes = append(notes, fmt.Sprintf("%d checkouts of %s here; took %s, used most recently (others: %s)", len(cs), id.Origin, cs[0].Root, strings.Join(others, ", ")))
			}
			p.Note = strings.Join(notes, "; ")
			return p
		}
	}
	if dir := pl.HomeFolder(id); dir != "" && sameRepository(dir, id) {
		return Placement{Cwd: dir, How: HomePath}
	}
	for _, m := range pl.Maps {
		if to, ok := m.apply(cwd); ok {
			return Placement{Cwd: to, How: PathMap}
		}
	}
	return Placement{Cwd: cwd, How: Recorded, Note: noMatch(cwd, id)}
}

// HomeFolder is the folder under this home that id records under its
// machine's home, "" when it records none or this home has no such folder.
func (pl *Placer) HomeFolder(id ID) string {
	if id.Home == "" || pl.Home == "" || id.Problem() != "" {
		return ""
	}
	dir := filepath.Join(pl.Home, filepath.FromSlash(id.Home))
	if !isDir(dir) {
		return ""
	}
	return dir
}

// sameRepository reports whether folder dir may be the one of a session in
// project id: not a checkout of another repository than id's.
func sameRepository(dir string, id ID) bool {
	_, origin := Repository(dir)
	return id.Origin == "" || origin == "" || origin == id.Origin
}

// noMatch says what to do about a session placed where it was recorded.
func noMatch(cwd string, id ID) string {
	switch {
	case id.Origin != "" && isDir(cwd):
		return fmt.Sprintf("no checkout of %s on this machine (%s here is another repository's): clone it under projects.roots, or set path_map (%s=<folder here>)", id.Origin, cwd, cwd)
	case id.Origin != "":
		return fmt.Sprintf("no checkout of %s and no folder %s on this machine: clone it under projects.roots, or set path_map (%s=<folder here>)", id.Origin, cwd, cwd)
	}
	return fmt.Sprintf("no folder %s on this machine: set path_map (%s=<folder here>)", cwd, cwd)
}

// safeRel reports whether rel stays below the folder it is joined to.
func safeRel(rel string) bool {
	return rel == "." || !strings.HasPrefix(rel, "/") && !strings.Contains(rel, "\\") && !strings.HasPrefix(path.Clean(rel), "..")
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// ParseMap reads a path_map pair, FROM=TO: two absolute folders, FROM of
// any platform (a session may come from Windows or macOS), TO of this one.
func ParseMap(s string) (Mapping, error) {
	from, to, ok := strings.Cut(s, "=")
	if !ok {
		return Mapping{}, fmt.Errorf("path map %q: want FROM=TO, e.g. /Users/ana=/home/ana", s)
	}
	from, to = cleanAny(from), cleanAny(to)
	if !absAny(from) || isRoot(from) {
		return Mapping{}, fmt.Errorf("path map %q: %q is not an absolute folder", s, from)
	}
	if !filepath.IsAbs(to) || isRoot(to) {
		return Mapping{}, fmt.Errorf("path map %q: %q is not an absolute folder on this machine", s, to)
	}
	return Mapping{From: from, To: to}, nil
}

// cleanAny cleans a path of either platform, keeping its separators.
func cleanAny(p string) string {
	p = strings.TrimSpace(p)
	if windowsStyle(p) {
		return strings.TrimRight(p, `\`)
	}
	return path.Clean(p)
}

func absAny(p string) bool {
	return strings.HasPrefix(p, "/") || len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') || strings.HasPrefix(p, `\\`)
}

func isRoot(p string) bool { return p == "/" || len(p) <= 3 && len(p) >= 2 && p[1] == ':' }

// apply maps folder p when it is From or below it.
func (m Mapping) apply(p string) (string, bool) {
	if p == m.From {
		return m.To, true
	}
	sep := "/"
	if windowsStyle(m.From) {
		sep = `\`
	}
	rest, ok := strings.CutPrefix(p, strings.TrimRight(m.From, sep)+sep)
	if !ok {
		return "", false
	}
	return filepath.Join(m.To, filepath.FromSlash(strings.ReplaceAll(rest, `\`, "/"))), true
}

// Use is a session this machine ran in folder Cwd, in project ID, last
// at Used: what its own catalog records.
type Use struct {
	Cwd  string
	ID   ID
	Used time.Time
}

// Learn is pl with the checkouts this machine's own sessions ran in added
// to its index (a checkout outside projects.roots, and which of several
// was used last). pl itself is not changed: one placer serves restores
// that run side by side.
func (pl *Placer) Learn(uses []Use) *Placer {
	out := *pl
	x := &Index{}
	if pl.Index != nil {
		x.Checkouts = append(x.Checkouts, pl.Index.Checkouts...)
	}
	for _, u := range uses {
		if u.ID.Origin == "" || u.ID.Problem() != "" || !filepath.IsAbs(u.Cwd) {
			continue
		}
		root := filepath.Clean(u.Cwd)
		if u.ID.Path != "" {
			r, ok := strings.CutSuffix(root, string(filepath.Separator)+filepath.FromSlash(u.ID.Path))
			if !ok {
				continue
			}
			root = r
		}
		x.Add(root, u.ID.Origin, u.Used)
	}
	out.Index = x
	return &out
}
