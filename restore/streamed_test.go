package restore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/mergeref"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/session"
)

// bigSlotted is a real omp file (with a title slot) grown past a few
// comparison buffers and the kept head, so that a comparison streams.
func bigSlotted(t *testing.T) corpusFile {
	t.Helper()
	f := corpus(t)[0]
	data := bytes.Clone(f.data)
	for i := 0; len(data) < 3*compareBuf+headLen; i++ {
		data = append(data, entry(itoa(0xb000_0000+i), "", base, "a line of the long session, to stream it")...)
	}
	f.data = data
	return f
}

// verify compares the local file with the remote copy as both stream,
// reaching every answer compareLocal gave with both in memory: a title
// slot that differs alone is the same file; a byte that differs is
// divergence wherever it is, in the kept head or far past it.
func TestVerifyComparesStreamed(t *testing.T) {
	r := fileRemote(t)
	f := bigSlotted(t)
	rel := sessionPath("-w", f.id, 1)
	a := newMachine(t, r, "desk")
	a.write(rel, f.data, base)
	a.backup()

	flip := func(at int) []byte {
		b := bytes.Clone(f.data)
		b[at] ^= 0x20
		return b
	}
	cut := bytes.LastIndexByte(f.data[:2*compareBuf], '\n') + 1
	for _, tc := range []struct {
		name  string
		local []byte
		want  string
	}{
		{"equal", f.data, LocalSame},
		{"older title", retitled(t, f.data, "Older", "2020-01-01T00:00:00.000Z"), LocalSame},
		{"prefix", f.data[:cut], LocalBehind},
		{"shorter than the head", f.data[:headLen/2], LocalBehind},
		{"ahead", append(bytes.Clone(f.data), entry("ffff0001", "", base, "more")...), LocalAhead},
		{"byte past the head", flip(2*compareBuf + 100), LocalDiverged},
		{"byte in the head", flip(headLen - 10), LocalDiverged},
		{"byte in the last buffer", flip(len(f.data) - 5), LocalDiverged},
		{"prefix with a byte changed", flip(cut - 3)[:cut], LocalDiverged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMachine(t, r, "laptop")
			b.write(rel, tc.local, base)
			checks, _, err := Verify(context.Background(), r, []string{f.id}, Options{AgentDir: b.agentDir})
			if err != nil || len(checks) != 1 || !checks[0].OK() {
				t.Fatalf("verify: %+v, %v", checks, err)
			}
			c := checks[0].Copies[0]
			if c.Local != tc.want || c.Bytes != int64(len(f.data)) {
				t.Fatalf("local %s (%d bytes checked), want %s (%d)", c.Local, c.Bytes, tc.want, len(f.data))
			}
		})
	}
}

// grown is f's bytes grown to about size with lines of their own ids,
// and cuts every 4 MiB at a line's end, as the agent uploads a backlog.
func grown(data []byte, size int, tag string) ([]byte, []int64) {
	data = bytes.Clone(data)
	var cuts []int64
	for i := 0; len(data) < size; i++ {
		if len(data)/(4<<20) > len(cuts) {
			cuts = append(cuts, int64(len(data)))
		}
		data = append(data, entry(fmt.Sprintf("%s%06x", tag, i), "", base, strings.Repeat("an answer of the long session ", 20))...)
	}
	return data, cuts
}

// lineCut is the end of the line that holds byte at.
func lineCut(data []byte, at int) int { return at + bytes.IndexByte(data[at:], '\n') + 1 }

func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(dir, ".ompsync-*"))
	more, _ := filepath.Glob(filepath.Join(dir, "sessions", "*", ".*.tmp"))
	if len(left)+len(more) > 0 {
		t.Errorf("temp files left: %v %v", left, more)
	}
}

