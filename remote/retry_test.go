package remote_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"iter"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
)

var errFlaky = &remote.Error{Op: "test", Transient: true, Err: errors.New("503 SlowDown")}

// flaky wraps a real client and fails the next fails[op] calls of op with a
// transient error. A put can be made to land before failing (a lost answer).
type flaky struct {
	remote.Client
	mu        sync.Mutex
	fails     map[string]int
	calls     map[string]int
	landFirst bool // puts store the data, then report the failure
	listAfter int  // list fails after yielding this many entries, once per fail
	starts    []string
}

func newFlaky(t *testing.T) *flaky {
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &flaky{Client: c, fails: map[string]int{}, calls: map[string]int{}}
}

func (f *flaky) fail(op string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	if f.fails[op] > 0 {
		f.fails[op]--
		return true
	}
	return false
}

func (f *flaky) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	if f.landFirst {
		if err := f.Client.Put(ctx, key, data, opts); err != nil {
			return err
		}
	}
	if f.fail("put") {
		return errFlaky
	}
	if f.landFirst {
		return nil
	}
	return f.Client.Put(ctx, key, data, opts)
}

// PutReader fails and lands like Put, and records how many bytes each try
// read from its source.
func (f *flaky) PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts remote.PutOptions) error {
	if f.landFirst {
		if err := f.Client.PutReader(ctx, key, r, size, opts); err != nil {
			return err
		}
	}
	if f.fail("put") {
		return errFlaky
	}
	if f.landFirst {
		return nil
	}
	return f.Client.PutReader(ctx, key, r, size, opts)
}

func (f *flaky) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if f.fail("get") {
		return nil, errFlaky
	}
	return f.Client.Get(ctx, key, off, n)
}

func (f *flaky) Stat(ctx context.Context, key string) (remote.ObjectInfo, error) {
	if f.fail("stat") {
		return remote.ObjectInfo{}, errFlaky
	}
	return f.Client.Stat(ctx, key)
}

func (f *flaky) Delete(ctx context.Context, key string) error {
	if f.fail("delete") {
		return errFlaky
	}
	return f.Client.Delete(ctx, key)
}

func (f *flaky) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	return func(yield func(remote.ObjectInfo, error) bool) {
		f.mu.Lock()
		f.starts = append(f.starts, opts.StartAfter)
		f.mu.Unlock()
		n := 0
		for info, err := range f.Client.List(ctx, prefix, opts) {
			if n == f.listAfter && f.fail("list") {
				yield(remote.ObjectInfo{}, errFlaky)
				return
			}
			if !yield(info, err) {
				return
			}
			n++
		}
	}
}

var fast = remote.RetryPolicy{MaxAttempts: 4, Base: time.Microsecond, Max: time.Millisecond}

