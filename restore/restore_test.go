package restore

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ompsync/ompsync/atomicfile"
	"github.com/ompsync/ompsync/internal/testkit/repotest"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/safename"
	"github.com/ompsync/ompsync/session"
	"github.com/ompsync/ompsync/store"
)

var base = time.Date(2026, 10, 7, 1, 2, 3, 456789123, time.UTC)

// Delete a session, restore it by an 8-character prefix in upper case: same
// bytes, same mtime, same path. For every file in the corpus.
func TestRestoreDeletedSessionByPrefix(t *testing.T) {
	eachRemote(t, func(t *testing.T, r *repo.Repo) {
		m := newMachine(t, r, "laptop")
		files := corpus(t)
		rels := map[string]string{}
		for i, f := range files {
			rel := sessionPath("-.omp-work", f.id, i)
			rels[f.id] = rel
			m.write(rel, f.data, base.Add(time.Duration(i)*time.Hour))
		}
		m.backup()
		want := snapshot(t, m.agentDir)
		if err := os.RemoveAll(m.path("sessions")); err != nil {
			t.Fatal(err)
		}
		m.backupConfirmingDeletions() // all at once: confirmed
		if rep := m.restoreOK(nil, Options{All: true, DryRun: true}); len(rep.Results) != 0 || rep.DeletedLeft != len(files) {
			t.Fatalf("--all: %d results, %d left out as deleted; want 0 and %d", len(rep.Results), rep.DeletedLeft, len(files))
		}

		for _, f := range files {
			rel := rels[f.id]
			prefix := strings.ToUpper(f.id[:8])
			rep := m.restoreOK([]string{prefix}, Options{})
			if len(rep.Results) != 1 {
				t.Fatalf("%s: %d results", prefix, len(rep.Results))
			}
			res := rep.Results[0]
			if res.ID != f.id || res.Action != Created || res.Path != rel || res.Bytes != int64(len(f.data)) {
				t.Errorf("%s (%s): result %+v", prefix, f.name, res)
			}
			got := m.read(rel)
			if !bytes.Equal(got, f.data) {
				t.Errorf("%s: restored %d bytes differ from the original %d", f.name, len(got), len(f.data))
			}
			fi, err := os.Stat(m.path(rel))
			if err != nil {
				t.Fatal(err)
			}
			if !fi.ModTime().Equal(want[rel].mtime) {
				t.Errorf("%s: mtime %v, want %v", f.name, fi.ModTime(), want[rel].mtime)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, want 0600", f.name, fi.Mode().Perm())
			}
		}
		for _, d := range []string{"sessions", "sessions/-.omp-work"} {
			if fi, err := os.Stat(m.path(d)); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("folder %s: %v %v, want mode 0700", d, fi.Mode(), err)
			}
		}
		sameTree(t, want, snapshot(t, m.agentDir), func(string) bool { return true }, "sessions")

		// A second restore finds nothing to do.
		var all []string
		for _, f := range files {
			all = append(all, f.id[:8])
		}
		for _, res := range m.restoreOK(all, Options{}).Results {
			if res.Action != Unchanged || res.Bytes != 0 {
				t.Errorf("second restore of %s: %+v", res.ID, res)
			}
		}
	})
}

// restore --all --to an empty folder reproduces the whole tree byte for
// byte: sessions in several folders, artifact folders, blobs, and archived
// sessions (which come back into sessions/).
func TestRestoreAllToEmptyDir(t *testing.T) {
	eachRemote(t, func(t *testing.T, r *repo.Repo) {
		src := newMachine(t, r, "laptop")
		files := corpus(t)
		blob := []byte("\x89PNG not really an image \x00\x01\x02")
		blobName := repo.HashHex(blob)
		lone := []byte("a blob no session references")
		src.write("blobs/"+blobName, blob, base)
		src.write("blobs/"+repo.HashHex(lone), lone, base)
		// omp's hard link for image viewers.
		if err := os.Link(src.path("blobs/"+blobName), src.path("blobs/"+blobName+".png")); err != nil {
			t.Fatal(err)
		}
		var withArtifacts string
		for i, f := range files {
			dir := "-.omp-work"
			if i%2 == 1 {
				dir = "--opt-src-api--"
			}
			rel := sessionPath(dir, f.id, i)
			data := f.data
			if i == 0 {
				withArtifacts = rel
				data = append(bytes.Clone(data), fmt.Sprintf(`{"type":"message","id":"b10b0001","parentId":null,"timestamp":"2026-10-07T02:00:00.000Z","image":"blob:sha256:%s"}`+"\n", blobName)...)
			}
			src.write(rel, data, base.Add(time.Duration(i)*time.Minute))
		}
		art := strings.TrimSuffix(withArtifacts, ".jsonl")
		src.write(art+"/subagents/0001.jsonl", []byte(`{"type":"session","id":"sub-1"}`+"\n"+`{"type":"message","id":"00000001"}`+"\n"), base)
		src.write(art+"/tool-1.log", []byte("binary \x00\xff log without a final newline"), base)

		// A session that omp archived after it was backed up.
		arch := corpus(t)[0]
		archID := "0archive-0000-7000-8000-000000000001"
		archData := bytes.Replace(arch.data, []byte(arch.id), []byte(archID), 1)
		archRel := sessionPath("-.omp-work", archID, 99)
		src.write(archRel, archData, base.Add(-time.Hour))
		src.backup()
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(archData)
		zw.Close()
		src.write("archive/"+archRel+".gz", gz.Bytes(), base)
		if err := os.Remove(src.path(archRel)); err != nil {
			t.Fatal(err)
		}
		// And one the user deleted.
		delID := "0deleted-0000-7000-8000-000000000001"
		delRel := sessionPath("-.omp-work", delID, 98)
		src.write(delRel, bytes.Replace(arch.data, []byte(arch.id), []byte(delID), 1), base)
		src.backup()
		if err := os.Remove(src.path(delRel)); err != nil {
			t.Fatal(err)
		}
		src.backup()

		want := snapshot(t, src.agentDir)
		want[archRel] = fileState{data: archData, mode: 0o600, mtime: base.Add(-time.Hour)}
		to := filepath.Join(t.TempDir(), "new", "agent")
		rep := src.restoreOK(nil, Options{All: true, AgentDir: to})
		if len(rep.Results) != len(files)+1 {
			t.Errorf("restored %d sessions, want %d: %+v", len(rep.Results), len(files)+1, rep.Results)
		}
		got := snapshot(t, to)
		// An archived session gets the mtime of its archive, which is what
		// the agent last uploaded from.
		isSession := func(rel string) bool { return store.OMP().Classify(rel) == store.KindSession && rel != archRel }
		sameTree(t, want, got, isSession, "sessions", "blobs")
		sameInode(t, filepath.Join(to, "blobs", blobName), filepath.Join(to, "blobs", blobName+".png"))
		if _, ok := got[delRel]; ok {
			t.Errorf("deleted session %s restored without --include-deleted", delRel)
		}
		for rel, st := range got {
			perm := st.mode.Perm()
			if st.mode.IsDir() && perm != 0o700 || !st.mode.IsDir() && perm != 0o600 {
				t.Errorf("%s: mode %v", rel, st.mode)
			}
		}

		// --include-deleted brings the deleted one back too; the rest is
		// already there.
		rep = src.restoreOK(nil, Options{All: true, IncludeDeleted: true, AgentDir: to})
		for _, res := range rep.Results {
			want := Unchanged
			if res.ID == delID {
				want = Created
			}
			if res.Action != want {
				t.Errorf("%s: %s, want %s", res.ID, res.Action, want)
			}
		}
		if _, err := os.Stat(filepath.Join(to, filepath.FromSlash(delRel))); err != nil {
			t.Errorf("deleted session not restored with --include-deleted: %v", err)
		}
	})
}