// Restore onto a shorter local copy of a large session appends the rest,
// from the verified copy streamed to a temp file, to the same file: the
// bytes are the backup's, and what it allocates is far less than the
// session (the copies are compared and appended a buffer at a time).
// Equal and ahead leave the file alone; a newer title on the remote
// replaces the file whole, through the temp copy.
func TestRestoreStreamsOntoLocalCopy(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0] // a title slot
	data, cuts := grown(f.data, 48<<20, "c0")
	rel := sessionPath("-w", f.id, 1)
	putDesk(t, r, f.id, rel, data, cuts...)

	half := lineCut(data, len(data)/2)
	newer := retitled(t, data, "Newer", "2030-01-01T00:00:00.000Z")
	older := retitled(t, data, "Older", "2020-01-01T00:00:00.000Z")
	ahead := append(bytes.Clone(data), entry("ffff0001", "", base, "not yet uploaded")...)
	for _, tc := range []struct {
		name    string
		local   []byte
		want    Action
		final   []byte
		inPlace bool // the same file, appended to or left alone
	}{
		{"half", data[:half], Appended, data, true},
		{"half a line", data[:half+7], Appended, data, true},
		{"equal", data, Unchanged, data, true},
		{"ahead", ahead, Unchanged, ahead, true},
		{"older title, half", older[:half], Appended, data, false},
		{"newer title here, half", newer[:half], Appended, newer, true},
		{"older title, all", older, Retitled, data, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMachine(t, r, "laptop")
			b.write(rel, tc.local, base.Add(-time.Hour))
			before, _ := os.Stat(b.path(rel))
			var rep *Report
			n := allocated(func() { rep = b.restoreOK([]string{f.id}, Options{}) })
			res := rep.Results[0]
			if res.Action != tc.want {
				t.Fatalf("result %+v, want %s", res, tc.want)
			}
			if got := b.read(rel); !bytes.Equal(got, tc.final) {
				t.Fatalf("file holds %d bytes, want %d (first difference near the title slot?)", len(got), len(tc.final))
			}
			after, _ := os.Stat(b.path(rel))
			if os.SameFile(before, after) != tc.inPlace {
				t.Errorf("same file %v, want %v", os.SameFile(before, after), tc.inPlace)
			}
			if tc.want == Appended && res.Bytes != int64(len(tc.final)-len(tc.local)) {
				t.Errorf("%d bytes appended, want %d", res.Bytes, len(tc.final)-len(tc.local))
			}
			// Reading both whole took more than twice the session; the
			// stream's own decoders take a share of it, more under the
			// race detector (up to 34 MiB of 48 seen), and more again
			// when a loaded machine's GCs empty the decoder pools: the
			// bound is one and a half times the session.
			t.Logf("allocated %d MiB", n>>20)
			if n >= uint64(len(data))*3/2 {
				t.Errorf("restoring %d MiB onto a local copy allocated %d MiB", len(data)>>20, n>>20)
			}
			noTempFiles(t, b.agentDir)
		})
	}
}

