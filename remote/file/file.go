// Package file is the remote driver for a local folder: each key is a file at
// the same relative path, so a person can browse a backup with ls.
//
// Writes go to a hidden temp file (".tmp-*") in the object's folder, are
// fsynced, then renamed (or, for IfAbsent, hard-linked, which fails
// atomically when the key exists) into place, and the folder is fsynced: a
// crash leaves either the old object or the new one, never half of one.
// Listings never show temp files.
//
// Every operation resolves its key inside the root through an os.Root
// (openat with RESOLVE_BENEATH semantics), and refuses a key one of whose
// components is a symbolic link, naming it: a link planted in a shared or
// synced folder can never make a put write, a get read or a delete remove a
// file elsewhere. The root's own path may run through links (a user's
// ~/backup -> /mnt/nas/backup): that is where the user pointed ompsync.
package file

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/ompsync/ompsync/atomicfile"
	"github.com/ompsync/ompsync/remote"
)

// tmpPrefix marks files that are not (yet) objects.
const tmpPrefix = ".tmp-"

// lockName is the remote's lock file, at its root; List skips it (tmpPrefix)
// and never removes it.
const lockName = tmpPrefix + "lock"

// removeStale removes a temp file a put cut short by a kill left (one
// nobody wrote to for atomicfile.StaleAfter), as a listing walks past it:
// it is never an object, and it would keep its folder from being pruned.
// A put still writing one is younger; one that fails to go (a read-only
// folder) is left for a writer's listing.
func removeStale(r *os.Root, p string) {
	if fi, err := r.Lstat(p); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) >= atomicfile.StaleAfter {
		_ = r.Remove(p)
	}
}

// Client stores objects under a root folder.
type Client struct {
	root string
	// opened is the root folder as New found it: a root that is no longer
	// that folder (its disk unmounted, and the mount point, or a folder
	// made there since, in its place) is refused, not written into.
	opened fs.FileInfo
}

var _ remote.Client = (*Client)(nil)

// New returns a client for the existing folder dir.
func New(dir string) (*Client, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file remote %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("file remote: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("file remote %s: not a folder", abs)
	}
	return &Client{root: abs, opened: fi}, nil
}

// openRoot opens the root for one operation, which resolves every path
// through it so nothing outside the root is reached. It refuses when the
// root is gone or is another folder than the one New opened: what a put
// would write there would be on the disk below an unmounted one, and a
// listing there would show every object lost. Transient: once the disk is
// back, the same calls work. Opening per operation (not once in New) keeps
// that check on the folder at the path now, not on a handle to a folder
// since unmounted.
func (c *Client) openRoot(op, key string) (*os.Root, error) {
	r, err := os.OpenRoot(c.root)
	if err == nil {
		fi, serr := r.Stat(".")
		if serr == nil && os.SameFile(fi, c.opened) {
			return r, nil
		}
		r.Close()
	}
	why := "is gone"
	if err == nil {
		why = "is not the folder it was when ompsync started"
	}
	return nil, &remote.Error{Op: op, Key: key, Transient: true,
		Err: fmt.Errorf("remote folder %s %s: is its disk unmounted? Nothing is read or written there until it is back", c.root, why)}
}

// noLinks refuses key when one of its components that exists is a symbolic
// link. The os.Root already keeps every access inside the root; this makes
// a link inside it an error that names it rather than an object read,
// replaced or deleted through it.
func noLinks(r *os.Root, op, key string) error {
	for i := 0; i <= len(key); i++ {
		if i < len(key) && key[i] != '/' {
			continue
		}
		fi, err := r.Lstat(filepath.FromSlash(key[:i]))
		if err != nil {
			return nil // missing (or unreadable): the operation says what
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return linkError(op, key, key[:i])
		}
		if !fi.IsDir() {
			return nil
		}
	}
	return nil
}

// linkError names the link as a key path relative to the remote.
func linkError(op, key, link string) error {
	return &remote.Error{Op: op, Key: key, Err: fmt.Errorf("%q in the remote folder is a symbolic link: ompsync does not follow links there (a link could lead a read, write or delete outside the folder); replace it with the file or folder it points to, or remove it", link)}
}

// check validates key and ctx before an operation and opens the root for
// it; the caller closes the root.
func (c *Client) check(ctx context.Context, op, key string) (*os.Root, error) {
	if err := remote.CheckOp(ctx, op, key); err != nil {
		return nil, err
	}
	for seg := range strings.SplitSeq(key, "/") {
		if strings.HasPrefix(seg, tmpPrefix) {
			return nil, &remote.Error{Op: op, Key: key, Err: errors.New("key segments must not start with " + tmpPrefix)}
		}
	}
	r, err := c.openRoot(op, key)
	if err != nil {
		return nil, err
	}
	if err := noLinks(r, op, key); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// fail wraps a file system error. Paths are made relative to the root so
// messages name keys, not the layout of the machine.
func fail(op, key string, err error) error {
	return &remote.Error{Op: op, Key: key, Err: unwrapPath(err)}
}

// Put writes data to key atomically.
func (c *Client) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	return c.put(ctx, key, opts, bytes.NewReader(data))
}

