package agent

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/repotest"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/repo"
)

// A file that shrinks, is truncated or is rewritten in place between the
// agent's stat and its read of new bytes (the hook runs at exactly that
// point): no byte that was not in the file reaches the remote, every
// generation reassembles to a state the file really had (up to a line
// boundary), and the next pass backs up what the file holds then.
func TestFileChangesUnderRead(t *testing.T) {
	orig := corpus(t, ompFile)
	half := int64(bytes.IndexByte(orig[len(orig)/2:], '\n') + len(orig)/2 + 1)
	other := bytes.ReplaceAll(orig, []byte("e"), []byte("E")) // same length, other bytes
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, p string)
	}{
		// omp's file cut back while new lines are read: the stat promised
		// bytes the read does not get.
		{"shrinks", func(t *testing.T, p string) { truncate(t, p, half+(int64(len(orig))-half)/2) }},
		{"truncated to nothing", func(t *testing.T, p string) { truncate(t, p, 0) }},
		{"truncated below what was uploaded", func(t *testing.T, p string) { truncate(t, p, half/2) }},
		// Rewritten through the same inode: reads then see other bytes
		// at every offset, before and after what was uploaded.
		{"rewritten in place", func(t *testing.T, p string) { overwrite(t, p, other) }},
		{"rewritten in place, longer", func(t *testing.T, p string) {
			overwrite(t, p, append(append([]byte(nil), other...), entryLine("cccc0001", "", "more")...))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := file.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, c)
			e.opts.ChunkSize = 2 << 10 // several chunks, so reads go on after the change
			e.writeRename(ompRel, orig[:half])
			e.once()
			e.appendTo(ompRel, orig[half:])

			// Every state the file has had; the remote may hold any of
			// them up to a line boundary, and nothing else.
			states := [][]byte{orig[:half], orig}
			a, err := New(e.repo, e.opts)
			if err != nil {
				t.Fatal(err)
			}
			fired := false
			a.beforeRead = func(rel string) {
				if rel == ompRel && !fired {
					fired = true
					tc.change(t, e.path(ompRel))
					states = append(states, e.read(ompRel))
				}
			}
			err = a.Once(context.Background())
			a.Close()
			if err != nil {
				t.Fatalf("pass with the file changing under it: %v", err)
			}
			if !fired {
				t.Fatal("the hook never ran: no read of new bytes")
			}
			assertEveryGenerationWasAState(t, e, states)

			e.once()
			assertEveryGenerationWasAState(t, e, states)
			if len(e.read(ompRel)) > 0 {
				e.assertRemoteEquals(ompRel, ompID)
			}
		})
	}
}

func truncate(t *testing.T, p string, n int64) {
	t.Helper()
	if err := os.Truncate(p, n); err != nil {
		t.Fatal(err)
	}
}

// overwrite rewrites the file through its own inode (O_TRUNC), as a
// careless editor would.
func overwrite(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// assertEveryGenerationWasAState checks that each generation of the session
// on the remote reassembles to a prefix, ending after a newline, of one of
// the states the file had.
func assertEveryGenerationWasAState(t *testing.T, e *env, states [][]byte) {
	t.Helper()
	s := repo.Stream{SessionID: ompID, Machine: e.machine, Name: repo.SessionStream}
	for _, g := range e.generations(ompID, repo.SessionStream) {
		if !g.HasMeta {
			continue
		}
		as, err := repotest.ReadGeneration(context.Background(), e.repo, s, g, 1<<30)
		if err != nil {
			t.Errorf("generation %s does not reassemble: %v", g.Name, err)
			continue
		}
		was := false
		for _, st := range states {
			settled := st[:bytes.LastIndexByte(st, '\n')+1]
			if len(as.Data) <= len(settled) && bytes.Equal(as.Data, settled[:len(as.Data)]) && (len(as.Data) == 0 || as.Data[len(as.Data)-1] == '\n') {
				was = true
			}
		}
		if !was {
			t.Errorf("generation %s holds %d bytes (%d NULs) that were never the file's", g.Name, len(as.Data), bytes.Count(as.Data, []byte{0}))
		}
	}
}

// A file that changes at every read is left for the next pass with an
// error naming it, and nothing it never held is uploaded.
func TestFileKeepsChangingUnderRead(t *testing.T) {
	c, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, c)
	e.opts.ChunkSize = 2 << 10
	orig := corpus(t, ompFile)
	other := bytes.ReplaceAll(orig, []byte("e"), []byte("E"))
	half := int64(bytes.IndexByte(orig[len(orig)/2:], '\n') + len(orig)/2 + 1)
	e.writeRename(ompRel, orig[:half])
	e.once()
	e.appendTo(ompRel, orig[half:])
	a, err := New(e.repo, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	a.beforeRead = func(string) {
		n++
		overwrite(t, e.path(ompRel), [][]byte{orig, other}[n%2])
	}
	err = a.Once(context.Background())
	a.Close()
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("changed while it was read")) {
		t.Fatalf("pass over a file changing at every read: %v, want it named as changing", err)
	}
	assertEveryGenerationWasAState(t, e, [][]byte{orig[:half], orig, other})
}