// lines are omp entries for tests, with ids and times that order them.
func entry(id, parent string, at time.Time, text string) string {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	return fmt.Sprintf(`{"type":"message","id":"%s","parentId":%s,"timestamp":"%s","message":{"role":"user","content":[{"type":"text","text":%q}]}}`+"\n",
		id, p, at.UTC().Format("2006-01-02T15:04:05.000Z"), text)
}

func lastEntryID(t *testing.T, b []byte) string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	e, ok := session.ParseEntry([]byte(lines[len(lines)-1]))
	if !ok {
		t.Fatalf("last line is not an entry: %q", lines[len(lines)-1])
	}
	return e.ID
}

// The local file is a prefix of the backup: the missing bytes are appended
// (the same file, not a replacement); equal or ahead: nothing is done.
func TestRestoreAppendsOrLeavesAlone(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0] // an omp file with a title slot
	a := newMachine(t, r, "desktop")
	rel := sessionPath("-.omp-work", f.id, 1)
	a.write(rel, f.data, base)
	a.backup()

	cut := bytes.LastIndexByte(f.data[:len(f.data)/2], '\n') + 1
	for _, tc := range []struct {
		name  string
		local []byte
		want  Action
		final []byte
	}{
		{"prefix", f.data[:cut], Appended, f.data},
		{"half a line", f.data[:cut+10], Appended, f.data},
		{"equal", f.data, Unchanged, f.data},
		{"ahead", append(bytes.Clone(f.data), entry("ffff0001", "", base, "more")...), Unchanged, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMachine(t, r, "laptop")
			b.write(rel, tc.local, base.Add(-time.Hour))
			before, _ := os.Stat(b.path(rel))
			rep := b.restoreOK([]string{f.id[:8]}, Options{})
			res := rep.Results[0]
			if res.Action != tc.want || res.Path != rel {
				t.Fatalf("result %+v, want %s", res, tc.want)
			}
			final := tc.final
			if final == nil {
				final = tc.local
			}
			if got := b.read(rel); !bytes.Equal(got, final) {
				t.Fatalf("file holds %d bytes, want %d", len(got), len(final))
			}
			after, _ := os.Stat(b.path(rel))
			if !os.SameFile(before, after) {
				t.Errorf("the file was replaced, not appended to")
			}
			if tc.want == Appended {
				if res.Bytes != int64(len(f.data)-len(tc.local)) {
					t.Errorf("appended %d bytes, want %d", res.Bytes, len(f.data)-len(tc.local))
				}
				if !after.ModTime().Equal(base) {
					t.Errorf("mtime %v, want the backup's %v", after.ModTime(), base)
				}
			}
		})
	}
}

// A rename on the other machine rewrote the title slot and appended a
// title_change entry: the local prefix gains both.
func TestRestoreAppendTakesNewerTitle(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	rel := sessionPath("-.omp-work", f.id, 1)
	renamed := retitled(t, f.data, "Login", "2026-10-08T00:00:00.000Z")
	renamed = append(renamed, `{"type":"title_change","id":"7171aaaa","parentId":null,"timestamp":"2026-10-08T00:00:00.000Z","title":"Login"}`+"\n"...)
	a := newMachine(t, r, "desktop")
	a.write(rel, renamed, base)
	a.backup()

	b := newMachine(t, r, "laptop")
	b.write(rel, f.data, base.Add(-time.Hour))
	rep := b.restoreOK([]string{f.id}, Options{})
	if res := rep.Results[0]; res.Action != Appended {
		t.Fatalf("result %+v", res)
	}
	if got := b.read(rel); !bytes.Equal(got, renamed) {
		t.Fatalf("restored file differs from the renamed copy (first diff near the title slot?)")
	}
}