// A copy that fails its checks midway (its last chunk damaged) leaves the
// shorter local copy byte for byte as it was, and no temp file behind.
func TestRestoreFailingMidwayLeavesLocalCopy(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	data, cuts := grown(f.data, 12<<20, "d0")
	rel := sessionPath("-w", f.id, 1)
	s, gen := putSession(t, r, "desk", f.id, rel, data, cuts...)
	putCatalog(t, r, "desk", repo.CatalogEntry{ID: f.id, Path: rel, Generation: gen, Size: int64(len(data)), Mtime: base, State: repo.StatePresent, Changed: base})
	last := cuts[len(cuts)-1]
	bad := bytes.Clone(data[last:])
	bad[len(bad)/2] ^= 1
	hdr, _, err := r.GetChunk(context.Background(), s, gen, last, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.PutChunk(context.Background(), s, gen, hdr, bad, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	b := newMachine(t, r, "laptop")
	local := data[:lineCut(data, len(data)/3)]
	b.write(rel, local, base.Add(-time.Hour))
	rep, err := b.restore([]string{f.id}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res := rep.Results[0]; rep.OK() || res.Action != Refused || !strings.Contains(res.Error, f.id) {
		t.Fatalf("restore of a damaged copy: %+v", res)
	}
	if got := b.read(rel); !bytes.Equal(got, local) {
		t.Fatalf("the local file holds %d bytes, want the %d it had", len(got), len(local))
	}
	if fi, _ := os.Stat(b.path(rel)); !fi.ModTime().Equal(base.Add(-time.Hour)) {
		t.Errorf("mtime %v, want it unchanged", fi.ModTime())
	}
	noTempFiles(t, b.agentDir)
}

// Copies from several machines, one ahead of the other and of the local
// file, stream too: the longest is appended; with HashWritten the result
// names the bytes written after the title slot and their hash, what pull
// records (and what it once kept the whole file in memory for).
func TestRestoreStreamsSeveralCopies(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	data, cuts := grown(f.data, 40<<20, "e0")
	rel := sessionPath("-w", f.id, 1)
	short := data[:lineCut(data, len(data)*2/3)]
	_, g1 := putSession(t, r, "desk", f.id, rel, data, cuts...)
	_, g2 := putSession(t, r, "tower", f.id, rel, short)
	putCatalog(t, r, "desk", repo.CatalogEntry{ID: f.id, Path: rel, Generation: g1, Size: int64(len(data)), Mtime: base, State: repo.StatePresent, Changed: base})
	putCatalog(t, r, "tower", repo.CatalogEntry{ID: f.id, Path: rel, Generation: g2, Size: int64(len(short)), Mtime: base.Add(-time.Minute), State: repo.StatePresent, Changed: base})

	for _, local := range [][]byte{nil, data[:lineCut(data, len(data)/3)]} {
		b := newMachine(t, r, "laptop")
		want, from := Created, int64(session.SlotLen(data))
		if local != nil {
			b.write(rel, local, base.Add(-time.Hour))
			want, from = Appended, int64(len(local))
		}
		var rep *Report
		n := allocated(func() { rep = b.restoreOK([]string{f.id}, Options{HashWritten: true}) })
		res := rep.Results[0]
		// Two streams, two decoders: more than one copy's share, and
		// far less than holding both (and the local file) did.
		if n >= 2*uint64(len(data)) {
			t.Errorf("restoring %d MiB from two copies allocated %d MiB", len(data)>>20, n>>20)
		}
		if res.Action != want || len(res.Sources) != 1 || res.Sources[0].Machine != "desk" {
			t.Fatalf("result %+v, want %s from desk", res, want)
		}
		if got := b.read(rel); !bytes.Equal(got, data) {
			t.Fatalf("file holds %d bytes, want %d", len(got), len(data))
		}
		sum := sha256.Sum256(data[from:])
		if a := res.Added; a == nil || a.Start != from || a.End != int64(len(data)) || a.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("added %+v, want [%d, %d) %x", res.Added, from, len(data), sum)
		}
		noTempFiles(t, b.agentDir)
	}
}

// Copies that diverged are merged line by line through an index of their
// lines, only within the local bound: past MaxMergeSize (the index's
// budget, session.LineCost a line read and the longest line) the session
// fails with one line saying why and what to do, the local file and the
// agent dir untouched; within it they merge, and the temp file of the
// merge is gone.
func TestRestoreMergeBounded(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	common := data4(t, f.data)
	mine, theirs := diverged(t, common)
	rel := sessionPath("-w", f.id, 1)
	putDesk(t, r, f.id, rel, theirs)
	lines := func(b []byte) int64 { return int64(bytes.Count(b[session.SlotLen(b):], []byte("\n"))) }
	longest := 0
	for _, l := range bytes.Split(common, []byte("\n")) {
		longest = max(longest, len(l))
	}
	need := (lines(mine)+lines(theirs))*session.LineCost + int64(longest)

	b := newMachine(t, r, "laptop")
	b.write(rel, mine, base.Add(-time.Hour))
	rep, err := b.restore([]string{f.id}, Options{MaxMergeSize: need - 1})
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results[0]
	if rep.OK() || res.Action != Failed || !strings.Contains(res.Error, "more than the") || !strings.Contains(res.Error, "restore.max_merge_size") || !strings.Contains(res.Error, "--machine") || strings.Contains(res.Error, "\n") {
		t.Fatalf("merge past the bound: %+v", res)
	}
	if got := b.read(rel); !bytes.Equal(got, mine) {
		t.Fatalf("the local file changed: %d bytes, want %d", len(got), len(mine))
	}
	noTempFiles(t, b.agentDir)

	res = b.restoreOK([]string{f.id}, Options{MaxMergeSize: need}).Results[0]
	want, err := mergeref.OMP(mine, theirs)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.read(rel); res.Action != Merged || !bytes.Equal(got, want) {
		t.Fatalf("merge within the bound: %+v, %d bytes, want the reference merge's %d", res, len(got), len(want))
	}
	if got := b.read(res.Backup); !bytes.Equal(got, mine) {
		t.Fatalf("the pre-merge file holds %d bytes, want the local file's %d", len(got), len(mine))
	}
	noTempFiles(t, b.agentDir)
}

// Copies that diverged and are larger together than the old in-memory
// bound (128 MiB of copies) merge with the default options, line by line through
// temp files, to the bytes the reference merge gives in memory; the pre-merge
// local file is kept beside, byte for byte, and no temp file is left.
func TestRestoreMergesPastOldBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 130 MiB of copies")
	}
	r := fileRemote(t)
	f := corpus(t)[0]
	common, cuts := grown(f.data, 64<<20, "c")
	mine, _ := grown(append(bytes.Clone(common), entry("aaaa9001", lastEntryID(t, common), base.Add(time.Hour), "work here")...), 65<<20, "m")
	theirs, _ := grown(append(bytes.Clone(common), entry("bbbb9001", lastEntryID(t, common), base.Add(2*time.Hour), "work there")...), 66<<20, "t")
	if len(mine)+len(theirs) <= 128<<20 {
		t.Fatalf("copies of %d bytes are within the old bound", len(mine)+len(theirs))
	}
	rel := sessionPath("-w", f.id, 1)
	putDesk(t, r, f.id, rel, theirs, cuts...)

	b := newMachine(t, r, "laptop")
	b.write(rel, mine, base.Add(-time.Hour))
	res := b.restoreOK([]string{f.id}, Options{}).Results[0]
	want, err := mergeref.OMP(mine, theirs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Action != Merged || res.Bytes != int64(len(want)) {
		t.Fatalf("restore: %+v, want merged, %d bytes", res, len(want))
	}
	if got := b.read(rel); !bytes.Equal(got, want) {
		t.Fatalf("the merge holds %d bytes, not the reference merge's %d", len(got), len(want))
	}
	if got := b.read(res.Backup); !bytes.Equal(got, mine) {
		t.Fatal("the pre-merge file is not the local file as it was")
	}
	noTempFiles(t, b.agentDir)
}

// data4 is data grown past a few comparison buffers.
func data4(t *testing.T, data []byte) []byte {
	t.Helper()
	d, _ := grown(data, 4*compareBuf, "f0")
	return d
}

// Artifacts stream as session copies do: a large one is restored byte for
// byte, and onto a shorter local copy the rest is appended.
func TestRestoreStreamsArtifacts(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	rel := sessionPath("-w", f.id, 1)
	art := strings.TrimSuffix(rel, ".jsonl") + "/tool.log"
	var log []byte
	for i := 0; len(log) < 6<<20; i++ {
		log = fmt.Appendf(log, "line %d of a long tool output\n", i)
	}
	a := newMachine(t, r, "desk")
	a.write(rel, f.data, base)
	a.write(art, log, base)
	a.backup()

	for _, local := range [][]byte{nil, log[:lineCut(log, len(log)/2)]} {
		b := newMachine(t, r, "laptop")
		b.write(rel, f.data, base)
		if local != nil {
			b.write(art, local, base.Add(-time.Hour))
		}
		res := b.restoreOK([]string{f.id}, Options{}).Results[0]
		if res.Artifacts != 1 {
			t.Fatalf("result %+v, want the artifact written", res)
		}
		if got := b.read(art); !bytes.Equal(got, log) {
			t.Fatalf("artifact holds %d bytes, want %d", len(got), len(log))
		}
		noTempFiles(t, b.agentDir)
	}
}

// A dry run streams its copies to the system's temp folder, not the agent
// dir, and removes them: the agent dir is as it was, and nothing is left.
func TestRestoreDryRunStreamsElsewhere(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	data, cuts := grown(f.data, 6<<20, "a0")
	rel := sessionPath("-w", f.id, 1)
	putDesk(t, r, f.id, rel, data, cuts...)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	b := newMachine(t, r, "laptop")
	local := data[:lineCut(data, len(data)/2)]
	b.write(rel, local, base.Add(-time.Hour))
	before := snapshot(t, b.agentDir)
	res := b.restoreOK([]string{f.id}, Options{DryRun: true}).Results[0]
	if res.Action != Appended || res.Bytes != int64(len(data)-len(local)) {
		t.Fatalf("dry run: %+v", res)
	}
	after := snapshot(t, b.agentDir)
	if len(after) != len(before) {
		t.Errorf("the agent dir holds %d entries, want the %d it had", len(after), len(before))
	}
	sameTree(t, before, after, func(string) bool { return true }, "sessions")
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("left in the temp folder: %v", left)
	}
}

