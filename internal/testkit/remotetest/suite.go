// Package remotetest holds what tests of storage code share: the conformance
// suite every remote driver passes (Run), a private S3 server for tests that
// stop and restart it (StartServer), and the set of backends integration
// tests run against (Backends), on versitygw and, when one is named, MinIO.
package remotetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
)

// Run is the conformance suite: every driver must pass it. newClient returns
// a client on an empty store (a fresh folder, bucket or prefix); it is called
// once per subtest, from parallel subtests.
func Run(t *testing.T, newClient func(t *testing.T) remote.Client) {
	cases := []struct {
		name string
		f    func(t *testing.T, c remote.Client)
	}{
		{"RoundTrip", testRoundTrip},
		{"RangeReads", testRangeReads},
		{"ListDelimiter", testListDelimiter},
		{"ListRecursive", testListRecursive},
		{"StartAfter", testStartAfter},
		{"ListPaging", testListPaging},
		{"IfAbsent", testIfAbsent},
		{"IfMatch", testIfMatch},
		{"Delete", testDelete},
		{"NotFound", testNotFound},
		{"Cancelled", testCancelled},
		{"ConcurrentPuts", testConcurrentPuts},
		{"LargeObject", testLargeObject},
		{"PutReader", testPutReader},
		{"PutReaderChanged", testPutReaderChanged},
		{"UnicodeKeys", testUnicodeKeys},
		{"BadKeys", testBadKeys},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.f(t, newClient(t))
		})
	}
}