// A new session takes the newest title slot too: one machine's copy holds
// more lines, another's a newer title, and the file created here has both,
// whether the copy is held in memory (the placer writes it) or not.
func TestRestoreCreatedTakesNewerTitle(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	rel := sessionPath("-.omp-work", f.id, 1)
	a := newMachine(t, r, "desktop")
	a.write(rel, f.data, base)
	a.backup()
	b := newMachine(t, r, "laptop")
	b.write(rel, retitled(t, f.data[:lineCut(f.data, len(f.data)/2)], "Login", "2030-10-08T00:00:00.000Z"), base.Add(-time.Hour))
	b.backup()

	c := newMachine(t, r, "third")
	if res := c.restoreOK([]string{f.id}, Options{}).Results[0]; res.Action != Created {
		t.Fatalf("result %+v", res)
	}
	if got, want := c.read(rel), retitled(t, f.data, "Login", "2030-10-08T00:00:00.000Z"); !bytes.Equal(got, want) {
		t.Fatalf("the new file lacks the newer title: %.120q", got)
	}
}

// retitled returns data with its title slot rewritten in place, as omp's
// /rename does (same size).
func retitled(t *testing.T, data []byte, title, at string) []byte {
	t.Helper()
	slot, ok := session.ParseTitleSlot(data)
	if !ok {
		t.Fatal("the file has no title slot")
	}
	b, err := json.Marshal(struct {
		Type      string `json:"type"`
		V         int    `json:"v"`
		Title     string `json:"title"`
		UpdatedAt string `json:"updatedAt"`
		Pad       string `json:"pad"`
	}{"title", 1, title, at, ""})
	if err != nil {
		t.Fatal(err)
	}
	pad := session.TitleSlotSize - 1 - len(b)
	if pad < 0 || slot.UpdatedAt == "" {
		t.Fatalf("title %q does not fit the slot", title)
	}
	b = bytes.Replace(b, []byte(`"pad":""`), []byte(`"pad":"`+strings.Repeat(" ", pad)+`"`), 1)
	out := append(append(b, '\n'), data[session.TitleSlotSize:]...)
	if _, ok := session.ParseTitleSlot(out); !ok {
		t.Fatalf("made a bad slot: %q", b)
	}
	return out
}

// A title changed elsewhere while the bytes after the slot did not (or the
// local file is even ahead): the local file takes the newer title, so
// machines converge on it; an older title changes nothing.
func TestRestoreTakesNewerTitleAlone(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	rel := sessionPath("-.omp-work", f.id, 1)
	a := newMachine(t, r, "desktop")
	remote := retitled(t, f.data, "Renamed on the desktop", "2026-10-08T00:00:00.000Z")
	a.write(rel, remote, base)
	a.backup()

	ahead := append(bytes.Clone(f.data), entry("ffff0001", "", base, "more")...)
	for _, tc := range []struct {
		name        string
		local, want []byte
		action      Action
	}{
		{"equal bytes", f.data, remote, Retitled},
		{"local ahead", ahead, append(bytes.Clone(remote), entry("ffff0001", "", base, "more")...), Retitled},
		{"local title newer", retitled(t, f.data, "Mine", "2026-10-09T00:00:00.000Z"), nil, Unchanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMachine(t, r, "laptop")
			b.write(rel, tc.local, base.Add(-time.Hour))
			rep := b.restoreOK([]string{f.id[:8]}, Options{})
			if res := rep.Results[0]; res.Action != tc.action {
				t.Fatalf("result %+v, want %s", res, tc.action)
			}
			want := tc.want
			if want == nil {
				want = tc.local
			}
			if got := b.read(rel); !bytes.Equal(got, want) {
				t.Fatalf("file holds %q..., want %q...", got[:session.TitleSlotSize], want[:session.TitleSlotSize])
			}
			if rep := b.restoreOK([]string{f.id[:8]}, Options{}); rep.Results[0].Action != Unchanged {
				t.Fatalf("a second restore did %s", rep.Results[0].Action)
			}
		})
	}
}

// Two titles set at the same moment on two machines: each machine, seeing
// the other's, picks the same one, so they converge instead of swapping.
func TestRestoreTitleTieConverges(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	rel := sessionPath("-.omp-work", f.id, 1)
	at := "2026-10-08T00:00:00.000Z"
	a, b := newMachine(t, r, "desktop"), newMachine(t, r, "laptop")
	a.write(rel, retitled(t, f.data, "Alpha", at), base)
	b.write(rel, retitled(t, f.data, "Bravo", at), base)
	a.backup()
	b.backup()
	a.restoreOK([]string{f.id}, Options{Machine: "laptop"})
	b.restoreOK([]string{f.id}, Options{Machine: "desktop"})
	if ga, gb := a.read(rel), b.read(rel); !bytes.Equal(ga, gb) {
		t.Fatalf("the machines disagree: %q against %q", ga[:session.TitleSlotSize], gb[:session.TitleSlotSize])
	}
}