// PutReader writes size bytes of r to key atomically. The bytes are
// checked against a first pass over r as they are copied, as a server
// checks a checksum: a source that changed in between stores nothing.
func (c *Client) PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts remote.PutOptions) error {
	if err := remote.CheckOp(ctx, "put", key); err != nil {
		return err
	}
	sums, err := remote.SumsFor(ctx, r, size, false, opts.Sums)
	if err != nil {
		return fail("put", key, err)
	}
	return c.put(ctx, key, opts, remote.CheckedReader(r, size, sums))
}

// put writes src to a temp file, then moves it to key.
func (c *Client) put(ctx context.Context, key string, opts remote.PutOptions, src io.Reader) error {
	r, err := c.check(ctx, "put", key)
	if err != nil {
		return err
	}
	defer r.Close()
	p := filepath.FromSlash(key)
	dir := filepath.Dir(p)
	var f *os.File
	var tmp string
	for try := 0; ; try++ {
		err := mkdirs(r, dir)
		if err == nil {
			f, tmp, err = createTemp(r, dir)
		}
		if err == nil {
			break
		}
		// A concurrent Delete may prune the folder we just made; make it again.
		if !errors.Is(err, fs.ErrNotExist) || try >= 10 {
			return fail("put", key, conflictHint(err))
		}
	}
	defer r.Remove(tmp) // no-op after a rename; clears the temp file otherwise
	_, err = io.Copy(f, src)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail("put", key, err)
	}
	if err := ctx.Err(); err != nil {
		return &remote.Error{Op: "put", Key: key, Err: err}
	}
	if opts.IfAbsent {
		// link(2) fails with EEXIST if the name exists: the check and the
		// write are one atomic step.
		if err := r.Link(tmp, p); err != nil {
			if errors.Is(err, fs.ErrExist) {
				if fi, serr := r.Lstat(p); serr == nil && fi.IsDir() {
					return fail("put", key, errors.New("a folder of other keys has this name"))
				}
				return &remote.Error{Op: "put", Key: key, Err: remote.ErrPreconditionFailed}
			}
			return fail("put", key, err)
		}
	} else if err := replace(r, tmp, p, key, opts.IfMatch); err != nil {
		return err
	}
	if err := syncDir(r, dir); err != nil {
		return fail("put", key, err)
	}
	return nil
}

// replace renames tmp over the object at p. Replacing an object holds the
// remote's lock, which an IfMatch put holds from its check of the object's
// ETag to its rename: no other replacement slips between the two, in this
// process or another.
func replace(r *os.Root, tmp, p, key, ifMatch string) error {
	if _, err := r.Lstat(p); err == nil || ifMatch != "" {
		unlock, err := lockRoot(r)
		if err != nil {
			return fail("put", key, err)
		}
		defer unlock()
	}
	if ifMatch != "" {
		fi, err := r.Lstat(p)
		if err != nil {
			return notFound("put", key, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return linkError("put", key, key)
		}
		if tag := etag(fi); tag == "" || tag != ifMatch {
			return &remote.Error{Op: "put", Key: key, Err: remote.ErrPreconditionFailed}
		}
	}
	if err := r.Rename(tmp, p); err != nil {
		return fail("put", key, conflictHint(err))
	}
	return nil
}

// conflictHint explains the errors a key/folder name clash produces.
func conflictHint(err error) error {
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) || errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w (a key cannot also be a folder of other keys)", err)
	}
	return err
}

// createTemp creates a new temp file in dir below the root, as
// os.CreateTemp does (which an os.Root lacks). Its name is 128 random bits:
// two never meet, and O_EXCL would refuse the second.
func createTemp(r *os.Root, dir string) (*os.File, string, error) {
	name := filepath.Join(dir, tmpPrefix+rand.Text())
	f, err := r.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	return f, name, err
}

