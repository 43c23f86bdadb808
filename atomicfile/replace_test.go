package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var errBusy = errors.New("the process cannot access the file because it is being used by another process")

// The Windows way of replacing: a rename refused while another program has
// the file open is tried again, and succeeds once the file is closed.
func TestReplaceRetryingWaitsForTheFileToClose(t *testing.T) {
	dir := t.TempDir()
	tmp, name := filepath.Join(dir, "tmp"), filepath.Join(dir, "s.jsonl")
	if err := os.WriteFile(tmp, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	refusals := 3 // the other program closes the file after three tries
	rename := func(a, b string) error {
		if refusals > 0 {
			refusals--
			return &os.LinkError{Op: "rename", Old: a, New: b, Err: errBusy}
		}
		return os.Rename(a, b)
	}
	busy := func(err error) bool { return errors.Is(err, errBusy) }
	if err := replaceRetrying(tmp, name, rename, busy, time.Minute); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(name); string(b) != "new\n" || refusals != 0 {
		t.Errorf("file holds %q after %d refusals left; want the new bytes", b, refusals)
	}
}

// A file that stays open is left as it was, with an error that says why
// and what to do; any other failure is returned at once.
func TestReplaceRetryingGivesUp(t *testing.T) {
	calls := 0
	busyRename := func(a, b string) error { calls++; return &os.LinkError{Op: "rename", Old: a, New: b, Err: errBusy} }
	busy := func(err error) bool { return errors.Is(err, errBusy) }
	err := replaceRetrying("tmp", `C:\Users\a\.claude\projects\p\s.jsonl`, busyRename, busy, 50*time.Millisecond)
	if !errors.Is(err, errBusy) || !strings.Contains(err.Error(), `another program has C:\Users\a\.claude\projects\p\s.jsonl open`) || !strings.Contains(err.Error(), "close it and run again") {
		t.Errorf("err = %v", err)
	}
	if calls < 2 {
		t.Errorf("%d tries; want it tried again", calls)
	}
	calls = 0
	other := errors.New("disk full")
	err = replaceRetrying("tmp", "name", func(string, string) error { calls++; return other }, busy, time.Minute)
	if !errors.Is(err, other) || calls != 1 {
		t.Errorf("err = %v after %d tries; want the error at once", err, calls)
	}
}