// The session went on in two places: restore merges by entry id, keeps the
// pre-merge file hidden beside it, and a second restore does nothing.
func TestRestoreMergesDivergedSession(t *testing.T) {
	eachRemote(t, func(t *testing.T, r *repo.Repo) {
		f := corpus(t)[0]
		rel := sessionPath("-.omp-work", f.id, 1)
		a := newMachine(t, r, "desktop")
		a.write(rel, f.data, base)
		a.backup()

		b := newMachine(t, r, "laptop")
		b.restoreOK([]string{f.id[:8]}, Options{})
		last := lastEntryID(t, f.data)
		b.appendTo(rel, entry("1a000001", last, base.Add(time.Hour), "laptop work"), base.Add(time.Hour))
		a.appendTo(rel, entry("de000001", last, base.Add(2*time.Hour), "desktop work")+entry("de000002", "de000001", base.Add(3*time.Hour), "desktop more"), base.Add(3*time.Hour))
		a.backup()
		b.backup()
		bBefore := b.read(rel)

		rep := b.restoreOK([]string{f.id[:8]}, Options{Now: func() time.Time { return base.Add(4 * time.Hour) }})
		res := rep.Results[0]
		if res.Action != Merged || res.Backup == "" {
			t.Fatalf("result %+v", res)
		}
		got := b.read(rel)
		for _, l := range strings.SplitAfter(string(a.read(rel))+string(bBefore), "\n") {
			if l != "" && !strings.Contains(string(got), l) {
				t.Errorf("merged file lacks a line: %.80q", l)
			}
		}
		if n := strings.Count(string(got), "\n"); n != strings.Count(string(f.data), "\n")+3 {
			t.Errorf("merged file has %d lines, want %d", n, strings.Count(string(f.data), "\n")+3)
		}
		if id := lastEntryID(t, got); id != "de000002" {
			t.Errorf("last entry %s, want the newest de000002", id)
		}
		base := filepath.Base(res.Backup)
		if !strings.HasPrefix(base, ".") || strings.HasSuffix(base, ".jsonl") || filepath.Dir(res.Backup) != filepath.Dir(rel) {
			t.Errorf("backup %s: want a hidden name beside the session, not ending in .jsonl", res.Backup)
		}
		if kept := b.read(res.Backup); !bytes.Equal(kept, bBefore) {
			t.Errorf("backup holds %d bytes, want the %d of the pre-merge file", len(kept), len(bBefore))
		}
		if again := b.restoreOK([]string{f.id[:8]}, Options{}).Results[0]; again.Action != Unchanged {
			t.Errorf("second restore: %+v", again)
		}
	})
}

// Three machines went their own ways; a new machine gets all their work.
func TestRestoreMergesThreeMachinesIntoNewDir(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[5] // pi v3 with ids
	rel := sessionPath("-.omp-work", f.id, 1)
	last := lastEntryID(t, f.data)
	var lines []string
	for i, name := range []string{"a", "b", "c"} {
		m := newMachine(t, r, name)
		m.write(rel, f.data, base)
		var add string
		for j := range 3 {
			l := entry(fmt.Sprintf("%d000000%d", i+1, j), last, base.Add(time.Duration(10*j+i)*time.Minute), name)
			lines = append(lines, l)
			add += l
		}
		m.appendTo(rel, add, base.Add(time.Duration(i)*time.Hour))
		m.backup()
	}
	to := t.TempDir()
	n := newMachine(t, r, "new")
	rep := n.restoreOK([]string{f.id[:8]}, Options{AgentDir: to})
	if res := rep.Results[0]; res.Action != Created || len(res.Machines) != 3 {
		t.Fatalf("result %+v", res)
	}
	got, _ := os.ReadFile(filepath.Join(to, filepath.FromSlash(rel)))
	if !bytes.HasPrefix(got, f.data) {
		t.Errorf("merged file does not start with the shared history")
	}
	for _, l := range lines {
		if strings.Count(string(got), l) != 1 {
			t.Errorf("line %.60q appears %d times", l, strings.Count(string(got), l))
		}
	}
	if len(got) != len(f.data)+len(strings.Join(lines, "")) {
		t.Errorf("merged %d bytes, want %d", len(got), len(f.data)+len(strings.Join(lines, "")))
	}
	// --machine picks one copy.
	to2 := t.TempDir()
	n.restoreOK([]string{f.id[:8]}, Options{AgentDir: to2, Machine: "b"})
	got2, _ := os.ReadFile(filepath.Join(to2, filepath.FromSlash(rel)))
	if want := string(f.data) + strings.Join(lines[3:6], ""); string(got2) != want {
		t.Errorf("--machine b restored %d bytes, want b's %d", len(got2), len(want))
	}
}

// A file omp may be writing is skipped without --force.
func TestRestoreSkipsLiveFile(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	rel := sessionPath("-.omp-work", f.id, 1)
	a := newMachine(t, r, "desktop")
	a.write(rel, f.data, base)
	a.backup()
	prefix := f.data[:bytes.IndexByte(f.data[300:], '\n')+301]

	for _, tc := range []struct {
		name string
		prep func(b *machine)
		now  time.Time
	}{
		{"lock sidecar", func(b *machine) {
			b.write(filepath.ToSlash(filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+".lock")), []byte("123"), base)
		}, base.Add(time.Second)},
		{"lock sidecar without a dot", func(b *machine) {
			b.write(rel+".lock", []byte("123"), base)
		}, base.Add(time.Second)},
		{"just written", func(*machine) {}, base.Add(-time.Hour).Add(2 * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMachine(t, r, "laptop")
			b.write(rel, prefix, base.Add(-time.Hour))
			tc.prep(b)
			opts := Options{}
			if !tc.now.IsZero() {
				opts.Now = func() time.Time { return tc.now }
			}
			rep, err := b.restore([]string{f.id[:8]}, opts)
			if err != nil {
				t.Fatal(err)
			}
			res := rep.Results[0]
			if rep.OK() || res.Action != SkippedLive || !strings.Contains(res.Error, "--force") {
				t.Fatalf("result %+v", res)
			}
			if got := b.read(rel); !bytes.Equal(got, prefix) {
				t.Fatalf("live file changed")
			}
			opts.Force = true
			if res := b.restoreOK([]string{f.id[:8]}, opts).Results[0]; res.Action != Appended {
				t.Fatalf("with force: %+v", res)
			}
			if got := b.read(rel); !bytes.Equal(got, f.data) {
				t.Fatalf("forced restore: wrong bytes")
			}
		})
	}
}