// mkdirs creates dir and its missing parents (mode 0700) below the root,
// then fsyncs every folder above dir so the new ones survive a crash.
func mkdirs(r *os.Root, dir string) error {
	if fi, err := r.Lstat(dir); err == nil {
		if !fi.IsDir() {
			return syscall.ENOTDIR
		}
		return nil
	}
	if err := r.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for d := dir; d != "."; d = filepath.Dir(d) {
		if err := syncDir(r, filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// syncDir makes a folder's entries durable. Some file systems cannot fsync
// a folder; that is not worth failing a write for.
func syncDir(r *os.Root, dir string) error {
	d, err := r.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		return nil
	}
	return err
}

// Get opens key for reading from offset; length < 0 reads to the end.
// Reading past the end yields no bytes.
func (c *Client) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if offset < 0 {
		return nil, &remote.Error{Op: "get", Key: key, Err: errors.New("negative offset")}
	}
	r, err := c.check(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	defer r.Close() // f stays open without it
	f, err := r.Open(filepath.FromSlash(key))
	if err != nil {
		return nil, notFound("get", key, err)
	}
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		f.Close()
		return nil, &remote.Error{Op: "get", Key: key, Err: remote.ErrNotFound}
	}
	if err == nil && offset > 0 {
		_, err = f.Seek(offset, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, fail("get", key, err)
	}
	var rc io.ReadCloser = f
	if length >= 0 {
		rc = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(f, length), f}
	}
	return remote.ContextBody(ctx, rc), nil
}

// notFound maps a missing file (or a path through a file) to ErrNotFound.
func notFound(op, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return &remote.Error{Op: op, Key: key, Err: remote.ErrNotFound}
	}
	return fail(op, key, err)
}

// Stat returns key's size and modification time.
func (c *Client) Stat(ctx context.Context, key string) (remote.ObjectInfo, error) {
	r, err := c.check(ctx, "stat", key)
	if err != nil {
		return remote.ObjectInfo{}, err
	}
	defer r.Close()
	fi, err := r.Stat(filepath.FromSlash(key))
	if err != nil {
		return remote.ObjectInfo{}, notFound("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		return remote.ObjectInfo{}, &remote.Error{Op: "stat", Key: key, Err: remote.ErrNotFound}
	}
	return remote.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime(), ETag: etag(fi)}, nil
}

// Delete removes key and then every folder it leaves empty, up to the root.
func (c *Client) Delete(ctx context.Context, key string) error {
	r, err := c.check(ctx, "delete", key)
	if err != nil {
		return err
	}
	defer r.Close()
	p := filepath.FromSlash(key)
	fi, err := r.Lstat(p)
	if err != nil {
		if err = notFound("delete", key, err); errors.Is(err, remote.ErrNotFound) {
			return nil
		}
		return err
	}
	if fi.IsDir() {
		return nil // a folder of other keys; there is no object by this name
	}
	if err := r.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail("delete", key, err)
	}
	dir := filepath.Dir(p)
	for dir != "." && r.Remove(dir) == nil {
		dir = filepath.Dir(dir)
	}
	if err := syncDir(r, dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail("delete", key, err)
	}
	return nil
}

// List walks the folder tree in S3's order: lexical by full key. Within a
// folder that means sorting sub-folders as "name/", so "a-b" < "a/x" < "a0".
func (c *Client) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	return func(yield func(remote.ObjectInfo, error) bool) {
		if err := remote.CheckOp(ctx, "list", prefix); err != nil {
			yield(remote.ObjectInfo{}, err)
			return
		}
		r, err := c.openRoot("list", prefix)
		if err != nil {
			yield(remote.ObjectInfo{}, err)
			return
		}
		defer r.Close()
		l := lister{r: r, ctx: ctx, prefix: prefix, opts: opts, yield: yield}
		base := prefix[:strings.LastIndex(prefix, "/")+1] // the folder the prefix is in
		if err := l.walk(base); err != nil && !errors.Is(err, errStop) {
			yield(remote.ObjectInfo{}, err)
		}
	}
}

var errStop = errors.New("stop listing")

type lister struct {
	r      *os.Root
	ctx    context.Context
	prefix string
	opts   remote.ListOptions
	yield  func(remote.ObjectInfo, error) bool
	lastCP string // the common prefix yielded last, to yield each once
}

type entry struct {
	key string // full key; folders end in "/"
	de  fs.DirEntry
}

