package file_test

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/atomicfile"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
)

func newClient(t *testing.T) *file.Client {
	t.Helper()
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConformance(t *testing.T) {
	remotetest.Run(t, func(t *testing.T) remote.Client { return newClient(t) })
}

func TestNewNeedsAFolder(t *testing.T) {
	if _, err := file.New(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("New on a missing folder: no error")
	}
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := file.New(f); err == nil {
		t.Error("New on a file: no error")
	}
}

// A person can find objects with ls: keys are paths, with private modes.
func TestLayoutOnDisk(t *testing.T) {
	c := newClient(t)
	remotetest.Put(t, c, "v1/sessions/abc/m1/0000-0010.zst", []byte("chunk"))
	p := filepath.Join(c.Root(), "v1", "sessions", "abc", "m1", "0000-0010.zst")
	got, err := os.ReadFile(p)
	if err != nil || string(got) != "chunk" {
		t.Fatalf("read %s: %q, %v", p, got, err)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("object mode %v, want 0600", fi.Mode().Perm())
	}
	for _, d := range []string{"v1", "v1/sessions", "v1/sessions/abc", "v1/sessions/abc/m1"} {
		fi, err := os.Stat(filepath.Join(c.Root(), d))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("folder %s mode %v, want 0700", d, fi.Mode().Perm())
		}
	}
	if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 1 {
		t.Errorf("folder holds %d entries after a put, want 1 (no temp file left)", len(ents))
	}
}