// A lock sidecar left from a crash (or a flock file that stays) does not
// hold a session back for ever: only one made within the live window counts.
func TestRestoreIgnoresStaleLock(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	rel := sessionPath("-.omp-work", f.id, 1)
	a := newMachine(t, r, "desktop")
	a.write(rel, f.data, base)
	a.backup()
	b := newMachine(t, r, "laptop")
	prefix := f.data[:bytes.IndexByte(f.data[300:], '\n')+301]
	b.write(rel, prefix, base.Add(-time.Hour))
	b.write(rel+".lock", nil, base)
	b.write(filepath.ToSlash(filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+".lock")), []byte("123:0"), base)
	opts := Options{Now: func() time.Time { return base.Add(time.Hour) }}
	if res := b.restoreOK([]string{f.id[:8]}, opts).Results[0]; res.Action != Appended {
		t.Fatalf("with stale locks: %+v", res)
	}
}

// behind backs up a corpus session from desktop and gives laptop its first
// lines only, older: a restore on laptop appends the rest.
func behind(t *testing.T) (b *machine, f corpusFile, rel string, prefix []byte) {
	t.Helper()
	r := fileRemote(t)
	f = corpus(t)[0]
	rel = sessionPath("-.omp-work", f.id, 1)
	a := newMachine(t, r, "desktop")
	a.write(rel, f.data, base)
	a.backup()
	prefix = f.data[:bytes.IndexByte(f.data[300:], '\n')+301]
	b = newMachine(t, r, "laptop")
	b.write(rel, prefix, base.Add(-time.Hour))
	return b, f, rel, prefix
}

// holdOpen starts a process that holds path open for appending, as omp
// holds a session it has open; stop ends it (so does the test's end).
func holdOpen(t *testing.T, path string) (pid int, stop func()) {
	t.Helper()
	held, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	holder := exec.Command("sleep", "60")
	holder.Stdout = held
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { _ = holder.Process.Kill(); _ = holder.Wait() }) }
	t.Cleanup(stop)
	return holder.Process.Pid, stop
}

// A file a process holds open is never changed, not even with --force: omp
// would stop saving the session. The refusal names the process; once it
// exits the same restore goes through.
func TestRestoreRefusesHeldFile(t *testing.T) {
	b, f, rel, prefix := behind(t)
	pid, stop := holdOpen(t, b.path(rel))
	for _, force := range []bool{false, true} {
		rep, err := b.restore([]string{f.id[:8]}, Options{Force: force})
		if err != nil {
			t.Fatal(err)
		}
		res := rep.Results[0]
		want := fmt.Sprintf("pid %d: sleep", pid)
		if rep.OK() || res.Action != SkippedLive || !strings.Contains(res.Error, want) || !strings.Contains(res.Error, "close that session") {
			t.Fatalf("force=%v: result %+v, want skipped naming %q", force, res, want)
		}
		if got := b.read(rel); !bytes.Equal(got, prefix) {
			t.Fatalf("force=%v: a held file changed", force)
		}
	}
	stop()
	if res := b.restoreOK([]string{f.id[:8]}, Options{}).Results[0]; res.Action != Appended {
		t.Fatalf("after the holder exited: %+v", res)
	}
	if got := b.read(rel); !bytes.Equal(got, f.data) {
		t.Fatalf("after the holder exited: wrong bytes")
	}
}

// A session omp opens while its copies are fetched and merged (a merge of
// large diverged copies takes a minute) is looked at again right before
// anything of it is written: nothing is, and the result names the holder.
// A merge that took less than a scan's age is checked against that scan.
func TestRestoreRefusesFileOpenedDuringMerge(t *testing.T) {
	b, f, rel, prefix := behind(t)
	var mu sync.Mutex
	skew := time.Duration(0)
	pid, stop := 0, func() {}
	opts := Options{
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(skew) },
		beforeWrite: func(dest string) {
			if dest != rel || pid != 0 {
				return
			}
			pid, stop = holdOpen(t, b.path(rel))
			mu.Lock()
			skew += 2 * maxScanAge // the merge took that long
			mu.Unlock()
		},
	}
	rep, err := b.restore([]string{f.id[:8]}, opts)
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results[0]
	if pid == 0 {
		t.Fatalf("no check before the write (result %+v)", res)
	}
	want := fmt.Sprintf("pid %d: sleep", pid)
	if rep.OK() || res.Action != SkippedLive || !strings.Contains(res.Error, want) {
		t.Fatalf("result %+v, want skipped naming %q", res, want)
	}
	if got := b.read(rel); !bytes.Equal(got, prefix) {
		t.Fatalf("a file opened during the merge changed: %d bytes, want the %d it had", len(got), len(prefix))
	}
	stop()
	opts.beforeWrite = nil
	if res := b.restoreOK([]string{f.id[:8]}, opts).Results[0]; res.Action != Appended {
		t.Fatalf("after the holder exited: %+v", res)
	}
	if got := b.read(rel); !bytes.Equal(got, f.data) {
		t.Fatalf("after the holder exited: wrong bytes")
	}
}

