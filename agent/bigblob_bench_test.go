package agent

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/internal/testkit/bintest"
	"github.com/ompsync/ompsync/repo"
)

// BenchmarkAgentLargeBlob measures the real binary's peak RSS while
// `ompsync agent --once` uploads one blob of 240 MiB (noise, as an image is)
// to a folder remote, plaintext and encrypted: the agent's memory is
// bounded by a few blocks and zstd's encoder, not by the blob's size.
// OMPSYNC_BENCH_BIN runs another build (an older commit's, for the figure
// before). docs/BENCHMARKS.md, "Bounded memory".
func BenchmarkAgentLargeBlob(b *testing.B) {
	const size = 240 << 20
	bin := bintest.ForBench(b)
	dir := b.TempDir()
	agentDir := filepath.Join(dir, "agent")
	sum := writeNoise(b, filepath.Join(agentDir, "blobs", "x"), size, 5)
	if err := os.Rename(filepath.Join(agentDir, "blobs", "x"), filepath.Join(agentDir, "blobs", sum)); err != nil {
		b.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(agentDir, "blobs", sum), old, old)
	idFile, _, _, err := crypt.NewIdentityFile(time.Now())
	if err != nil {
		b.Fatal(err)
	}
	keyPath := filepath.Join(dir, "key.txt")
	if err := os.WriteFile(keyPath, idFile, 0o600); err != nil {
		b.Fatal(err)
	}
	for _, encrypted := range []bool{false, true} {
		name := "plain"
		if encrypted {
			name = "encrypted"
		}
		b.Run(name, func(b *testing.B) {
			var peak int64
			b.SetBytes(size)
			for i := range b.N {
				run := filepath.Join(dir, fmt.Sprintf("%s-%d", name, i))
				remoteDir := filepath.Join(run, "remote")
				if err := os.MkdirAll(remoteDir, 0o700); err != nil {
					b.Fatal(err)
				}
				env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + run, "OMPSYNC_REMOTE=file://" + remoteDir,
					"OMPSYNC_AGENT_DIR=" + agentDir, "OMPSYNC_STATE_DIR=" + filepath.Join(run, "state"), "OMPSYNC_MACHINE=bench"}
				if encrypted {
					env = append(env, "OMPSYNC_ENCRYPTION_IDENTITY_FILE="+keyPath)
				}
				b.StartTimer()
				peak = max(peak, agentPeakRSS(b, bin, env))
				b.StopTimer()
				obj := filepath.Join(remoteDir, "v1", "blobs", sum)
				head := make([]byte, len(repo.AgeHeader))
				f, err := os.Open(obj)
				if err == nil {
					_, err = f.Read(head)
					f.Close()
				}
				if err != nil || (string(head) == repo.AgeHeader) != encrypted {
					b.Fatalf("blob not uploaded as wanted (encrypted %t): %v, starts %q", encrypted, err, head)
				}
				os.RemoveAll(run)
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
		})
	}
}

// agentPeakRSS runs `ompsync agent --once` with env under GNU time and
// returns its peak RSS in bytes.
func agentPeakRSS(b *testing.B, bin string, env []string) int64 {
	b.Helper()
	cmd := exec.Command("/usr/bin/time", "-f", "peak-rss-kib %M", bin, "agent", "--once")
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		b.Fatalf("agent --once: %v\n%s", err, out.String())
	}
	var peak int64
	for _, l := range strings.Split(out.String(), "\n") {
		if v, ok := strings.CutPrefix(l, "peak-rss-kib "); ok {
			kib, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			peak = max(peak, kib<<10)
		}
	}
	return peak
}

// BenchmarkAgentLargeArchive measures the real binary's peak RSS while
// `ompsync agent --once` backs up one archived session of 400 MiB (omp's
// gzip, JSON lines) to a folder remote: the archive inflates into a temp
// file, read a chunk at a time like a live file.
func BenchmarkAgentLargeArchive(b *testing.B) {
	const size = 400 << 20
	bin := bintest.ForBench(b)
	dir := b.TempDir()
	agentDir := filepath.Join(dir, "agent")
	p := filepath.Join(agentDir, filepath.FromSlash("archive/"+ompRel+".gz"))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	w := bufio.NewWriterSize(zw, 1<<20)
	w.WriteString(`{"type":"session","version":3,"id":"` + ompID + `","timestamp":"2026-10-07T00:45:40.854Z","cwd":"/work"}` + "\n")
	rng := rand.NewChaCha8([32]byte{6})
	word := make([]byte, 8)
	var n int64
	for i := 0; n < size; i++ {
		text := make([]byte, 0, 400)
		for len(text) < 380 {
			_, _ = rng.Read(word)
			text = append(append(text, hex.EncodeToString(word[:3])...), ' ')
		}
		line := entryLine(fmt.Sprintf("%08x", i), "", string(text))
		w.Write(line)
		n += int64(len(line))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	old := time.Now().Add(-time.Hour)
	os.Chtimes(p, old, old)
	var peak int64
	b.SetBytes(n)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		run := filepath.Join(dir, fmt.Sprintf("run-%d", i))
		remoteDir := filepath.Join(run, "remote")
		if err := os.MkdirAll(remoteDir, 0o700); err != nil {
			b.Fatal(err)
		}
		env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + run, "OMPSYNC_REMOTE=file://" + remoteDir,
			"OMPSYNC_AGENT_DIR=" + agentDir, "OMPSYNC_STATE_DIR=" + filepath.Join(run, "state"), "OMPSYNC_MACHINE=bench"}
		b.StartTimer()
		peak = max(peak, agentPeakRSS(b, bin, env))
		b.StopTimer()
		var stored int64
		filepath.WalkDir(filepath.Join(remoteDir, "v1", "sessions"), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					stored += fi.Size()
				}
			}
			return nil
		})
		if stored < size/20 {
			b.Fatalf("the archived session is not on the remote: %d bytes stored", stored)
		}
		os.RemoveAll(run)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
}
