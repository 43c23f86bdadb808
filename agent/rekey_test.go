package agent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
)

// rekey while an agent uploads, as a user runs it: sessions grow and appear
// all along, the agent replaces its catalog and its recent object every
// interval, and rekey re-encrypts every object, over and over for 1.5 s.
// Afterwards every session restores byte for byte and the listing shows
// every session the agent uploaded: rekey put back no older catalog.
func TestRekeyWhileAgentUploads(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		idFile, _, _, err := crypt.NewIdentityFile(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		keyPath := filepath.Join(t.TempDir(), "key.txt")
		if err := os.WriteFile(keyPath, idFile, 0o600); err != nil {
			t.Fatal(err)
		}
		codec := func() *crypt.Codec {
			cd, err := crypt.New(crypt.Options{IdentityFile: keyPath})
			if err != nil {
				t.Fatal(err)
			}
			return cd
		}
		e := newEnv(t, c)
		e.repo = repo.New(e.client, codec())
		e.opts.Interval = 100 * time.Millisecond
		rel := func(i int) string {
			return fmt.Sprintf("sessions/-w/2026-10-07T00-45-40-%03dZ_0190bbbb-0000-7000-8000-%012d.jsonl", i, i)
		}
		newSession := func(i int) {
			e.writeRename(rel(i), []byte(fmt.Sprintf(`{"type":"session","version":3,"id":"0190bbbb-0000-7000-8000-%012d","timestamp":"2026-10-07T00:45:40.000Z","cwd":"/w"}`+"\n", i)))
		}
		for i := range 3 {
			newSession(i)
		}
		stop := e.runAgent()

		writing := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			n := 3
			for k := 0; ; k++ {
				select {
				case <-writing:
					return
				case <-time.After(15 * time.Millisecond):
				}
				if k%5 == 0 {
					newSession(n)
					n++
				}
				e.appendTo(rel(k%n), entryLine(fmt.Sprintf("%08x", k), "", "work while rekey runs"))
			}
		}()
		ctx := context.Background()
		waitFor(t, "the first sessions on the remote", func() bool {
			l, _, err := listOMP(ctx, repo.New(c, codec()))
			return err == nil && len(l) >= 3
		})
		runs := 0
		for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); runs++ {
			// A catalog replaced at every read is left to the next run, as
			// the user would run it again.
			var err error
			for try := 0; try < 5; try++ {
				if _, err = repo.New(c, codec()).Rekey(ctx, repo.RekeyOptions{Force: true}); err == nil || !strings.Contains(err.Error(), "run 'ompsync rekey' again") {
					break
				}
			}
			if err != nil {
				t.Fatalf("rekey while the agent uploads: %v", err)
			}
		}
		close(writing)
		<-done
		stop()
		t.Logf("%d rekey runs while the agent uploaded", runs)

		local := map[string][]byte{}
		entries, _ := os.ReadDir(e.path("sessions/-w"))
		for _, d := range entries {
			local["sessions/-w/"+d.Name()] = e.read("sessions/-w/" + d.Name())
		}
		r := repo.New(c, codec())
		listed, problems, err := listOMP(ctx, r)
		if err != nil || len(problems) > 0 {
			t.Fatalf("ls: %v %v", err, problems)
		}
		if len(listed) != len(local) {
			t.Errorf("ls shows %d sessions, the agent uploaded %d", len(listed), len(local))
		}
		to := t.TempDir()
		rep, err := restore.Run(ctx, r, nil, restore.Options{All: true, AgentDir: to})
		if err != nil || !restoredAll(rep) {
			t.Fatalf("restore --all: %+v, %v", rep, err)
		}
		for p, want := range local {
			got, err := os.ReadFile(filepath.Join(to, p))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: restored %d bytes, the file has %d (%v)", p, len(got), len(want), err)
			}
		}
	})
}
