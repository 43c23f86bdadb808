//go:build linux

package hostile

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/bintest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/repo"
)

// BenchmarkRestore1GiB restores one session of 1 GiB (JSON lines, 4 MiB
// chunks as the agent uploads a backlog) from a folder remote into an
// empty agent dir with the real binary, and reports its peak resident
// memory. The target is under 150 MB whatever the session's size
// (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench Restore1GiB -benchtime 3x ./internal/testkit/hostile/
//
// peak-RSS-MiB is GNU time's %M of the restore (clean: time forks a fresh
// process); rusage-MiB is the kernel's ru_maxrss as the benchmark sees it,
// which also counts the benchmark's own memory at the fork.
func BenchmarkRestore1GiB(b *testing.B) {
	bigSessionBench(b, bigRun{args: []string{"restore"}})
}

// BenchmarkRestoreAppend1GiB restores the same session onto a local copy
// of its first half (another machine's work to append): the copy streams
// to a temp file, is compared with the local file a buffer at a time, and
// the rest is appended (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench RestoreAppend1GiB -benchtime 3x ./internal/testkit/hostile/
func BenchmarkRestoreAppend1GiB(b *testing.B) {
	bigSessionBench(b, bigRun{args: []string{"restore"}, local: func(full, local string) {
		copyPrefix(b, full, local, 0.5)
	}})
}

// BenchmarkVerify1GiB verifies the same session, every hash, against a
// local file that holds it all (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench Verify1GiB -benchtime 3x ./internal/testkit/hostile/
func BenchmarkVerify1GiB(b *testing.B) {
	bigSessionBench(b, bigRun{args: []string{"verify"}, local: func(full, local string) {
		copyPrefix(b, full, local, 1)
	}})
}

// BenchmarkRestoreAt1GiB restores the same session as it was when about
// half of its chunks had been uploaded (restore --at, cut by the chunks'
// upload marks as they stream), into an empty agent dir
// (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench RestoreAt1GiB -benchtime 3x ./internal/testkit/hostile/
func BenchmarkRestoreAt1GiB(b *testing.B) {
	bigSessionBench(b, bigRun{args: []string{"restore", "--at", ""}, half: true})
}

// BenchmarkCat1GiB prints the same session to stdout (cat: every byte
// verified, through a temp file, before the first is printed), and
// BenchmarkCatAt1GiB prints it as it was at half its uploads
// (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench 'Cat1GiB|CatAt1GiB' -benchtime 3x ./internal/testkit/hostile/
func BenchmarkCat1GiB(b *testing.B) {
	bigSessionBench(b, bigRun{args: []string{"cat"}, stdout: true})
}

func BenchmarkCatAt1GiB(b *testing.B) {
	bigSessionBench(b, bigRun{args: []string{"cat", "--at", ""}, stdout: true, half: true})
}

// BenchmarkCatText1GiB prints the same session as a readable transcript
// (cat --text, a line at a time) (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench CatText1GiB -benchtime 3x ./internal/testkit/hostile/
func BenchmarkCatText1GiB(b *testing.B) {
	bigSessionBench(b, bigRun{args: []string{"cat", "--text"}, stdout: true, text: true})
}

// BenchmarkGrep1GiB searches the same session for a line that one entry
// holds (grep: the new bytes streamed a chunk at a time, indexed a line at
// a time into the search cache, the records searched from disk a buffer
// at a time), the cache emptied before each run; BenchmarkGrepCached1GiB
// searches it again with the cache the first run filled, and
// BenchmarkGrepNoCache1GiB without a cache (search.cache_size 0: the
// records go to an unlinked temp file) (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench 'Grep1GiB|GrepCached1GiB|GrepNoCache1GiB' -benchtime 3x ./internal/testkit/hostile/
func BenchmarkGrep1GiB(b *testing.B) {
	bigSessionBench(b, bigRun{args: []string{"grep", bigNeedle}, grep: "cold"})
}

func BenchmarkGrepCached1GiB(b *testing.B) {
	bigSessionBench(b, bigRun{args: []string{"grep", bigNeedle}, grep: "warm"})
}

func BenchmarkGrepNoCache1GiB(b *testing.B) {
	bigSessionBench(b, bigRun{args: []string{"grep", bigNeedle}, grep: "none"})
}

// bigNeedle is what one entry of the 1 GiB session says, in the middle.
const bigNeedle = "NEEDLE-4c1d"

// bigRun is one command a benchmark of the 1 GiB session runs.
type bigRun struct {
	// args are the command and its flags, before the session's id; an
	// empty one (after --at) is the time half the session was uploaded.
	args []string
	// local sets up the agent dir first, given the whole session restored
	// and the session's path in the agent dir; nil leaves it empty.
	local func(full, local string)
	// stdout: the session's bytes are printed, not written to the agent
	// dir; text, as a transcript, which is not compared byte for byte.
	stdout, text bool
	// half: what is compared is the bytes uploaded by half.
	half bool
	// grep: the command searches for bigNeedle, which one line printed
	// holds; the search cache is emptied before each run ("cold"), filled
	// by a run before the timed ones ("warm"), or off ("none").
	grep string
}