// Copies held in memory reuse their buffers from session to session: many
// sessions of different sizes over 64 KiB, restored many at a time, still
// come back byte for byte, none with another's bytes or a longer one's tail.
func TestRestoreReusedBuffersIntact(t *testing.T) {
	eachRemote(t, func(t *testing.T, r *repo.Repo) {
		src := newMachine(t, r, "laptop")
		want := map[string][]byte{}
		for i := range 24 {
			id := fmt.Sprintf("0b0ffe%02d-0000-7000-8000-000000000000", i)
			data, _ := smallSession(id, "")
			// Sizes fall and rise, so a buffer a larger copy used is
			// taken by a smaller one and the other way round.
			size := pooledFrom + (i*7919)%(spillAt-pooledFrom)
			for j := 0; len(data) < size; j++ {
				data = append(data, entry(fmt.Sprintf("%08x", 0xc000_0000+j), "", base, fmt.Sprintf("session %d line %d", i, j))...)
			}
			rel := sessionPath("-.omp-work", id, i)
			src.write(rel, data, base)
			want[rel] = data
		}
		src.backup()

		for round := range 2 {
			dst := newMachine(t, r, "laptop")
			rep := dst.restoreOK(nil, Options{All: true, Parallel: 6})
			if len(rep.Results) != len(want) {
				t.Fatalf("round %d: %d sessions restored, want %d", round, len(rep.Results), len(want))
			}
			for rel, data := range want {
				if got := dst.read(rel); !bytes.Equal(got, data) {
					t.Fatalf("round %d: %s: %d bytes restored, want %d; first difference at %d", round, rel, len(got), len(data), firstDiff(got, data))
				}
			}
		}
	})
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
