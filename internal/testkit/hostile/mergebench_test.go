//go:build linux

package hostile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
)

// BenchmarkRestoreMergeDiverged1GiB restores the 1 GiB session of
// BenchmarkRestore1GiB onto a local copy that diverged from it: the first
// half of it and a line of its own, newer than any other. Restore merges
// them line by line: both copies (1.5 GiB) are read through into an index
// of their lines, and the merge (1 GiB, the session and then the local
// line) is written to a temp file from lines read back one at a time,
// with the real binary and its default settings. It reports the run's
// peak resident memory (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench RestoreMergeDiverged1GiB -benchtime 1x ./internal/testkit/hostile/
//
// Before the streamed merge it failed at once: the copies were over the
// 128 MiB restore.max_merge_size then allowed in memory.
func BenchmarkRestoreMergeDiverged1GiB(b *testing.B) {
	const size = 1 << 30
	bin := bintest.ForBench(b) // OMPSYNC_BENCH_BIN: an older build, to compare
	// OMPSYNC_BENCH_MERGE_SIZE sets restore.max_merge_size (an older
	// build's bound on the copies it holds).
	mergeSize := os.Getenv("OMPSYNC_BENCH_MERGE_SIZE")
	if mergeSize == "" {
		mergeSize = "1GiB"
	}
	dir := b.TempDir()
	remoteDir := filepath.Join(dir, "remote")
	writeBigSession(b, remoteDir, size)
	gnuTime, _ := exec.LookPath("/usr/bin/time")
	run := func(agentDir string) (peak, rusage int64, out string) {
		args := []string{bin, "restore", BadID}
		if gnuTime != "" {
			args = append([]string{gnuTime, "-f", "peak-rss-kib %M"}, args...)
		}
		cmd := exec.Command("/bin/sh", append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, addressLimitKiB)}, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "OMPSYNC_REMOTE=file://" + remoteDir,
			"OMPSYNC_AGENT_DIR=" + agentDir, "OMPSYNC_STATE_DIR=" + filepath.Join(dir, "state"),
			// The copies' 3.1 million lines need an index of 570 MiB
			// (session.LineCost a line), past the default.
			"OMPSYNC_RESTORE_MAX_MERGE_SIZE=" + mergeSize}
		if v := os.Getenv("OMPSYNC_BENCH_GOMEMLIMIT"); v != "" {
			// The command's soft memory limit (1 GiB unless set), which
			// its heap grows to at GOGC=400: lower, it shows what the
			// merge needs.
			cmd.Env = append(cmd.Env, "GOMEMLIMIT="+v)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("restore: %v\n%s%s", err, stdout.String(), stderr.String())
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
		return peak, rusage, stdout.String() + stderr.String()
	}
	fullDir := filepath.Join(dir, "full")
	run(fullDir)
	full := filepath.Join(fullDir, filepath.FromSlash(BadRel))
	own := `{"type":"message","id":"ffff0001","parentId":"aaaa0002","timestamp":"2026-10-08T00:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":"work of this machine alone"}]}}` + "\n"
	// The merge: the session as the remote holds it, then the local line,
	// the newest work (block order puts it last).
	want := sha256.New()
	if err := copyTo(want, full); err != nil {
		b.Fatal(err)
	}
	io.WriteString(want, own)
	wantSum := hex.EncodeToString(want.Sum(nil))

	var peak, rusage int64
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		agentDir := filepath.Join(dir, fmt.Sprintf("agent-%d", i))
		p := filepath.Join(agentDir, filepath.FromSlash(BadRel))
		copyPrefix(b, full, p, 0.5)
		appendLine(b, p, own)
		b.StartTimer()
		pk, ru, out := run(agentDir)
		b.StopTimer()
		peak, rusage = max(peak, pk), max(rusage, ru)
		if !strings.Contains(out, "merged") {
			b.Fatalf("the restore did not merge:\n%s", out)
		}
		if got := fileSum(b, p); got != wantSum {
			b.Fatalf("the merged session differs from the session and the local line")
		}
		os.RemoveAll(agentDir)
		b.StartTimer()
	}
	if peak > 0 {
		b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	}
	b.ReportMetric(float64(rusage)/(1<<20), "rusage-MiB")
}

func copyTo(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// appendLine appends line to the file at p, keeping its older mtime (so
// that it is not taken for a file omp is writing).
func appendLine(b *testing.B, p, line string) {
	b.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.WriteString(line); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	old := at.Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		b.Fatal(err)
	}
}