// bigSessionBench runs `ompsync <args> <id>` on the 1 GiB session, and
// reports the run's peak resident memory. The session's bytes (in the
// agent dir, or on stdout) are checked after each run.
func bigSessionBench(b *testing.B, br bigRun) {
	const size = 1 << 30
	bin := bintest.ForBench(b) // OMPSYNC_BENCH_BIN: an older build, to compare
	dir := b.TempDir()
	remoteDir := filepath.Join(dir, "remote")
	big := writeBigSession(b, remoteDir, size)
	want, wantSize := big.sum, big.size
	if br.half {
		want, wantSize = big.halfSum, big.halfSize
	}
	args := append([]string(nil), br.args...)
	for i, a := range args {
		if a == "" {
			args[i] = big.half.Format(time.RFC3339)
		}
	}
	command := strings.Join(args, " ")
	gnuTime, _ := exec.LookPath("/usr/bin/time")
	stateDir := filepath.Join(dir, "state")
	run := func(agentDir string, args ...string) (peak, rusage int64, out printedOut) {
		args = append([]string{bin}, args...)
		if gnuTime != "" {
			args = append([]string{gnuTime, "-f", "peak-rss-kib %M"}, args...)
		}
		cmd := exec.Command("/bin/sh", append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, addressLimitKiB)}, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "OMPSYNC_REMOTE=file://" + remoteDir,
			"OMPSYNC_AGENT_DIR=" + agentDir, "OMPSYNC_STATE_DIR=" + stateDir, "TMPDIR=" + dir}
		if br.grep == "none" {
			cmd.Env = append(cmd.Env, "OMPSYNC_SEARCH_CACHE_SIZE=0")
		}
		var stderr bytes.Buffer
		out.h = sha256.New()
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("%s: %v\n%s%s", command, err, out.start.String(), stderr.String())
		}
		if args[len(args)-2] == "verify" && !strings.Contains(out.start.String()+stderr.String(), "local same") {
			b.Fatalf("verify does not find the local file the same:\n%s%s", out.start.String(), stderr.String())
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rusage = ru.Maxrss << 10
		}
		for _, l := range strings.Split(stderr.String(), "\n") {
			if v, ok := strings.CutPrefix(l, "peak-rss-kib "); ok {
				kib, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				peak = kib << 10
			}
		}
		return peak, rusage, out
	}
	if br.grep == "warm" {
		run(filepath.Join(dir, "agent-warm"), append(args, BadID)...)
	}
	full := ""
	if br.local != nil {
		fullDir := filepath.Join(dir, "full")
		run(fullDir, "restore", BadID)
		full = filepath.Join(fullDir, filepath.FromSlash(BadRel))
	}

	var peak, rusage int64
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		agentDir := filepath.Join(dir, fmt.Sprintf("agent-%d", i))
		p := filepath.Join(agentDir, filepath.FromSlash(BadRel))
		if br.local != nil {
			br.local(full, p)
		}
		if br.grep == "cold" {
			os.RemoveAll(filepath.Join(stateDir, "search"))
		}
		b.StartTimer()
		pk, ru, out := run(agentDir, append(args, BadID)...)
		b.StopTimer()
		peak, rusage = max(peak, pk), max(rusage, ru)
		switch {
		case br.grep != "":
			if lines := strings.Count(out.start.String(), "\n"); lines != 1 || !strings.Contains(out.start.String(), bigNeedle) || out.n != int64(out.start.Len()) {
				b.Fatalf("%s printed %d bytes, not the one line that holds the needle: %.300q", command, out.n, out.start.String())
			}
		case br.text:
			if !strings.HasPrefix(out.start.String(), "session "+BadID) || out.n < wantSize/2 {
				b.Fatalf("%s printed %d bytes starting %.80q", command, out.n, out.start.String())
			}
		case br.stdout:
			if got := hex.EncodeToString(out.h.Sum(nil)); got != want || out.n != wantSize {
				b.Fatalf("%s printed %d bytes, not the %d of the session", command, out.n, wantSize)
			}
		default:
			if got := fileSum(b, p); got != want {
				b.Fatalf("the session after %s differs", command)
			}
		}
		if tmps, _ := filepath.Glob(filepath.Join(dir, ".ompsync-*")); len(tmps) > 0 {
			b.Fatalf("%s left %s", command, tmps)
		}
		os.RemoveAll(agentDir)
		b.StartTimer()
	}
	if peak > 0 {
		b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	}
	b.ReportMetric(float64(rusage)/(1<<20), "rusage-MiB")
}