func TestRetryUntilSuccess(t *testing.T) {
	f := newFlaky(t)
	c := remote.WithRetry(f, fast)
	ctx := t.Context()
	f.fails = map[string]int{"put": 3, "get": 3, "stat": 3, "delete": 3}
	if err := c.Put(ctx, "k", []byte("v"), remote.PutOptions{}); err != nil {
		t.Fatalf("put after 3 transient failures: %v", err)
	}
	rc, err := c.Get(ctx, "k", 0, -1)
	if err != nil {
		t.Fatalf("get after 3 transient failures: %v", err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "v" {
		t.Errorf("get = %q", b)
	}
	if info, err := c.Stat(ctx, "k"); err != nil || info.Size != 1 {
		t.Errorf("stat = %+v, %v", info, err)
	}
	if err := c.Delete(ctx, "k"); err != nil {
		t.Errorf("delete: %v", err)
	}
	for _, op := range []string{"put", "get", "stat", "delete"} {
		if f.calls[op] != 4 {
			t.Errorf("%s: %d calls, want 4", op, f.calls[op])
		}
	}
}

func TestRetryGivesUp(t *testing.T) {
	f := newFlaky(t)
	c := remote.WithRetry(f, fast)
	f.fails["put"] = 10
	err := c.Put(t.Context(), "k", []byte("v"), remote.PutOptions{})
	if !errors.Is(err, errFlaky) {
		t.Fatalf("err = %v, want the last transient error", err)
	}
	if f.calls["put"] != 4 {
		t.Errorf("%d calls, want MaxAttempts=4", f.calls["put"])
	}
}

func TestNoRetryOfPermanentErrors(t *testing.T) {
	f := newFlaky(t)
	c := remote.WithRetry(f, fast)
	if _, err := c.Get(t.Context(), "missing", 0, -1); !errors.Is(err, remote.ErrNotFound) || remote.IsTransient(err) {
		t.Fatalf("err = %v, want a permanent ErrNotFound", err)
	}
	if f.calls["get"] != 1 {
		t.Errorf("%d calls for a not-found, want 1", f.calls["get"])
	}
	if err := c.Put(t.Context(), "a/../b", nil, remote.PutOptions{}); err == nil {
		t.Error("bad key accepted")
	}
	if f.calls["put"] != 1 {
		t.Errorf("%d calls for a bad key, want 1", f.calls["put"])
	}
}

func TestRetryStopsWithContext(t *testing.T) {
	f := newFlaky(t)
	ctx, cancel := context.WithCancel(t.Context())
	p := remote.RetryPolicy{MaxAttempts: 10, Base: time.Hour, Max: time.Hour,
		OnRetry: func(op, key string, attempt int, wait time.Duration, err error) { cancel() }}
	c := remote.WithRetry(f, p)
	f.fails["stat"] = 10
	_, err := c.Stat(ctx, "k")
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errFlaky) {
		t.Errorf("err = %v, want it to wrap both the failure and context.Canceled", err)
	}
	if remote.IsTransient(err) {
		t.Errorf("a cancelled retry is transient: %v", err)
	}
	if f.calls["stat"] != 1 {
		t.Errorf("%d calls, want 1", f.calls["stat"])
	}
}

func TestOnRetryReports(t *testing.T) {
	f := newFlaky(t)
	var attempts []int
	p := fast
	p.OnRetry = func(op, key string, attempt int, wait time.Duration, err error) {
		if op != "delete" || key != "k" || !errors.Is(err, errFlaky) || wait < 0 || wait > p.Max {
			t.Errorf("OnRetry(%q, %q, %d, %v, %v)", op, key, attempt, wait, err)
		}
		attempts = append(attempts, attempt)
	}
	f.fails["delete"] = 2
	if err := remote.WithRetry(f, p).Delete(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(attempts, []int{1, 2}) {
		t.Errorf("OnRetry attempts %v, want [1 2]", attempts)
	}
}

// A put whose answer was lost lands on the first try; the retry meets the
// object. Same bytes: success. Other bytes: a real conflict.
func TestRetryIfAbsentLostAnswer(t *testing.T) {
	f := newFlaky(t)
	f.landFirst = true
	c := remote.WithRetry(f, fast)
	f.fails["put"] = 1
	if err := c.Put(t.Context(), "lock", []byte("mine"), remote.PutOptions{IfAbsent: true}); err != nil {
		t.Errorf("IfAbsent put whose first answer was lost: %v", err)
	}
	f.landFirst = false
	f.fails["put"] = 1
	err := c.Put(t.Context(), "lock", []byte("theirs"), remote.PutOptions{IfAbsent: true})
	if !errors.Is(err, remote.ErrPreconditionFailed) {
		t.Errorf("IfAbsent put over other bytes: err = %v, want ErrPreconditionFailed", err)
	}
}

// A streamed put is retried from the start of its source, and an IfAbsent
// one whose answer was lost finds its own bytes (compared as they stream,
// a source of several read blocks) and reports success; other bytes, or
// the same bytes and more, are a real conflict.
func TestRetryPutReader(t *testing.T) {
	f := newFlaky(t)
	c := remote.WithRetry(f, fast)
	ctx := t.Context()
	data := make([]byte, 3<<20+7)
	for i := range data {
		data[i] = byte(i * 7 / 5)
	}
	f.fails["put"] = 3
	if err := c.PutReader(ctx, "obj", bytes.NewReader(data), int64(len(data)), remote.PutOptions{}); err != nil {
		t.Fatalf("streamed put after 3 transient failures: %v", err)
	}
	if got := getAll(t, f.Client, "obj"); !bytes.Equal(got, data) {
		t.Fatalf("after retries the object is %d bytes, not the %d put", len(got), len(data))
	}

	f.landFirst = true
	f.fails["put"] = 1
	if err := c.PutReader(ctx, "lock", bytes.NewReader(data), int64(len(data)), remote.PutOptions{IfAbsent: true}); err != nil {
		t.Errorf("IfAbsent streamed put whose first answer was lost: %v", err)
	}
	f.landFirst = false
	other := slices.Clone(data)
	other[len(other)-1]++
	for name, src := range map[string][]byte{"other bytes": other, "a longer object": append(slices.Clone(data), 'x'), "a prefix": data[:len(data)-1]} {
		f.fails["put"] = 1
		err := c.PutReader(ctx, "lock", bytes.NewReader(src), int64(len(src)), remote.PutOptions{IfAbsent: true})
		if !errors.Is(err, remote.ErrPreconditionFailed) {
			t.Errorf("IfAbsent streamed put of %s: err = %v, want ErrPreconditionFailed", name, err)
		}
	}
}

// The check that decides whether a lost answer landed reads with retries,
// and a check that cannot read says so (transient) instead of reporting
// the put refused: a "refused" would tell a blob's uploader that someone
// else's object holds the key.
func TestRetryLandedCheckFailures(t *testing.T) {
	f := newFlaky(t)
	c := remote.WithRetry(f, fast)
	ctx := t.Context()
	data := bytes.Repeat([]byte("landed "), 1000)

	f.landFirst = true
	f.fails["put"], f.fails["stat"], f.fails["get"] = 1, 1, 1
	if err := c.Put(ctx, "once", data, remote.PutOptions{IfAbsent: true}); err != nil {
		t.Errorf("IfAbsent put whose answer was lost, checked through failing reads: %v", err)
	}
	f.landFirst = false

	f.fails["put"], f.fails["stat"], f.fails["get"] = 1, 1000, 1000
	err := c.Put(ctx, "once", []byte("other"), remote.PutOptions{IfAbsent: true})
	if errors.Is(err, remote.ErrPreconditionFailed) || !remote.IsTransient(err) {
		t.Errorf("IfAbsent put whose check cannot read: %v, want a transient error", err)
	}
	f.fails["stat"], f.fails["get"] = 0, 0
	if got := getAll(t, f.Client, "once"); !bytes.Equal(got, data) {
		t.Errorf("stored %d bytes, not the first put's", len(got))
	}
}

func getAll(t *testing.T, c remote.Client, key string) []byte {
	t.Helper()
	rc, err := c.Get(t.Context(), key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An IfMatch put whose first answer was lost finds its own bytes there
// (the ETag changed to theirs) and reports success; over another writer's
// bytes it fails.
func TestRetryIfMatchLostAnswer(t *testing.T) {
	f := newFlaky(t)
	putKeys(t, f.Client, "cat")
	read, err := f.Client.Stat(t.Context(), "cat")
	if err != nil {
		t.Fatal(err)
	}
	f.landFirst = true
	c := remote.WithRetry(f, fast)
	f.fails["put"] = 1
	if err := c.Put(t.Context(), "cat", []byte("mine"), remote.PutOptions{IfMatch: read.ETag}); err != nil {
		t.Errorf("IfMatch put whose first answer was lost: %v", err)
	}
	f.landFirst = false
	f.fails["put"] = 1
	err = c.Put(t.Context(), "cat", []byte("stale"), remote.PutOptions{IfMatch: read.ETag})
	if !errors.Is(err, remote.ErrPreconditionFailed) {
		t.Errorf("IfMatch put over other bytes: err = %v, want ErrPreconditionFailed", err)
	}
}

func putKeys(t *testing.T, c remote.Client, keys ...string) {
	for _, k := range keys {
		if err := c.Put(t.Context(), k, []byte(k), remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func collect(t *testing.T, seq iter.Seq2[remote.ObjectInfo, error]) ([]string, error) {
	var keys []string
	for info, err := range seq {
		if err != nil {
			return keys, err
		}
		keys = append(keys, info.Key)
	}
	return keys, nil
}

// A listing that breaks part way resumes after the last key it yielded, and
// yields nothing twice, also when the last thing was a common prefix.
func TestRetryListResumes(t *testing.T) {
	f := newFlaky(t)
	putKeys(t, f.Client, "a/1", "a/2", "b", "c/1", "d")
	c := remote.WithRetry(f, fast)

	f.listAfter, f.fails["list"] = 2, 2
	keys, err := collect(t, c.List(t.Context(), "", remote.ListOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/1", "a/2", "b", "c/1", "d"}; !slices.Equal(keys, want) {
		t.Errorf("keys = %q, want %q", keys, want)
	}
	if want := []string{"", "a/2", "c/1"}; !slices.Equal(f.starts, want) {
		t.Errorf("StartAfter of each try = %q, want %q", f.starts, want)
	}

	f.starts = nil
	f.listAfter, f.fails["list"] = 1, 1
	keys, err = collect(t, c.List(t.Context(), "", remote.ListOptions{Delimiter: "/"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/", "b", "c/", "d"}; !slices.Equal(keys, want) {
		t.Errorf("delimited keys = %q, want %q", keys, want)
	}
}

func TestRetryListFailsBeforeAnything(t *testing.T) {
	f := newFlaky(t)
	putKeys(t, f.Client, "x")
	c := remote.WithRetry(f, fast)
	f.fails["list"] = 3
	keys, err := collect(t, c.List(t.Context(), "", remote.ListOptions{}))
	if err != nil || !slices.Equal(keys, []string{"x"}) {
		t.Errorf("list = %q, %v; want [x] after 3 failures", keys, err)
	}
	f.fails["list"] = 4
	if _, err := collect(t, c.List(t.Context(), "", remote.ListOptions{})); !errors.Is(err, errFlaky) {
		t.Errorf("list failing 4 times: err = %v, want the transient error", err)
	}
}

func TestDefaultRetryUsedForZeroPolicy(t *testing.T) {
	f := newFlaky(t)
	f.fails["put"] = 100
	var n int
	p := remote.RetryPolicy{Base: time.Microsecond, Max: time.Microsecond,
		OnRetry: func(string, string, int, time.Duration, error) { n++ }}
	_ = remote.WithRetry(f, p).Put(t.Context(), "k", nil, remote.PutOptions{})
	if f.calls["put"] != remote.DefaultRetry.MaxAttempts || n != remote.DefaultRetry.MaxAttempts-1 {
		t.Errorf("%d calls, %d retries; want DefaultRetry.MaxAttempts=%d calls", f.calls["put"], n, remote.DefaultRetry.MaxAttempts)
	}
}