// omp holds no descriptor on a session it resumed until it next appends,
// yet remembers the file's size: a session whose folder an omp process
// runs in (found by the agent database every omp keeps open) is not
// changed without --force.
func TestRestoreWaitsForOmpInSessionFolder(t *testing.T) {
	r := fileRemote(t)
	cwd, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const id = "019a0000-0000-7000-8000-0000000000cd"
	head := `{"type":"session","version":3,"id":"` + id + `","timestamp":"2026-10-07T00:45:40.000Z","cwd":"` + cwd + `"}` + "\n"
	full := head + entry("00000001", "", base, "one") + entry("00000002", "00000001", base, "two")
	rel := sessionPath("-work", id, 1)
	a := newMachine(t, r, "desktop")
	a.write(rel, []byte(full), base)
	a.backup()

	b := newMachine(t, r, "laptop")
	short := head + entry("00000001", "", base, "one")
	b.write(rel, []byte(short), base.Add(-time.Hour))
	db, err := os.Create(filepath.Join(b.agentDir, "agent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	omp := exec.Command("sleep", "60")
	omp.Stdin, omp.Dir = db, cwd
	if err := omp.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = omp.Process.Kill(); _ = omp.Wait() }()

	rep, err := b.restore([]string{id[:8]}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results[0]
	if rep.OK() || res.Action != SkippedLive || !strings.Contains(res.Error, fmt.Sprintf("pid %d", omp.Process.Pid)) || !strings.Contains(res.Error, "--force") {
		t.Fatalf("result %+v, want skipped naming the omp process", res)
	}
	if got := b.read(rel); string(got) != short {
		t.Fatal("a session whose folder omp runs in was changed")
	}
	// The same omp in another folder leaves this session alone.
	_ = omp.Process.Kill()
	_ = omp.Wait()
	elsewhere := exec.Command("sleep", "60")
	elsewhere.Stdin, elsewhere.Dir = db, t.TempDir()
	if err := elsewhere.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = elsewhere.Process.Kill(); _ = elsewhere.Wait() }()
	if res := b.restoreOK([]string{id[:8]}, Options{}).Results[0]; res.Action != Appended {
		t.Fatalf("with omp in another folder: %+v", res)
	}
	if got := b.read(rel); string(got) != full {
		t.Fatal("wrong bytes")
	}
}

// Ambiguous and unknown prefixes are errors, and nothing is written.
func TestRestoreRefusesBadPrefixes(t *testing.T) {
	r := fileRemote(t)
	a := newMachine(t, r, "desktop")
	files := corpus(t)
	for i, f := range files {
		a.write(sessionPath("-w", f.id, i), f.data, base)
	}
	a.backup()
	b := newMachine(t, r, "laptop")
	before := snapshot(t, b.agentDir)
	for _, tc := range []struct {
		prefixes []string
		want     []string
	}{
		{[]string{"01A11"}, []string{"ambiguous", "01a113d2-be76-73c7-986b-d3ac6e3fbb83", "01a114cf-3468-75b3-a966-2e83bd99529d"}},
		{[]string{"ffffffff"}, []string{`no session id starts with "ffffffff"`}},
		{[]string{"01a113d2", "0000"}, []string{`"0000"`}},
		{[]string{""}, []string{"empty"}},
	} {
		_, err := b.restore(tc.prefixes, Options{})
		if err == nil {
			t.Errorf("%q: no error", tc.prefixes)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q lacks %q", tc.prefixes, err, w)
			}
		}
	}
	after := snapshot(t, b.agentDir)
	if len(after) != len(before) {
		t.Errorf("refused restores wrote %d files", len(after)-len(before))
	}
}