// printedOut is what a command printed: hashed and counted, its start
// kept for messages.
type printedOut struct {
	h     hash.Hash
	n     int64
	start bytes.Buffer
}

func (o *printedOut) Write(p []byte) (int, error) {
	o.h.Write(p)
	o.n += int64(len(p))
	if k := 64<<10 - o.start.Len(); k > 0 {
		o.start.Write(p[:min(k, len(p))])
	}
	return len(p), nil
}

// copyPrefix writes the first part (a fraction, cut at a line's end) of
// the file full to p, an older mtime on it (so that it is not taken for a
// file omp is writing).
func copyPrefix(b *testing.B, full, p string, part float64) {
	b.Helper()
	in, err := os.Open(full)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		b.Fatal(err)
	}
	n := int64(float64(fi.Size()) * part)
	if n < fi.Size() {
		line := make([]byte, 64<<10)
		k, _ := in.ReadAt(line, n)
		n += int64(bytes.IndexByte(line[:k], '\n') + 1)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		b.Fatal(err)
	}
	out, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, io.NewSectionReader(in, 0, n)); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
	old := at.Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		b.Fatal(err)
	}
}

// bigSession is the session writeBigSession wrote: its size and SHA-256,
// and when about half of it had been uploaded, by its chunks' marks, with
// the size and SHA-256 of that half.
type bigSession struct {
	size, halfSize int64
	sum, halfSum   string
	half           time.Time
}

// writeBigSession writes a session of about size bytes, as the agent
// uploads a backlog, chunk by chunk (never more than one in memory), each
// chunk marked a minute after the one before, with its catalog.
func writeBigSession(b *testing.B, dir string, size int64) bigSession {
	b.Helper()
	ctx := context.Background()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	c, err := file.New(dir)
	if err != nil {
		b.Fatal(err)
	}
	r := repo.New(fastPut{c, dir}, repo.NewZstd())
	if err := r.Init(ctx); err != nil {
		b.Fatal(err)
	}
	s := stream(EvilMachine, BadID)
	gen := repo.NewGeneration(at.UnixNano())
	whole, hs := sha256.New(), sha256.New()
	head, _ := sessionFile(BadID, "start")
	var chunk bytes.Buffer
	var off int64
	var big bigSession
	uploaded := at
	flush := func() {
		data := chunk.Bytes()
		whole.Write(data)
		hs.Write(data)
		uploaded = uploaded.Add(time.Minute)
		end := off + int64(len(data))
		hdr := repo.ChunkHeader{Start: off, End: end, SHA256: repo.HashHex(data), StreamSHA256: hex.EncodeToString(hs.Sum(nil)), Uploaded: repo.UploadMark(end, uploaded)}
		if _, err := r.PutChunk(ctx, s, gen, hdr, data, remote.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		off = end
		chunk.Reset()
		if big.halfSum == "" && off >= size/2 {
			big.halfSize, big.halfSum, big.half = off, hex.EncodeToString(whole.Sum(nil)), uploaded.Add(30*time.Second)
		}
	}
	chunk.Write(head)
	words := strings.Fields("the agent read the file and ran the tests; three failed on a missing fixture, which it wrote, and then all passed")
	// Just under the 1 GiB a stream may hold (restore.Options.MaxStreamSize).
	for i := 0; off+int64(chunk.Len()) < size-16<<10; i++ {
		var text strings.Builder
		for j := range 40 + i%60 {
			text.WriteString(words[(i*7+j*3)%len(words)])
			text.WriteByte(' ')
		}
		if i == 777777 {
			text.WriteString(bigNeedle) // the one line BenchmarkGrep1GiB finds
		}
		fmt.Fprintf(&chunk, `{"type":"message","id":"%08x","parentId":"%08x","timestamp":"2026-10-07T01:%02d:%02d.000Z","message":{"role":"assistant","content":[{"type":"text","text":%q}]}}`+"\n",
			i+3, i+2, i/60%60, i%60, text.String())
		if chunk.Len() >= 4<<20 {
			flush()
		}
	}
	if chunk.Len() > 0 {
		flush()
	}
	m := repo.Meta{SessionID: BadID, Machine: EvilMachine, Stream: repo.SessionStream, Generation: gen, Path: BadRel, Created: at}
	if err := r.PutMeta(ctx, s, m); err != nil {
		b.Fatal(err)
	}
	if _, err := r.PutCatalog(ctx, repo.Catalog{Machine: EvilMachine, Updated: at, Sessions: []repo.CatalogEntry{
		{ID: BadID, Path: BadRel, Generation: gen, Size: off, Mtime: at, State: repo.StatePresent, Changed: at}}}); err != nil {
		b.Fatal(err)
	}
	big.size, big.sum = off, hex.EncodeToString(whole.Sum(nil))
	return big
}

func fileSum(b *testing.B, p string) string {
	b.Helper()
	f, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, bufio.NewReaderSize(f, 1<<20)); err != nil {
		b.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