// Put stores data under key or fails the test.
func Put(t testing.TB, c remote.Client, key string, data []byte) {
	t.Helper()
	if err := c.Put(t.Context(), key, data, remote.PutOptions{}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// Get reads a byte range of key or fails the test.
func Get(t testing.TB, c remote.Client, key string, offset, length int64) []byte {
	t.Helper()
	rc, err := c.Get(t.Context(), key, offset, length)
	if err != nil {
		t.Fatalf("get %s [%d,%+d): %v", key, offset, length, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return b
}

// Keys lists prefix and returns the keys in the order yielded; common
// prefixes are marked with a trailing " (prefix)".
func Keys(t testing.TB, c remote.Client, prefix string, opts remote.ListOptions) []string {
	t.Helper()
	keys := []string{}
	for info, err := range c.List(t.Context(), prefix, opts) {
		if err != nil {
			t.Fatalf("list %q %+v: %v", prefix, opts, err)
		}
		if info.Prefix {
			if opts.Delimiter == "" || !strings.HasSuffix(info.Key, opts.Delimiter) {
				t.Errorf("list %q: common prefix %q does not end in the delimiter %q", prefix, info.Key, opts.Delimiter)
			}
			keys = append(keys, info.Key+" (prefix)")
			continue
		}
		if info.ModTime.IsZero() {
			t.Errorf("list %q: %s has no modification time", prefix, info.Key)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

func equalKeys(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func testRoundTrip(t *testing.T, c remote.Client) {
	data := []byte(`{"type":"session","id":"x"}` + "\n")
	Put(t, c, "sessions/abc/m1/meta.json", data)
	if got := Get(t, c, "sessions/abc/m1/meta.json", 0, -1); !bytes.Equal(got, data) {
		t.Fatalf("get = %q, want %q", got, data)
	}
	info, err := c.Stat(t.Context(), "sessions/abc/m1/meta.json")
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(len(data)) {
		t.Errorf("stat size = %d, want %d", info.Size, len(data))
	}
	if d := time.Since(info.ModTime); d > 24*time.Hour || d < -24*time.Hour {
		t.Errorf("stat modtime = %v, not today", info.ModTime)
	}

	// Overwrite replaces the whole object, also with a shorter one.
	Put(t, c, "sessions/abc/m1/meta.json", []byte("v2"))
	if got := Get(t, c, "sessions/abc/m1/meta.json", 0, -1); string(got) != "v2" {
		t.Errorf("after overwrite get = %q, want %q", got, "v2")
	}

	// An empty object is an object.
	Put(t, c, "empty", nil)
	if got := Get(t, c, "empty", 0, -1); len(got) != 0 {
		t.Errorf("empty object read %q", got)
	}
	if info, err := c.Stat(t.Context(), "empty"); err != nil || info.Size != 0 {
		t.Errorf("stat empty = %+v, %v", info, err)
	}
}

func testRangeReads(t *testing.T, c remote.Client) {
	data := make([]byte, 100)
	for i := range data {
		data[i] = byte(i)
	}
	Put(t, c, "r/obj", data)
	for _, tc := range []struct {
		off, n int64
		want   []byte
	}{
		{0, -1, data},
		{10, 5, data[10:15]},
		{0, 1, data[:1]},
		{90, -1, data[90:]},
		{99, 1, data[99:]},
		{95, 10, data[95:]}, // length past the end is cut short
		{0, 100, data},
		{10, 0, nil},
		{100, -1, nil}, // offset at or past the end reads nothing
		{100, 5, nil},
		{150, -1, nil},
	} {
		got := Get(t, c, "r/obj", tc.off, tc.n)
		if !bytes.Equal(got, tc.want) {
			t.Errorf("get [%d,%+d) = %v, want %v", tc.off, tc.n, got, tc.want)
		}
	}
	if _, err := c.Get(t.Context(), "r/obj", -1, 5); err == nil || remote.IsTransient(err) {
		t.Errorf("negative offset: err = %v, want a permanent error", err)
	}
	for _, n := range []int64{-1, 0, 5} {
		if _, err := c.Get(t.Context(), "r/missing", 10, n); !errors.Is(err, remote.ErrNotFound) {
			t.Errorf("range read [10,%+d) of a missing key: err = %v, want ErrNotFound", n, err)
		}
	}
}

// listKeys is a set where no key is also a "folder" of another key, which
// versitygw (and the file driver) refuse, and where '-' < '/' < '0' makes
// folder order differ from name order.
var listKeys = []string{"a/1", "a/2", "a/b/3", "b", "c-x", "c/d/e", "c0", "d/e/f/g"}

func putAll(t *testing.T, c remote.Client, keys []string) {
	t.Helper()
	for _, k := range keys {
		Put(t, c, k, []byte("data of "+k))
	}
}

func testListDelimiter(t *testing.T, c remote.Client) {
	putAll(t, c, listKeys)
	slash := remote.ListOptions{Delimiter: "/"}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a/ (prefix)", "b", "c-x", "c/ (prefix)", "c0", "d/ (prefix)"}},
		{"a/", []string{"a/1", "a/2", "a/b/ (prefix)"}},
		{"a", []string{"a/ (prefix)"}},
		{"a/b", []string{"a/b/ (prefix)"}},
		{"c", []string{"c-x", "c/ (prefix)", "c0"}},
		{"d/e/", []string{"d/e/f/ (prefix)"}},
		{"d/e/f/", []string{"d/e/f/g"}},
		{"zz", []string{}},
		{"zz/", []string{}},
	} {
		equalKeys(t, fmt.Sprintf("list %q with delimiter", tc.prefix), Keys(t, c, tc.prefix, slash), tc.want)
	}
	// Sizes come with the listing.
	for info, err := range c.List(t.Context(), "a/", slash) {
		if err != nil {
			t.Fatal(err)
		}
		if !info.Prefix && info.Size != int64(len("data of "+info.Key)) {
			t.Errorf("list: %s size %d, want %d", info.Key, info.Size, len("data of "+info.Key))
		}
	}
}

func testListRecursive(t *testing.T, c remote.Client) {
	putAll(t, c, listKeys)
	want := slices.Clone(listKeys)
	sort.Strings(want)
	equalKeys(t, "list all", Keys(t, c, "", remote.ListOptions{}), want)
	equalKeys(t, `list "c"`, Keys(t, c, "c", remote.ListOptions{}), []string{"c-x", "c/d/e", "c0"})
	equalKeys(t, `list "a/b"`, Keys(t, c, "a/b", remote.ListOptions{}), []string{"a/b/3"})
	equalKeys(t, `list "d/"`, Keys(t, c, "d/", remote.ListOptions{}), []string{"d/e/f/g"})
	equalKeys(t, `list "b"`, Keys(t, c, "b", remote.ListOptions{}), []string{"b"})
	equalKeys(t, `list "nothing/"`, Keys(t, c, "nothing/", remote.ListOptions{}), []string{})

	// Stopping early is fine and leaves the client usable.
	n := 0
	for _, err := range c.List(t.Context(), "", remote.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 2 {
			break
		}
	}
	equalKeys(t, "list after an early stop", Keys(t, c, "", remote.ListOptions{}), want)
}

func testStartAfter(t *testing.T, c remote.Client) {
	putAll(t, c, listKeys)
	for _, tc := range []struct {
		prefix string
		opts   remote.ListOptions
		want   []string
	}{
		{"", remote.ListOptions{StartAfter: "a/2"}, []string{"a/b/3", "b", "c-x", "c/d/e", "c0", "d/e/f/g"}},
		{"", remote.ListOptions{StartAfter: "b"}, []string{"c-x", "c/d/e", "c0", "d/e/f/g"}},
		{"", remote.ListOptions{StartAfter: "bb"}, []string{"c-x", "c/d/e", "c0", "d/e/f/g"}},
		{"", remote.ListOptions{StartAfter: "c/"}, []string{"c/d/e", "c0", "d/e/f/g"}},
		{"c", remote.ListOptions{StartAfter: "c-x"}, []string{"c/d/e", "c0"}},
		{"", remote.ListOptions{StartAfter: "zzz"}, []string{}},
		{"", remote.ListOptions{StartAfter: "b", Delimiter: "/"}, []string{"c-x", "c/ (prefix)", "c0", "d/ (prefix)"}},
		// Not tested here: StartAfter inside a common prefix ("a/1" with
		// "/"): versitygw and MinIO leave "a/" out, AWS and the file
		// driver yield it (RunS3Driver's StartAfterInsideCommonPrefix).
	} {
		equalKeys(t, fmt.Sprintf("list %q %+v", tc.prefix, tc.opts), Keys(t, c, tc.prefix, tc.opts), tc.want)
	}
}

// testListPaging lists more keys than one S3 page (1,000) holds, mixing keys
// and folders so a delimiter listing has both on both pages.
func testListPaging(t *testing.T, c remote.Client) {
	const n = 1005
	var keys, delimited []string
	for i := range n {
		k := fmt.Sprintf("page/%04d", i)
		if i%3 == 0 {
			delimited = append(delimited, k+"/ (prefix)")
			k += "/x"
		} else {
			delimited = append(delimited, k)
		}
		keys = append(keys, k)
	}
	parallel(t, len(keys), 8, func(i int) error {
		return c.Put(t.Context(), keys[i], []byte{byte(i)}, remote.PutOptions{})
	})
	equalKeys(t, "list all", Keys(t, c, "page/", remote.ListOptions{}), keys)
	equalKeys(t, "list with delimiter", Keys(t, c, "page/", remote.ListOptions{Delimiter: "/"}), delimited)
	equalKeys(t, "list the root", Keys(t, c, "", remote.ListOptions{Delimiter: "/"}), []string{"page/ (prefix)"})
	equalKeys(t, "list after page/0499", Keys(t, c, "page/", remote.ListOptions{StartAfter: "page/0499"}), keys[500:])
	// A small first page, then full ones: the same keys, once each.
	equalKeys(t, "list with a first page of 7", Keys(t, c, "page/", remote.ListOptions{FirstPage: 7}), keys)
	equalKeys(t, "list with a first page of 2,000", Keys(t, c, "page/", remote.ListOptions{FirstPage: 2000}), keys)
	equalKeys(t, "list with a delimiter and a first page of 7", Keys(t, c, "page/", remote.ListOptions{Delimiter: "/", FirstPage: 7}), delimited)
	equalKeys(t, "list after page/0499, a first page of 1", Keys(t, c, "page/", remote.ListOptions{StartAfter: "page/0499", FirstPage: 1}), keys[500:])
}

// parallel runs f(0..n-1) on workers goroutines and fails on the first error.
func parallel(t *testing.T, n, workers int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// testIfMatch: a put with the ETag Stat gave replaces the object only while
// it is that version; of writers racing with the same ETag one wins.
func testIfMatch(t *testing.T, c remote.Client) {
	ctx := t.Context()
	Put(t, c, "cat/m", []byte("one"))
	one, err := c.Stat(ctx, "cat/m")
	if err != nil || one.ETag == "" {
		t.Fatalf("stat: %+v, %v; want an ETag", one, err)
	}
	Put(t, c, "cat/m", []byte("two")) // another writer, since
	err = c.Put(ctx, "cat/m", []byte("stale"), remote.PutOptions{IfMatch: one.ETag})
	if !errors.Is(err, remote.ErrPreconditionFailed) || remote.IsTransient(err) {
		t.Fatalf("put over a changed object: %v, want a permanent ErrPreconditionFailed", err)
	}
	if got := Get(t, c, "cat/m", 0, -1); string(got) != "two" {
		t.Fatalf("after the refused put: %q, want the newer %q", got, "two")
	}
	two, err := c.Stat(ctx, "cat/m")
	if err != nil || two.ETag == one.ETag {
		t.Fatalf("stat after a change: %+v, %v; want a new ETag", two, err)
	}
	if err := c.Put(ctx, "cat/m", []byte("three"), remote.PutOptions{IfMatch: two.ETag}); err != nil {
		t.Fatalf("put over the version read: %v", err)
	}
	if got := Get(t, c, "cat/m", 0, -1); string(got) != "three" {
		t.Fatalf("after the put: %q", got)
	}
	if err := c.Put(ctx, "cat/gone", []byte("x"), remote.PutOptions{IfMatch: two.ETag}); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("IfMatch put of a missing key: %v, want ErrNotFound", err)
	}
	// Racing writers that read the same version: one replaces it.
	three, err := c.Stat(ctx, "cat/m")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range 8 {
		wg.Go(func() {
			err := c.Put(ctx, "cat/m", []byte{'w', byte('0' + i)}, remote.PutOptions{IfMatch: three.ETag})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case !errors.Is(err, remote.ErrPreconditionFailed):
				t.Errorf("racing IfMatch put: %v", err)
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Errorf("%d racing IfMatch puts over one version succeeded, want 1", won)
	}
}

func testIfAbsent(t *testing.T, c remote.Client) {
	ctx := t.Context()
	if err := c.Put(ctx, "locks/one", []byte("first"), remote.PutOptions{IfAbsent: true}); err != nil {
		t.Fatalf("first IfAbsent put: %v", err)
	}
	err := c.Put(ctx, "locks/one", []byte("second"), remote.PutOptions{IfAbsent: true})
	if !errors.Is(err, remote.ErrPreconditionFailed) {
		t.Fatalf("second IfAbsent put: err = %v, want ErrPreconditionFailed", err)
	}
	if remote.IsTransient(err) {
		t.Errorf("precondition failure is transient: %v", err)
	}
	if got := Get(t, c, "locks/one", 0, -1); string(got) != "first" {
		t.Errorf("after refused put: %q, want %q", got, "first")
	}
	// Once deleted, the key can be created again.
	if err := c.Delete(ctx, "locks/one"); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, "locks/one", []byte("third"), remote.PutOptions{IfAbsent: true}); err != nil {
		t.Fatalf("IfAbsent put after delete: %v", err)
	}
	// Of many racing creators exactly one wins.
	var wins sync.WaitGroup
	won := make(chan int, 16)
	for i := range 16 {
		wins.Go(func() {
			err := c.Put(ctx, "locks/race", []byte{byte(i)}, remote.PutOptions{IfAbsent: true})
			switch {
			case err == nil:
				won <- i
			case !errors.Is(err, remote.ErrPreconditionFailed):
				t.Errorf("racing IfAbsent put: %v", err)
			}
		})
	}
	wins.Wait()
	close(won)
	var winners []int
	for i := range won {
		winners = append(winners, i)
	}
	if len(winners) != 1 {
		t.Fatalf("racing IfAbsent puts: %d winners %v, want 1", len(winners), winners)
	}
	if got := Get(t, c, "locks/race", 0, -1); !bytes.Equal(got, []byte{byte(winners[0])}) {
		t.Errorf("racing IfAbsent puts: stored %v, winner wrote %v", got, winners[0])
	}
}

func testDelete(t *testing.T, c remote.Client) {
	ctx := t.Context()
	Put(t, c, "del/x/y", []byte("y"))
	Put(t, c, "del/keep", []byte("k"))
	if err := c.Delete(ctx, "del/x/y"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.Get(ctx, "del/x/y", 0, -1); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("get after delete: err = %v, want ErrNotFound", err)
	}
	if _, err := c.Stat(ctx, "del/x/y"); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("stat after delete: err = %v, want ErrNotFound", err)
	}
	equalKeys(t, "list after delete", Keys(t, c, "del/", remote.ListOptions{}), []string{"del/keep"})
	equalKeys(t, "list after delete, with delimiter", Keys(t, c, "del/", remote.ListOptions{Delimiter: "/"}), []string{"del/keep"})
	if err := c.Delete(ctx, "del/x/y"); err != nil {
		t.Errorf("deleting a deleted key: %v", err)
	}
	if err := c.Delete(ctx, "never/was/here"); err != nil {
		t.Errorf("deleting a missing key: %v", err)
	}
	// The key's name is free again, even as a folder.
	Put(t, c, "del/x", []byte("x"))
	if got := Get(t, c, "del/x", 0, -1); string(got) != "x" {
		t.Errorf("get del/x = %q", got)
	}
}

func testNotFound(t *testing.T, c remote.Client) {
	ctx := t.Context()
	Put(t, c, "nf/present", []byte("p"))
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, remote.ErrNotFound) {
			t.Errorf("%s: err = %v, want ErrNotFound", op, err)
			return
		}
		if remote.IsTransient(err) {
			t.Errorf("%s: not-found is transient", op)
		}
		var re *remote.Error
		if !errors.As(err, &re) || re.Op != op {
			t.Errorf("%s: err = %#v, want a *remote.Error with Op %q", op, err, op)
		}
	}
	_, err := c.Get(ctx, "nf/missing", 0, -1)
	check("get", err)
	_, err = c.Stat(ctx, "nf/missing")
	check("stat", err)
	// A "folder" is not an object.
	_, err = c.Get(ctx, "nf", 0, -1)
	check("get", err)
	_, err = c.Stat(ctx, "nf")
	check("stat", err)
	// A path through an object is not one either.
	_, err = c.Get(ctx, "nf/present/below", 0, -1)
	check("get", err)
}

func testCancelled(t *testing.T, c remote.Client) {
	Put(t, c, "cancel/x", []byte("x"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: err = %v, want context.Canceled", op, err)
		}
		if remote.IsTransient(err) {
			t.Errorf("%s: cancellation is transient", op)
		}
	}
	check("put", c.Put(ctx, "cancel/y", []byte("y"), remote.PutOptions{}))
	_, err := c.Get(ctx, "cancel/x", 0, -1)
	check("get", err)
	_, err = c.Stat(ctx, "cancel/x")
	check("stat", err)
	check("delete", c.Delete(ctx, "cancel/x"))
	var listErr error
	for _, err := range c.List(ctx, "", remote.ListOptions{}) {
		if err != nil {
			listErr = err
		}
	}
	check("list", listErr)
	// Nothing happened.
	equalKeys(t, "after cancelled calls", Keys(t, c, "cancel/", remote.ListOptions{}), []string{"cancel/x"})

	// A reader stops when its context ends.
	big := make([]byte, 4<<20)
	Put(t, c, "cancel/big", big)
	ctx, cancel = context.WithCancel(t.Context())
	rc, err := c.Get(ctx, "cancel/big", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.Copy(io.Discard, rc); !errors.Is(err, context.Canceled) {
		t.Errorf("reading after cancel: err = %v, want context.Canceled", err)
	}
}

func testConcurrentPuts(t *testing.T, c remote.Client) {
	const n = 32
	datas := make([][]byte, n)
	for i := range datas {
		datas[i] = randomBytes(uint64(i), 64<<10)
	}
	parallel(t, n, n, func(i int) error {
		return c.Put(t.Context(), fmt.Sprintf("conc/%02d", i), datas[i], remote.PutOptions{})
	})
	for i := range n {
		if got := Get(t, c, fmt.Sprintf("conc/%02d", i), 0, -1); !bytes.Equal(got, datas[i]) {
			t.Errorf("conc/%02d: read %d bytes, not what was written", i, len(got))
		}
	}
	// Racing writers to one key: the object is one of them, whole.
	parallel(t, n, n, func(i int) error {
		return c.Put(t.Context(), "conc/same", datas[i], remote.PutOptions{})
	})
	got := Get(t, c, "conc/same", 0, -1)
	if !slices.ContainsFunc(datas, func(d []byte) bool { return bytes.Equal(d, got) }) {
		t.Errorf("racing puts to one key left %d bytes that none of them wrote", len(got))
	}
	equalKeys(t, "no stray objects", Keys(t, c, "conc/same", remote.ListOptions{}), []string{"conc/same"})
}

func randomBytes(seed uint64, n int) []byte {
	var s [32]byte
	s[0] = byte(seed)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(s).Read(b)
	return b
}

func testLargeObject(t *testing.T, c remote.Client) {
	data := randomBytes(99, 20<<20)
	Put(t, c, "large/20MiB", data)
	got := Get(t, c, "large/20MiB", 0, -1)
	if sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("20 MiB object: read %d bytes, not what was written", len(got))
	}
	if got := Get(t, c, "large/20MiB", 10<<20, 1<<20); !bytes.Equal(got, data[10<<20:11<<20]) {
		t.Errorf("range read in the middle of 20 MiB differs")
	}
	if info, err := c.Stat(t.Context(), "large/20MiB"); err != nil || info.Size != int64(len(data)) {
		t.Errorf("stat = %+v, %v; want size %d", info, err, len(data))
	}
}

// PutReader streams an object from a reader: a few MiB read back
// identical, only size bytes of a longer source, IfAbsent and IfMatch as
// Put, and a short source is an error that stores nothing.
func testPutReader(t *testing.T, c remote.Client) {
	ctx := t.Context()
	data := randomBytes(7, 6<<20+12345)
	src := bytes.NewReader(append(slices.Clip(data), "bytes past size, not the object's"...))
	if err := c.PutReader(ctx, "stream/big", src, int64(len(data)), remote.PutOptions{}); err != nil {
		t.Fatalf("streamed put of %d bytes: %v", len(data), err)
	}
	if got := Get(t, c, "stream/big", 0, -1); sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("streamed object: read %d bytes, not the %d written", len(got), len(data))
	}
	if info, err := c.Stat(ctx, "stream/big"); err != nil || info.Size != int64(len(data)) {
		t.Errorf("stat = %+v, %v; want size %d", info, err, len(data))
	}
	// A plain streamed put replaces.
	if err := c.PutReader(ctx, "stream/big", strings.NewReader("small"), 5, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := Get(t, c, "stream/big", 0, -1); string(got) != "small" {
		t.Errorf("after replacing: %q", got)
	}

	if err := c.PutReader(ctx, "stream/once", bytes.NewReader(data), int64(len(data)), remote.PutOptions{IfAbsent: true}); err != nil {
		t.Fatalf("first IfAbsent streamed put: %v", err)
	}
	err := c.PutReader(ctx, "stream/once", strings.NewReader("second"), 6, remote.PutOptions{IfAbsent: true})
	if !errors.Is(err, remote.ErrPreconditionFailed) || remote.IsTransient(err) {
		t.Fatalf("second IfAbsent streamed put: %v, want a permanent ErrPreconditionFailed", err)
	}
	if got := Get(t, c, "stream/once", 0, -1); !bytes.Equal(got, data) {
		t.Errorf("after the refused put: %d bytes, not the first put's", len(got))
	}
	if err := c.Put(ctx, "stream/put", []byte("by put"), remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.PutReader(ctx, "stream/put", strings.NewReader("by reader"), 9, remote.PutOptions{IfAbsent: true}); !errors.Is(err, remote.ErrPreconditionFailed) {
		t.Errorf("IfAbsent streamed put over a Put's object: %v, want ErrPreconditionFailed", err)
	}

	one, err := c.Stat(ctx, "stream/once")
	if err != nil {
		t.Fatal(err)
	}
	if one.ETag != "" {
		Put(t, c, "stream/once", []byte("another writer"))
		if err := c.PutReader(ctx, "stream/once", strings.NewReader("stale"), 5, remote.PutOptions{IfMatch: one.ETag}); !errors.Is(err, remote.ErrPreconditionFailed) {
			t.Errorf("IfMatch streamed put over a changed object: %v, want ErrPreconditionFailed", err)
		}
		two, err := c.Stat(ctx, "stream/once")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.PutReader(ctx, "stream/once", strings.NewReader("fresh"), 5, remote.PutOptions{IfMatch: two.ETag}); err != nil {
			t.Errorf("IfMatch streamed put over the version read: %v", err)
		}
		if got := Get(t, c, "stream/once", 0, -1); string(got) != "fresh" {
			t.Errorf("after the IfMatch put: %q", got)
		}
	}

	if err := c.PutReader(ctx, "stream/empty", bytes.NewReader(nil), 0, remote.PutOptions{IfAbsent: true}); err != nil {
		t.Fatalf("empty streamed put: %v", err)
	}
	if info, err := c.Stat(ctx, "stream/empty"); err != nil || info.Size != 0 {
		t.Errorf("empty streamed object: %+v, %v", info, err)
	}

	err = c.PutReader(ctx, "stream/short", bytes.NewReader(data[:100]), 200, remote.PutOptions{})
	if err == nil || remote.IsTransient(err) {
		t.Errorf("a source of 100 bytes put as 200: %v, want a permanent error", err)
	}
	if _, err := c.Stat(ctx, "stream/short"); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("after a short source: stat %v, want ErrNotFound", err)
	}
}

// ChangingSource gives Data for its first Clean passes (a put's checksum,
// then its body), then the same bytes with one changed: a file written
// while it is uploaded (Clean 1), or between a try and its retry (Clean 2).
type ChangingSource struct {
	Data   []byte
	Clean  int
	served atomic.Int64
}

func (s *ChangingSource) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(s.Data)) {
		return 0, io.EOF
	}
	n := copy(p, s.Data[off:])
	if s.served.Add(int64(n)) > int64(s.Clean)*int64(len(s.Data)) {
		if mid := int64(len(s.Data)) / 2; mid >= off && mid < off+int64(n) {
			p[mid-off] ^= 0xff
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// A source whose bytes change after the pass that computed its checksum
// is refused, permanently, and stores nothing: no server ever holds bytes
// that are neither the old object nor the new one.
func testPutReaderChanged(t *testing.T, c remote.Client) {
	ctx := t.Context()
	data := randomBytes(8, 3<<20)
	Put(t, c, "changed/obj", []byte("before"))
	for _, opts := range []remote.PutOptions{{}, {IfAbsent: true}} {
		key := "changed/obj"
		if opts.IfAbsent {
			key = "changed/new"
		}
		err := c.PutReader(ctx, key, &ChangingSource{Data: data, Clean: 1}, int64(len(data)), opts)
		if !errors.Is(err, remote.ErrSourceChanged) || remote.IsTransient(err) {
			t.Errorf("IfAbsent=%t: a source that changed under the put: %v, want a permanent ErrSourceChanged", opts.IfAbsent, err)
		}
	}
	if got := Get(t, c, "changed/obj", 0, -1); string(got) != "before" {
		t.Errorf("the object a changed source was to replace: %d bytes, want the old %q", len(got), "before")
	}
	if _, err := c.Stat(ctx, "changed/new"); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("a changed source stored an object: stat %v", err)
	}
}

func testUnicodeKeys(t *testing.T, c remote.Client) {
	keys := []string{
		"with space/ünïcödé 名前.jsonl",
		"with space/emoji 🙂 file",
		"with space/plus+eq=amp&pct%20q?hash#",
		"with space/Ünïcödé",
	}
	for _, k := range keys {
		Put(t, c, k, []byte(k))
	}
	for _, k := range keys {
		if got := Get(t, c, k, 0, -1); string(got) != k {
			t.Errorf("get %q = %q", k, got)
		}
		if _, err := c.Stat(t.Context(), k); err != nil {
			t.Errorf("stat %q: %v", k, err)
		}
	}
	want := slices.Clone(keys)
	sort.Strings(want)
	equalKeys(t, "list unicode keys", Keys(t, c, "with space/", remote.ListOptions{}), want)
	equalKeys(t, "list by a unicode prefix", Keys(t, c, "with space/ü", remote.ListOptions{}), []string{keys[0]})
	if err := c.Delete(t.Context(), keys[0]); err != nil {
		t.Fatal(err)
	}
	equalKeys(t, "list after delete", Keys(t, c, "with space/", remote.ListOptions{}), want[:len(want)-1])
}

func testBadKeys(t *testing.T, c remote.Client) {
	ctx := t.Context()
	for _, k := range []string{"", "/abs", "a/../b", "..", "../up", "a/./b", ".", "a//b", "a/", "nul\x00byte", `back\slash`, "new\nline", strings.Repeat("k", 1025)} {
		check := func(op string, err error) {
			t.Helper()
			var re *remote.Error
			switch {
			case err == nil:
				t.Errorf("%s %q: no error", op, k)
			case !errors.As(err, &re):
				t.Errorf("%s %q: %v is not a *remote.Error", op, k, err)
			case remote.IsTransient(err) || errors.Is(err, remote.ErrNotFound):
				t.Errorf("%s %q: %v; want a permanent error other than not-found", op, k, err)
			}
		}
		check("put", c.Put(ctx, k, []byte("x"), remote.PutOptions{}))
		_, err := c.Get(ctx, k, 0, -1)
		check("get", err)
		_, err = c.Stat(ctx, k)
		check("stat", err)
		check("delete", c.Delete(ctx, k))
	}
	for _, p := range []string{"/abs", "../", "a/../", "a//", "nul\x00"} {
		var listErr error
		for _, err := range c.List(ctx, p, remote.ListOptions{}) {
			listErr = err
		}
		if listErr == nil || remote.IsTransient(listErr) {
			t.Errorf("list %q: err = %v, want a permanent error", p, listErr)
		}
	}
	equalKeys(t, "nothing stored by bad keys", Keys(t, c, "", remote.ListOptions{}), []string{})
}

// Objects is every object on the remote, key -> bytes: what a reader of
// the bucket sees.
func Objects(t testing.TB, c remote.Client) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for obj, err := range c.List(context.Background(), "", remote.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		out[obj.Key] = Get(t, c, obj.Key, 0, -1)
	}
	return out
}
