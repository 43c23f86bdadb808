package project

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ompsync/ompsync/atomicfile"
)

// Checkout is a local clone of a repository.
type Checkout struct {
	Root   string `json:"root"`
	Origin string `json:"origin"`
	// Used is when this machine last used it: its newest session, else
	// when git last touched its index.
	Used time.Time `json:"used"`
}

// Index is the checkouts this machine has, found under the roots the user
// names (projects.roots) and from the folders its own sessions ran in.
type Index struct {
	Scanned   time.Time  `json:"scanned"`
	Roots     []string   `json:"roots"`
	Checkouts []Checkout `json:"checkouts"`
	// Problems say where the scan stopped short (a limit, an unreadable
	// folder), for the user.
	Problems []string `json:"problems,omitempty"`
}

// Limits bound a scan of the roots: a home folder may hold a million
// folders, and a network mount may hang.
type Limits struct {
	Depth   int           // folders below a root
	Folders int           // visited, in all
	Time    time.Duration // in all
}

// DefaultLimits find a checkout at ~/a/b/c/d in a home of everyday size.
func DefaultLimits() Limits { return Limits{Depth: 4, Folders: 20000, Time: 3 * time.Second} }

// CacheFile is the index's file in the state dir; CacheAge how long it
// stands before a scan again.
const (
	CacheFile = "projects.json"
	CacheAge  = time.Hour
)

// Scan finds the git checkouts under roots: hidden folders are skipped,
// and so is the inside of a checkout (its submodules and vendored clones
// are part of it).
func Scan(ctx context.Context, roots []string, lim Limits) *Index {
	x := &Index{Scanned: time.Now().UTC(), Roots: roots}
	deadline := time.Now().Add(lim.Time)
	visited := 0
	for _, root := range roots {
		root = filepath.Clean(root)
		unreadable := 0
		stopped := ""
		var walk func(dir string, depth int)
		walk = func(dir string, depth int) {
			if stopped != "" {
				return
			}
			if visited >= lim.Folders {
				stopped = fmt.Sprintf("stopped after %d folders", lim.Folders)
				return
			}
			if ctx.Err() != nil || time.Now().After(deadline) {
				stopped = fmt.Sprintf("stopped after %s", lim.Time)
				return
			}
			visited++
			if top, origin := checkoutAt(dir); top {
				if origin != "" {
					x.Checkouts = append(x.Checkouts, Checkout{Root: dir, Origin: origin, Used: gitUsed(dir)})
				}
				return
			}
			if depth >= lim.Depth {
				return
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					unreadable++
				}
				return
			}
			for _, e := range entries {
				if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || e.Name() == "node_modules" {
					continue
				}
				walk(filepath.Join(dir, e.Name()), depth+1)
			}
		}
		walk(root, 0)
		switch {
		case stopped != "":
			x.Problems = append(x.Problems, fmt.Sprintf("projects.roots: the search for checkouts under %s %s; name the folders that hold your checkouts in projects.roots", root, stopped))
		case unreadable > 0:
			x.Problems = append(x.Problems, fmt.Sprintf("projects.roots: %d folders under %s could not be read and were skipped", unreadable, root))
		}
	}
	return x
}

// checkoutAt reports whether dir is the top of a git checkout, and its
// origin.
func checkoutAt(dir string) (bool, string) {
	cfg, ok := gitConfig(filepath.Join(dir, ".git"))
	if !ok {
		return false, ""
	}
	return true, originOf(cfg)
}

// gitUsed is when git last wrote the checkout's index (a commit, a
// checkout, a status): how recently it was worked in.
func gitUsed(root string) time.Time {
	if fi, err := os.Stat(filepath.Join(root, ".git", "index")); err == nil {
		return fi.ModTime().UTC()
	}
	return time.Time{}
}

// Add records that this machine used folder cwd, in the checkout of
// origin whose top is root, at t.
func (x *Index) Add(root, origin string, t time.Time) {
	for i := range x.Checkouts {
		if x.Checkouts[i].Root == root {
			x.Checkouts[i].Origin = origin
			if t.After(x.Checkouts[i].Used) {
				x.Checkouts[i].Used = t.UTC()
			}
			return
		}
	}
	x.Checkouts = append(x.Checkouts, Checkout{Root: root, Origin: origin, Used: t.UTC()})
}

// Of lists the checkouts of origin that still are, most recently used
// first.
func (x *Index) Of(origin string) []Checkout {
	var out []Checkout
	for _, c := range x.Checkouts {
		if c.Origin != origin {
			continue
		}
		if top, o := checkoutAt(c.Root); !top || o != origin {
			continue // gone, or cloned from elsewhere since
		}
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b Checkout) int { return b.Used.Compare(a.Used) })
	return out
}

// LoadIndex reads the index cached in stateDir, or scans roots when there
// is none, it is older than CacheAge or was made for other roots, and
// caches what it found. A cache that cannot be written costs a scan next
// time, nothing more.
func LoadIndex(ctx context.Context, stateDir string, roots []string, lim Limits) *Index {
	p := filepath.Join(stateDir, CacheFile)
	if b, err := readLimited(p, 16<<20); err == nil {
		var x Index
		if json.Unmarshal(b, &x) == nil && time.Since(x.Scanned) < CacheAge && slices.Equal(x.Roots, roots) {
			return &x
		}
	}
	x := Scan(ctx, roots, lim)
	if stateDir != "" {
		if b, err := json.Marshal(x); err == nil {
			_ = atomicfile.Write(p, b, atomicfile.Options{Perm: 0o600})
		}
	}
	return x
}