// Temp files of an interrupted put are never listed, and a stray file a
// user drops in is.
func TestTempFilesHidden(t *testing.T) {
	c := newClient(t)
	remotetest.Put(t, c, "a/x", []byte("x"))
	for _, p := range []string{".tmp-123", "a/.tmp-456"} {
		if err := os.WriteFile(filepath.Join(c.Root(), p), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, opts := range []remote.ListOptions{{}, {Delimiter: "/"}} {
		got := remotetest.Keys(t, c, "", opts)
		want := []string{"a/x"}
		if opts.Delimiter != "" {
			want = []string{"a/ (prefix)"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("list %+v = %q, want %q", opts, got, want)
		}
	}
	if err := c.Put(t.Context(), "a/.tmp-456", []byte("x"), remote.PutOptions{}); err == nil {
		t.Error("put of a key that looks like a temp file: no error")
	}
}

// A listing walking past a temp file a killed put left a day ago removes
// it; a young one (a put in progress) and the remote's lock stay, and
// neither is ever listed.
func TestStaleTempFilesRemoved(t *testing.T) {
	c := newClient(t)
	remotetest.Put(t, c, "a/x", []byte("x"))
	old := time.Now().Add(-atomicfile.StaleAfter - time.Minute)
	path := func(p string) string { return filepath.Join(c.Root(), p) }
	for _, p := range []string{"a/.tmp-old", "a/.tmp-young", ".tmp-lock"} {
		if err := os.WriteFile(path(p), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"a/.tmp-old", ".tmp-lock"} {
		if err := os.Chtimes(path(p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if got := remotetest.Keys(t, c, "", remote.ListOptions{}); !slices.Equal(got, []string{"a/x"}) {
		t.Errorf("list = %q, want only a/x", got)
	}
	if _, err := os.Stat(path("a/.tmp-old")); err == nil {
		t.Error("the day-old temp file is still there")
	}
	for _, p := range []string{"a/.tmp-young", ".tmp-lock"} {
		if _, err := os.Stat(path(p)); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}

// Delete removes folders it leaves empty, but not the root or folders that
// still hold objects.
func TestDeletePrunesFolders(t *testing.T) {
	c := newClient(t)
	remotetest.Put(t, c, "a/b/c/d", []byte("d"))
	remotetest.Put(t, c, "a/keep", []byte("k"))
	if err := c.Delete(t.Context(), "a/b/c/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.Root(), "a", "b")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a/b still there after its last object went: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.Root(), "a", "keep")); err != nil {
		t.Errorf("a/keep: %v", err)
	}
	if err := c.Delete(t.Context(), "a/keep"); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(c.Root())
	if err != nil {
		t.Fatalf("root gone: %v", err)
	}
	if len(ents) != 0 {
		t.Errorf("root holds %d entries after deleting everything", len(ents))
	}
}

// A key is an object or a folder of other keys, never both (as on versitygw).
func TestKeyFolderClash(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	remotetest.Put(t, c, "a/b", []byte("b"))
	for _, ifAbsent := range []bool{false, true} {
		err := c.Put(ctx, "a", []byte("a"), remote.PutOptions{IfAbsent: ifAbsent})
		if err == nil || errors.Is(err, remote.ErrPreconditionFailed) || remote.IsTransient(err) {
			t.Errorf("put over a folder (IfAbsent=%t): err = %v, want a permanent conflict", ifAbsent, err)
		}
	}
	if err := c.Put(ctx, "a/b/c", []byte("c"), remote.PutOptions{}); err == nil {
		t.Error("put below an object: no error")
	}
	if err := c.Delete(ctx, "a"); err != nil {
		t.Errorf("delete of a folder name: %v", err)
	}
	if got := remotetest.Get(t, c, "a/b", 0, -1); string(got) != "b" {
		t.Errorf("a/b = %q after clashes", got)
	}
}

// Keys cannot reach outside the folder, even through a symlink planted in it.
func TestNoEscape(t *testing.T) {
	outside := t.TempDir()
	c := newClient(t)
	if err := os.Symlink(outside, filepath.Join(c.Root(), "link")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"../x", "a/../../x", "/etc/passwd", "link/x"} {
		if err := c.Put(t.Context(), k, []byte("x"), remote.PutOptions{}); err == nil {
			t.Errorf("put %q: no error", k)
		}
	}
	for _, err := range c.List(t.Context(), "", remote.ListOptions{}) {
		if err == nil || !strings.Contains(err.Error(), `"link"`) {
			t.Errorf("list through a symlink = %v, want an error naming it", err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("files appeared outside the folder: %v", ents)
	}
}

// snapshot records every file under dir with its bytes.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			m[rel] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		m[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Symlinks planted inside a shared remote folder, at a chunk, a catalog
// and a machine's folder: no operation reads, writes or deletes a byte
// outside the folder, and each error names the link. The root's own path
// runs through a symlinked parent, which the user chose, and works.
func TestPlantedSymlinks(t *testing.T) {
	ctx := t.Context()
	top := t.TempDir()
	real := filepath.Join(top, "nas", "backup")
	outside := filepath.Join(top, "outside")
	for _, d := range []string{real, filepath.Join(outside, "machine")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string]string{"chunk": "secret chunk", "catalog": "secret catalog", "machine/catalog": "other catalog"} {
		if err := os.WriteFile(filepath.Join(outside, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The configured root is reached through a symlinked parent.
	if err := os.Symlink(filepath.Join(top, "nas"), filepath.Join(top, "mnt")); err != nil {
		t.Fatal(err)
	}
	c, err := file.New(filepath.Join(top, "mnt", "backup"))
	if err != nil {
		t.Fatal(err)
	}
	remotetest.Put(t, c, "v1/machines/m1/catalog", []byte("ok"))
	if got := remotetest.Get(t, c, "v1/machines/m1/catalog", 0, -1); string(got) != "ok" {
		t.Fatalf("through a symlinked parent: get = %q", got)
	}
	chunk := "v1/sessions/s1/m1/session/1/0-10"
	catalog := "v1/machines/m2/catalog"
	machine := "v1/machines/m3"
	plant := map[string]string{chunk: "chunk", catalog: "catalog", machine: "machine"}
	for key, target := range plant {
		p := filepath.Join(real, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(outside, target), p); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, outside)
	cases := []struct{ key, link string }{
		{chunk, chunk},
		{catalog, catalog},
		{machine + "/catalog", machine},
		{machine + "/recent", machine},
	}
	for _, tc := range cases {
		named := func(what string, err error) {
			t.Helper()
			if err == nil || !strings.Contains(err.Error(), strconv.Quote(tc.link)+" in the remote folder is a symbolic link") {
				t.Errorf("%s %s = %v, want an error naming %q", what, tc.key, err, tc.link)
			}
			if err != nil && strings.Contains(err.Error(), top) {
				t.Errorf("%s %s: the error shows the machine's paths: %v", what, tc.key, err)
			}
		}
		rc, err := c.Get(ctx, tc.key, 0, -1)
		if err == nil {
			rc.Close()
		}
		named("get", err)
		_, err = c.Stat(ctx, tc.key)
		named("stat", err)
		named("put", c.Put(ctx, tc.key, []byte("overwritten"), remote.PutOptions{}))
		named("put if absent", c.Put(ctx, tc.key, []byte("overwritten"), remote.PutOptions{IfAbsent: true}))
		named("put if match", c.Put(ctx, tc.key, []byte("overwritten"), remote.PutOptions{IfMatch: "x"}))
		named("delete", c.Delete(ctx, tc.key))
	}
	for _, prefix := range []string{"", "v1/machines/", "v1/sessions/s1/"} {
		var listErr error
		for _, err := range c.List(ctx, prefix, remote.ListOptions{}) {
			if err != nil {
				listErr = err
			}
		}
		if listErr == nil || !strings.Contains(listErr.Error(), "is a symbolic link") {
			t.Errorf("list %q = %v, want an error naming a link", prefix, listErr)
		}
	}
	// A delimiter that folds the link into a prefix already yielded
	// (v1/machines/m for m1/catalog, then the link m2/catalog) still names it.
	var foldErr error
	for _, err := range c.List(ctx, "v1/machines/", remote.ListOptions{Delimiter: "m"}) {
		if err != nil {
			foldErr = err
		}
	}
	if foldErr == nil || !strings.Contains(foldErr.Error(), "is a symbolic link") {
		t.Errorf("list folding the link into a prefix yielded = %v, want an error naming a link", foldErr)
	}
	if after := snapshot(t, outside); !maps.Equal(before, after) {
		t.Errorf("files outside the remote changed:\nbefore %q\nafter  %q", before, after)
	}
	for key := range plant {
		if fi, err := os.Lstat(filepath.Join(real, filepath.FromSlash(key))); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("the link at %s was removed or replaced: %v", key, err)
		}
	}
	// The rest of the remote still works.
	remotetest.Put(t, c, "v1/machines/m1/recent", []byte("r"))
	if err := c.Delete(ctx, "v1/machines/m1/recent"); err != nil {
		t.Fatal(err)
	}
}

// Racing puts and deletes in one folder: a put never fails because a delete
// pruned the folder under it.
func TestPutDeleteRace(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	for i := range 200 {
		done := make(chan error, 1)
		go func() { done <- c.Put(ctx, "race/f/one", []byte{byte(i)}, remote.PutOptions{}) }()
		remotetest.Put(t, c, "race/f/two", []byte("2"))
		if err := c.Delete(ctx, "race/f/two"); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("put racing a delete: %v", err)
		}
		if got := remotetest.Get(t, c, "race/f/one", 0, -1); !bytes.Equal(got, []byte{byte(i)}) {
			t.Fatalf("race/f/one = %v, want %v", got, i)
		}
		if err := c.Delete(ctx, "race/f/one"); err != nil {
			t.Fatal(err)
		}
	}
}

func BenchmarkPutSmall(b *testing.B) {
	c, err := file.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	remotetest.BenchPutSmall(b, c)
}

func BenchmarkGetSmall(b *testing.B) {
	c, err := file.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	remotetest.BenchGetSmall(b, c)
}

// asNobodyEnv makes the test binary run TestListUnreadableFolder's body
// as the user nobody, in the folder it names.
const asNobodyEnv = "OMPSYNC_TEST_FILE_AS_NOBODY"

// A folder this user cannot read (a disk's lost+found, owned by root, at
// the remote's root) is a common prefix in a delimited listing, not an
// error that ends it: a remote at the root of a disk can be listed. A
// listing that has to read inside it still fails. Run as the user nobody
// (root reads every folder).
func TestListUnreadableFolder(t *testing.T) {
	if dir := os.Getenv(asNobodyEnv); dir != "" {
		listUnreadable(t, dir)
		return
	}
	if os.Geteuid() != 0 {
		dir := unreadableRemote(t)
		listUnreadable(t, dir)
		return
	}
	// As root: the binary, in a folder nobody can enter, runs this test as nobody.
	top, err := os.MkdirTemp("", "ompsync-file-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(top, "file.test")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	remoteDir := filepath.Join(top, "remote")
	if err := os.Mkdir(remoteDir, 0o755); err != nil {
		t.Fatal(err)
	}
	fillUnreadable(t, remoteDir)
	cmd := exec.Command(bin, "-test.run", "^TestListUnreadableFolder$", "-test.v")
	cmd.Env = []string{asNobodyEnv + "=" + remoteDir, "HOME=" + top}
	asNobody(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestListUnreadableFolder")) {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}

// unreadableRemote is a remote folder with an object and a folder this
// user cannot read.
func unreadableRemote(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	fillUnreadable(t, dir)
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "lost+found"), 0o700) })
	return dir
}

func fillUnreadable(t *testing.T, dir string) {
	t.Helper()
	for _, p := range []string{"lost+found/file", "v1/sessions/a/x", "ompsync.json"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "lost+found"), 0); err != nil {
		t.Fatal(err)
	}
}

func listUnreadable(t *testing.T, dir string) {
	c, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for obj, err := range c.List(t.Context(), "", remote.ListOptions{Delimiter: "/"}) {
		if err != nil {
			t.Fatalf("delimited listing: %v (got %q)", err, got)
		}
		got = append(got, obj.Key)
	}
	if want := []string{"lost+found/", "ompsync.json", "v1/"}; !slices.Equal(got, want) {
		t.Errorf("delimited listing = %q, want %q", got, want)
	}
	var err2 error
	for _, err := range c.List(t.Context(), "", remote.ListOptions{}) {
		if err != nil {
			err2 = err
		}
	}
	if !errors.Is(err2, fs.ErrPermission) {
		t.Errorf("a listing of every key passed the unreadable folder by: %v", err2)
	}
}

// A remote folder on a disk that is unmounted while a client holds it (a
// folder at the same path, empty, in its place; or none) is refused, not
// written into: a transient error that names it, and nothing on the disk
// below. Once the disk is back, the same client works.
func TestRootReplacedRefused(t *testing.T) {
	ctx := t.Context()
	top := t.TempDir()
	root := filepath.Join(top, "usb", "backup")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := file.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, "v1/a", []byte("a"), remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// Unmounted: the disk's folder moves away, an empty mount point stays.
	if err := os.Rename(filepath.Join(top, "usb"), filepath.Join(top, "usb.mounted")); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, wantWhy string) {
		t.Helper()
		err := c.Put(ctx, "v1/b", []byte("b"), remote.PutOptions{})
		if !remote.IsTransient(err) || !strings.Contains(err.Error(), root+" "+wantWhy) || !strings.Contains(err.Error(), "is its disk unmounted?") {
			t.Errorf("%s: put = %v, want a transient error saying the folder %s", what, err, wantWhy)
		}
		for _, err := range c.List(ctx, "", remote.ListOptions{}) {
			if !remote.IsTransient(err) {
				t.Errorf("%s: list = %v, want the same refusal", what, err)
			}
			break
		}
		if _, err := c.Stat(ctx, "v1/a"); errors.Is(err, remote.ErrNotFound) || !remote.IsTransient(err) {
			t.Errorf("%s: stat = %v, want the same refusal, not 'not found'", what, err)
		}
	}
	refused("root gone", "is gone")
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("the root was made again: %v", err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil { // made again by someone
		t.Fatal(err)
	}
	refused("another folder in its place", "is not the folder it was when ompsync started")
	if des, _ := os.ReadDir(root); len(des) != 0 {
		t.Errorf("written on the disk below: %v", des)
	}
	// Mounted again.
	if err := os.RemoveAll(filepath.Join(top, "usb")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(top, "usb.mounted"), filepath.Join(top, "usb")); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, "v1/b", []byte("b"), remote.PutOptions{}); err != nil {
		t.Fatalf("put once the disk is back: %v", err)
	}
}
