package restore

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// New sessions are synced and linked into place after the transfers moved
// on. One whose name is taken meanwhile (after the last look, with an old
// mtime, so no check before the write sees it) fails with the reason, the
// file there is left as it was, and every other session is restored byte
// for byte with its mtime: a late failure is never reported as restored.
func TestRestorePlacesNewSessionsAfterTransfers(t *testing.T) {
	r := fileRemote(t)
	src := newMachine(t, r, "laptop")
	mtime := time.Date(2026, 10, 7, 1, 0, 0, 0, time.UTC)
	want := map[string][]byte{}
	for i := range 40 {
		id := fmt.Sprintf("019a0000-0000-7000-8000-%012d", i)
		rel := sessionPath("-work-p"+itoa(i%3), id, i)
		data := []byte(fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-10-07T00:45:40.000Z","cwd":"/work/p"}`+"\n", id) +
			strings.Repeat(fmt.Sprintf(`{"type":"message","id":"m%d","text":"line of session %d"}`+"\n", i, i), 20+i*50))
		src.write(rel, data, mtime)
		want[rel] = data
	}
	src.backup()

	dst := newMachine(t, r, "desk")
	taken := sessionPath("-work-p1", "019a0000-0000-7000-8000-000000000007", 7)
	theirs := []byte("not a session of the backup\n")
	rep, err := dst.restore(nil, Options{All: true, beforeWrite: func(dest string) {
		if dest == taken {
			dst.write(taken, theirs, mtime.Add(-time.Hour))
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() {
		t.Fatalf("restore OK with a session's name taken")
	}
	for _, res := range rep.Results {
		if res.Path == taken || strings.HasSuffix(taken, res.ID+".jsonl") {
			if res.Action != Failed || !strings.Contains(res.Error, "appeared while restoring") {
				t.Fatalf("the session whose name was taken: %+v, want failed, saying it appeared", res)
			}
			continue
		}
		if res.Action != Created {
			t.Fatalf("session %s: %+v, want created", res.ID, res)
		}
	}
	if got := dst.read(taken); !bytes.Equal(got, theirs) {
		t.Fatalf("the file that took the name was changed: %q", got)
	}
	for rel, data := range want {
		if rel == taken {
			continue
		}
		if got := dst.read(rel); !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes restored, want %d", rel, len(got), len(data))
		}
		fi, err := os.Stat(dst.path(rel))
		if err != nil || !fi.ModTime().Equal(mtime) {
			t.Fatalf("%s: mtime %v (%v), want %v", rel, fi.ModTime(), err, mtime)
		}
	}
	noTempFiles(t, dst.agentDir)
}