// --generation restores an older generation; the default is the newest.
func TestRestoreGeneration(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[5]
	rel := sessionPath("-w", f.id, 1)
	a := newMachine(t, r, "desktop")
	a.write(rel, f.data, base)
	a.backup()
	// omp rewrote the file and dropped lines (a prune): a new generation.
	lines := strings.SplitAfter(string(f.data), "\n")
	pruned := strings.Join(lines[:len(lines)/2], "") + entry("9a000001", "", base.Add(time.Hour), "after the prune")
	tmp := a.path(rel) + ".tmp"
	os.WriteFile(tmp, []byte(pruned), 0o600)
	os.Rename(tmp, a.path(rel))
	os.Chtimes(a.path(rel), base.Add(time.Hour), base.Add(time.Hour))
	a.backup()

	invs, err := r.Inventory(context.Background(), f.id, "desktop")
	if err != nil || len(invs) != 1 || len(invs[0].Generations) != 2 {
		t.Fatalf("inventory: %v %+v", err, invs)
	}
	old := invs[0].Generations[0].Name

	b := newMachine(t, r, "laptop")
	b.restoreOK([]string{f.id[:8]}, Options{})
	if got := b.read(rel); string(got) != pruned {
		t.Fatalf("default restore is not the newest generation")
	}
	c := newMachine(t, r, "laptop2")
	c.restoreOK([]string{f.id[:8]}, Options{Generation: old})
	if got := c.read(rel); !bytes.Equal(got, f.data) {
		t.Fatalf("--generation %s: not the old bytes", old)
	}
	_, err = c.restore([]string{f.id[:8]}, Options{Generation: "0000000000000001", AgentDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := c.restore([]string{f.id[:8]}, Options{Generation: "0000000000000001", AgentDir: t.TempDir()})
	if rep.OK() || !strings.Contains(rep.Results[0].Error, "no generation 0000000000000001") {
		t.Fatalf("unknown generation: %+v", rep.Results)
	}
}

func TestRestoreDryRunWritesNothing(t *testing.T) {
	r := fileRemote(t)
	a := newMachine(t, r, "desktop")
	for i, f := range corpus(t) {
		a.write(sessionPath("-w", f.id, i), f.data, base)
	}
	a.backup()
	to := filepath.Join(t.TempDir(), "agent")
	rep := a.restoreOK(nil, Options{All: true, DryRun: true, AgentDir: to})
	for _, res := range rep.Results {
		if res.Action != Created || !res.DryRun || res.Bytes == 0 {
			t.Errorf("dry run result %+v", res)
		}
	}
	if _, err := os.Stat(to); !os.IsNotExist(err) {
		t.Fatalf("dry run created %s: %v", to, err)
	}
}

// A restore removes the temp files an interrupted one left in the agent
// dir and the session folders once they are a day old, and says so; a
// dry run, which writes nothing, removes nothing; a young one and omp's
// own temp file stay.
func TestRestoreSweepsStaleTempFiles(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	a := newMachine(t, r, "desktop")
	rel := sessionPath("-w", f.id, 1)
	a.write(rel, f.data, base)
	a.backup()
	b := newMachine(t, r, "laptop")
	old := time.Now().Add(-atomicfile.StaleAfter - time.Minute)
	stale := []string{".ompsync-session.1.tmp", "sessions/-w/.ompsync-" + path.Base(rel) + ".2.tmp"}
	keep := []string{".ompsync-blob.3.tmp", "sessions/-w/." + path.Base(rel) + ".4.tmp"}
	for _, p := range append(slices.Clone(stale), keep...) {
		b.write(p, []byte("partial"), old)
	}
	if err := os.Chtimes(b.path(keep[0]), time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	there := func(p string) bool { _, err := os.Stat(b.path(p)); return err == nil }

	rep := b.restoreOK([]string{f.id}, Options{DryRun: true})
	if len(rep.Cleanup) > 0 || !there(stale[0]) || !there(stale[1]) {
		t.Errorf("a dry run removed temp files: %q", rep.Cleanup)
	}
	rep = b.restoreOK([]string{f.id}, Options{})
	for _, p := range stale {
		if there(p) {
			t.Errorf("%s: still there", p)
		}
		if !slices.Contains(rep.Cleanup, "removed a temp file an interrupted restore left: "+b.path(p)) {
			t.Errorf("%s: its removal is not in the report %q", p, rep.Cleanup)
		}
	}
	for _, p := range keep {
		if !there(p) {
			t.Errorf("%s: removed", p)
		}
	}
	if got, _ := os.ReadFile(b.path(rel)); !bytes.Equal(got, f.data) {
		t.Errorf("the session restored as %d bytes, want %d", len(got), len(f.data))
	}
}

// The session was moved to another folder: it comes back at the new path.
func TestRestoreMovedSession(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[4]
	a := newMachine(t, r, "desktop")
	from, to := sessionPath("-old", f.id, 1), sessionPath("-new", f.id, 1)
	a.write(from, f.data, base)
	a.backup()
	os.MkdirAll(filepath.Dir(a.path(to)), 0o700)
	if err := os.Rename(a.path(from), a.path(to)); err != nil {
		t.Fatal(err)
	}
	a.backup()
	b := newMachine(t, r, "laptop")
	if res := b.restoreOK([]string{f.id[:8]}, Options{}).Results[0]; res.Path != to {
		t.Fatalf("restored to %s, want the new path %s", res.Path, to)
	}
}

// Transient failures, including a body cut off mid-read, are retried.
func TestRestoreRetriesTransientErrors(t *testing.T) {
	dir := t.TempDir()
	r := fileRemote(t)
	a := newMachine(t, r, "desktop")
	f := corpus(t)[1]
	rel := sessionPath("-w", f.id, 1)
	a.write(rel, f.data, base)
	a.backup()
	fl := &flaky{Client: r.Client(), fails: 3}
	fr := repo.New(fl, repo.NewZstd())
	rep, err := Run(context.Background(), fr, []string{f.id[:8]}, Options{AgentDir: dir})
	if err != nil || !rep.OK() {
		t.Fatalf("%v %+v", err, rep)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel))); !bytes.Equal(got, f.data) {
		t.Fatal("wrong bytes after retries")
	}
	if fl.fails != 0 {
		t.Fatalf("only %d failures injected", 3-fl.fails)
	}
}

func TestList(t *testing.T) {
	r := fileRemote(t)
	files := corpus(t)
	a := newMachine(t, r, "desktop")
	b := newMachine(t, r, "laptop")
	for i, f := range files[:3] {
		a.write(sessionPath("-w", f.id, i), f.data, base.Add(time.Duration(i)*time.Hour))
	}
	b.write(sessionPath("-w", files[0].id, 0), files[0].data, base.Add(10*time.Hour))
	a.backup()
	b.backup()
	os.Remove(a.path(sessionPath("-w", files[2].id, 2)))
	a.backup()

	cr := &countingClient{Client: r.Client()}
	ls, problems, err := List(context.Background(), repo.New(cr, repo.NewZstd()), "")
	if err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
	// From the catalogs only: one LIST, and per machine one GET of its
	// catalog and one of its recent changes.
	if cr.lists != 1 || cr.gets != 4 {
		t.Errorf("ls made %d LISTs and %d GETs, want 1 and 4", cr.lists, cr.gets)
	}
	if len(ls) != 3 {
		t.Fatalf("%d sessions listed", len(ls))
	}
	// Newest first: files[0] (laptop's copy is newest), then 2, then 1.
	wantOrder := []string{files[0].id, files[2].id, files[1].id}
	for i, l := range ls {
		if l.ID != wantOrder[i] {
			t.Errorf("position %d: %s, want %s", i, l.ID, wantOrder[i])
		}
	}
	if got := strings.Join(ls[0].Machines, ","); got != "desktop,laptop" {
		t.Errorf("machines %s", got)
	}
	if ls[1].State != repo.StateDeleted || ls[0].State != repo.StatePresent {
		t.Errorf("states %s %s", ls[0].State, ls[1].State)
	}
	if ls[0].Size != int64(len(files[0].data)) || ls[0].Cwd != "/home/ubuntu/.omp/work" || ls[0].Path != sessionPath("-w", files[0].id, 0) {
		t.Errorf("listing %+v", ls[0])
	}
	only, _, _ := List(context.Background(), r, "laptop")
	if len(only) != 1 || only[0].ID != files[0].id {
		t.Errorf("--machine laptop: %+v", only)
	}
}

// A session in a folder whose name is not UTF-8 (a cwd in another
// encoding) comes back under exactly that name, artifacts included.
func TestRestoreNameNotUTF8(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	rel := sessionPath("-caf\xe9-\xff", f.id, 1)
	art := strings.TrimSuffix(rel, ".jsonl") + "/sub\xfe.log"
	a := newMachine(t, r, "desktop")
	a.write(rel, f.data, base)
	a.write(art, []byte("artifact\n"), base)
	a.backup()

	b := newMachine(t, r, "laptop")
	rep := b.restoreOK([]string{f.id}, Options{})
	if res := rep.Results[0]; res.Action != Created || res.Path != rel {
		t.Fatalf("result %+v, want created at %q", res, rel)
	}
	if got := b.read(rel); !bytes.Equal(got, f.data) {
		t.Fatalf("restored %d bytes, want %d", len(got), len(f.data))
	}
	if got := b.read(art); string(got) != "artifact\n" {
		t.Fatalf("artifact holds %q", got)
	}
}

// sameInode checks that two paths are hard links of one file.
func sameInode(t *testing.T, a, b string) {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(fa, fb) {
		t.Errorf("%s is not a hard link of %s", b, a)
	}
}

// omp's blobs/<sha256>.png, a hard link of the blob, is backed up as a name
// of the blob (its bytes are not uploaded twice) and restored with the
// session as a hard link. A name whose object carries bytes of its own (as
// older agents uploaded it) is restored with those bytes.
func TestRestoreBlobLinks(t *testing.T) {
	eachRemote(t, func(t *testing.T, r *repo.Repo) {
		src := newMachine(t, r, "laptop")
		f := corpus(t)[0]
		blob := bytes.Repeat([]byte("\x89PNG pixels "), 4096)
		name := repo.HashHex(blob)
		src.write("blobs/"+name, blob, base)
		if err := os.Link(src.path("blobs/"+name), src.path("blobs/"+name+".png")); err != nil {
			t.Fatal(err)
		}
		rel := sessionPath("-.omp-work", f.id, 1)
		data := append(bytes.Clone(f.data), fmt.Sprintf(`{"type":"message","id":"b10b0001","parentId":null,"timestamp":"2026-10-07T02:00:00.000Z","image":"blob:sha256:%s"}`+"\n", name)...)
		src.write(rel, data, base)
		src.backup()

		info, err := r.Client().Stat(t.Context(), repo.BlobKey(name+".png"))
		if err != nil || info.Size != 0 {
			t.Fatalf("the link's object: %+v, %v; want an empty object", info, err)
		}
		// An older agent's upload of a link, with the bytes.
		legacy := []byte("old agents uploaded the bytes of a link")
		if _, err := repotest.PutBlob(t.Context(), r, name+".jpg", legacy); err != nil {
			t.Fatal(err)
		}

		to := t.TempDir()
		res := src.restoreOK([]string{f.id[:8]}, Options{AgentDir: to}).Results[0]
		if res.Action != Created || res.Blobs != 1 || len(res.Notes) != 0 {
			t.Fatalf("result %+v", res)
		}
		sameInode(t, filepath.Join(to, "blobs", name), filepath.Join(to, "blobs", name+".png"))
		if got, _ := os.ReadFile(filepath.Join(to, "blobs", name+".png")); !bytes.Equal(got, blob) {
			t.Errorf("the link holds %d bytes, want the blob's %d", len(got), len(blob))
		}
		if got, _ := os.ReadFile(filepath.Join(to, "blobs", name+".jpg")); !bytes.Equal(got, legacy) {
			t.Errorf("the legacy name holds %q, want %q", got, legacy)
		}
	})
}

// FuzzSessionRel: whatever the recorded path and the folder a session is
// placed in, the result is a session path under sessions/ or an error.
func FuzzSessionRel(f *testing.F) {
	f.Add("sessions/--Users-ana-x--/a_b.jsonl", "/home/ana/x", "/home/ana")
	f.Add("sessions/--a--/x.jsonl", "/a/..", "/")
	f.Add("sessions/../x.jsonl", "/a", "/b")
	f.Add("sessions/-x/a_b.jsonl", `C:\Users\ana\..\..`, `C:\Users\ana`)
	f.Fuzz(func(t *testing.T, p, cwd, home string) {
		for _, st := range []*store.Store{store.OMP(), store.Pi(), store.Claude()} {
			rel, err := st.SessionRel(p, cwd, home)
			if err != nil {
				continue
			}
			if !safename.RelPath(rel) || st.Classify(rel) != store.KindSession {
				t.Fatalf("%s: %q placed in %q gave %q", st.Name(), p, cwd, rel)
			}
			parts := strings.Split(rel, "/")
			if len(parts) != 3 || parts[1] == ".." || strings.ContainsAny(parts[1], "\\\x00") {
				t.Fatalf("%s: %q gave %q", st.Name(), p, rel)
			}
		}
	})
}
