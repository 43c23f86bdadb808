// Package project knows which project a session belongs to, whatever
// machine it was written on: the git repository its working folder is in
// (by the repository's origin URL), the folder inside that repository, and
// the folder relative to the home folder. A session backed up on one
// machine is placed on another in that machine's checkout of the same
// project (Placer), and the paths the session records are rewritten for it
// and back (Mapping), so the copies on both machines stay one session.
//
// It reads the file system only: no git binary, no network.
package project

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ID is what a machine records of a session's project when it backs the
// session up (the catalog's "project"; docs/FORMAT.md). Every field may be
// empty.
type ID struct {
	// Origin is the repository's origin URL, normalised: no scheme, no
	// credentials, no port, no trailing ".git" (github.com/acme/app).
	Origin string `json:"origin,omitempty"`
	// Path is the working folder inside the repository, slash-separated,
	// "" at its top.
	Path string `json:"path,omitempty"`
	// Home is the working folder relative to the home folder,
	// slash-separated, when it is under it ("." for the home itself).
	Home string `json:"home,omitempty"`
}

// Zero reports whether id records nothing.
func (id ID) Zero() bool { return id == ID{} }

// String is how ls and history show a project: origin and path, or the
// home-relative folder.
func (id ID) String() string {
	switch {
	case id.Origin != "" && id.Path != "":
		return id.Origin + "//" + id.Path
	case id.Origin != "":
		return id.Origin
	case id.Home != "":
		return "~/" + strings.TrimPrefix(id.Home, ".")
	}
	return ""
}

// maxConfig bounds how much of a git config file is read: real ones are a
// few KiB.
const maxConfig = 1 << 20

// maxUp bounds how many parent folders are searched for a repository.
const maxUp = 64

// Identify records the project of working folder cwd on this machine, whose
// home folder is home. A folder that does not exist here gives only the
// home-relative part (it was recorded elsewhere, or has gone).
func Identify(cwd, home string) ID {
	var id ID
	if cwd == "" || !filepath.IsAbs(cwd) {
		return id
	}
	cwd = filepath.Clean(cwd)
	if home != "" {
		if rel, ok := Under(filepath.Clean(home), cwd); ok {
			id.Home = filepath.ToSlash(rel)
		}
	}
	if !isDir(cwd) {
		return id
	}
	if top, origin := Repository(cwd); top != "" && origin != "" {
		id.Origin = origin
		if rel, ok := Under(top, cwd); ok && rel != "." {
			id.Path = filepath.ToSlash(rel)
		}
	}
	return id
}

// RealPath is p with its symlinks resolved, as an agent's getcwd or
// realpath gives it, or p when it cannot be resolved.
func RealPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// Under reports whether p is root or below it, and p relative to root.
func Under(root, p string) (string, bool) {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}

// Repository finds the git repository dir is in: its top folder and its
// normalised origin ("" when it has none). top is "" outside a repository.
func Repository(dir string) (top, origin string) {
	for range maxUp {
		if ok, origin := checkoutAt(dir); ok {
			return dir, origin
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", ""
}

// gitConfig finds the config file of the repository whose .git entry is
// dotgit: a folder, or a file "gitdir: X" (a worktree or submodule, whose
// config is in X, or in X's commondir for a worktree).
func gitConfig(dotgit string) (string, bool) {
	fi, err := os.Stat(dotgit)
	if err != nil {
		return "", false
	}
	if fi.IsDir() {
		return filepath.Join(dotgit, "config"), true
	}
	b, err := readLimited(dotgit, 4096)
	if err != nil {
		return "", false
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return "", false
	}
	gitdir = strings.TrimSpace(gitdir)
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(filepath.Dir(dotgit), gitdir)
	}
	if c, err := readLimited(filepath.Join(gitdir, "commondir"), 4096); err == nil {
		common := strings.TrimSpace(string(c))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitdir, common)
		}
		return filepath.Join(common, "config"), true
	}
	return filepath.Join(gitdir, "config"), true
}

func readLimited(p string, n int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

// originOf reads the url of [remote "origin"] from a git config file.
func originOf(cfg string) string {
	b, err := readLimited(cfg, maxConfig)
	if err != nil {
		return ""
	}
	in := false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			in = strings.EqualFold(strings.Join(strings.Fields(line), " "), `[remote "origin"]`)
			continue
		}
		if !in {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "url") {
			return NormalizeOrigin(strings.Trim(strings.TrimSpace(v), `"`))
		}
	}
	return ""
}

// NormalizeOrigin turns the forms of one repository's URL into one:
// https://user:token@GitHub.com/acme/app.git, git@github.com:acme/app and
// ssh://git@github.com:22/acme/app/ all become github.com/acme/app. The
// credentials a URL may carry are dropped here, before anything stores or
// logs it. A local path stays a path (cleaned, without ".git").
func NormalizeOrigin(u string) string {
	u = strings.TrimSpace(u)
	if u == "" {
		return ""
	}
	host, p := "", u
	if scheme, rest, ok := strings.Cut(u, "://"); ok || isSCP(u) {
		sep := "/"
		if !ok {
			rest, sep = u, ":" // [user@]host:path
		}
		// Everything to the last "@" may be credentials (a password can
		// hold "/"): a path with "@" in it loses its start, the same way
		// on every machine, and no secret is kept.
		host, p, _ = strings.Cut(rest[strings.LastIndex(rest, "@")+1:], sep)
		if scheme == "file" {
			host, p = "", "/"+p
		}
	}
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h // the port: https and ssh reach one repository on two
	}
	host = strings.ToLower(host)
	p = strings.TrimSuffix(strings.TrimRight(p, "/"), ".git")
	if host == "" {
		if p == "" {
			return ""
		}
		return path.Clean(filepath.ToSlash(p))
	}
	p = strings.Trim(path.Clean("/"+p), "/")
	if p == "" || p == "." {
		return host
	}
	return host + "/" + p
}

// isSCP reports whether u is git's scp-like form, host:path (no "//", a
// colon before any slash, and not a Windows drive letter).
func isSCP(u string) bool {
	colon := strings.Index(u, ":")
	slash := strings.Index(u, "/")
	if colon <= 1 { // "C:" is a drive
		return false
	}
	return slash < 0 || colon < slash
}

// maxField bounds each field a catalog may give: paths and URLs are far
// shorter.
const maxField = 4096

// Problem says what is wrong with an ID read from a remote, or "": a
// field too long or with control characters, or a folder that climbs out
// of the folder it is taken below.
func (id ID) Problem() string {
	for _, f := range []string{id.Origin, id.Path, id.Home} {
		if len(f) > maxField {
			return fmt.Sprintf("a project field of %d bytes", len(f))
		}
		if strings.ContainsFunc(f, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return "a project field with control characters"
		}
	}
	for _, rel := range []string{id.Path, id.Home} {
		if rel != "" && !safeRel(rel) {
			return fmt.Sprintf("project folder %q climbs out of the project", rel)
		}
	}
	return ""
}