// walk yields what the folder dirKey ("" or "a/b/") holds that the prefix
// and StartAfter select, in key order. A folder the delimiter folds into
// a common prefix yields it at its first object, and the rest of it is
// skipped: every key under it folds into that prefix.
func (l *lister) walk(dirKey string) error {
	des, err := fs.ReadDir(l.r.FS(), cmp.Or(strings.TrimSuffix(dirKey, "/"), "."))
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return nil // nothing under this prefix; or it vanished under a Delete
	case errors.Is(err, fs.ErrPermission) && l.groupOf(dirKey) != "":
		// A folder this user cannot read (a disk's lost+found, owned by
		// root) may hold objects: it is yielded as the prefix it folds
		// into, as S3 would list it, and a read under it fails there,
		// where what it is for is known.
		return l.yieldPrefix(l.groupOf(dirKey))
	case err != nil:
		return &remote.Error{Op: "list", Key: l.prefix, Err: fmt.Errorf("read folder %q: %w", dirKey, unwrapPath(err))}
	}
	ents := make([]entry, 0, len(des))
	for _, de := range des {
		switch name, t := de.Name(), de.Type(); {
		case strings.HasPrefix(name, tmpPrefix):
			if name != lockName && t.IsRegular() {
				removeStale(l.r, filepath.FromSlash(dirKey+name))
			}
		case de.IsDir():
			ents = append(ents, entry{dirKey + name + "/", de})
		case t.IsRegular() || t&fs.ModeSymlink != 0:
			// A link is never followed, and skipping it silently would make
			// what it stands for look lost: the listing fails at it.
			ents = append(ents, entry{dirKey + name, de})
		}
		// Other special files (sockets, fifos) are not objects.
	}
	slices.SortFunc(ents, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	for _, e := range ents {
		if err := l.ctx.Err(); err != nil {
			return &remote.Error{Op: "list", Key: l.prefix, Err: err}
		}
		dir, sa := e.de.IsDir(), l.opts.StartAfter
		in := strings.HasPrefix(e.key, l.prefix)
		cp := l.groupOf(e.key)
		var err error
		switch {
		case !dir && (!in || e.key <= sa),
			dir && !in && !strings.HasPrefix(l.prefix, e.key),  // not on the way to the prefix
			dir && sa > e.key && !strings.HasPrefix(sa, e.key): // StartAfter sorts after all in it
		case e.de.Type()&fs.ModeSymlink != 0 && (cp == "" || cp != l.lastCP || l.groupOf(dirKey) == ""):
			// A link is refused wherever it is listed, but inside a
			// folder folded into a prefix already yielded, which is not read.
			return linkError("list", l.prefix, e.key)
		case cp != "" && cp == l.lastCP: // folded into the prefix yielded last
		case dir:
			err = l.walk(e.key)
		case cp != "":
			err = l.yieldPrefix(cp)
		default:
			err = l.object(e)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// groupOf returns the common prefix the delimiter folds key (an object's,
// or a folder's ending in "/") into, or "" when it folds it into none.
func (l *lister) groupOf(key string) string {
	d := l.opts.Delimiter
	if d == "" || !strings.HasPrefix(key, l.prefix) {
		return ""
	}
	i := strings.Index(key[len(l.prefix):], d)
	if i < 0 {
		return ""
	}
	return key[:len(l.prefix)+i+len(d)]
}

// yieldPrefix yields the common prefix cp, once.
func (l *lister) yieldPrefix(cp string) error {
	l.lastCP = cp
	if !l.yield(remote.ObjectInfo{Key: cp, Prefix: true}, nil) {
		return errStop
	}
	return nil
}

// object yields the object e.
func (l *lister) object(e entry) error {
	fi, err := e.de.Info()
	if errors.Is(err, fs.ErrNotExist) {
		return nil // deleted while we listed
	}
	if err != nil {
		return &remote.Error{Op: "list", Key: l.prefix, Err: unwrapPath(err)}
	}
	if !l.yield(remote.ObjectInfo{Key: e.key, Size: fi.Size(), ModTime: fi.ModTime()}, nil) {
		return errStop
	}
	return nil
}

// unwrapPath drops the path a file system error names.
func unwrapPath(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}

// Backend serves file:///absolute/folder URLs.
var Backend = remote.Backend{Scheme: "file", Form: "file:///absolute/folder", Parse: parseURL,
	Open: func(_ context.Context, loc remote.Location, _ remote.S3Config) (remote.Client, error) {
		if err := makeFolder(loc.Dir); err != nil {
			return nil, err
		}
		return New(loc.Dir)
	}}

func parseURL(u *url.URL) (remote.Location, error) {
	switch {
	case u.Host != "" && u.Host != "localhost":
		return remote.Location{}, errors.New("a file URL takes an absolute path after file:// (three slashes)")
	case u.RawQuery != "" || u.Fragment != "":
		return remote.Location{}, errors.New("a file URL takes no query or fragment")
	case u.Path == "" || !strings.HasPrefix(u.Path, "/"):
		return remote.Location{}, errors.New("a file URL needs an absolute path")
	case strings.ContainsFunc(u.Path, unicode.IsControl):
		return remote.Location{}, errors.New("the path has a control character")
	}
	return remote.Location{Scheme: "file", Dir: remote.FileDir(u.Path)}, nil
}

// makeFolder creates a file remote's folder when it is missing, and only
// when its parent exists. A folder on a disk that is not mounted must not
// be made again on the disk below, with every session uploaded into it
// while the user believes they are on the other disk.
func makeFolder(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("remote folder %s is a file, not a folder", dir)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("remote folder: %w", err)
	}
	parent := filepath.Dir(dir)
	if _, err := os.Stat(parent); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remote folder %s cannot be created: its parent %s does not exist: is the disk mounted? (to keep the remote there, create %s first)", dir, parent, parent)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create remote folder: %w", err)
	}
	return nil
}
