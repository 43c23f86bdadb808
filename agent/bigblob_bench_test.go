package agent

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/crypt"
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
	bin := os.Getenv("OMPSYNC_BENCH_BIN")
	if bin == "" {
		bin = filepath.Join(b.TempDir(), "ompsync")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/ompsync/ompsync/cmd/ompsync").CombinedOutput(); err != nil {
			b.Fatalf("build ompsync: %v\n%s", err, out)
		}
	}
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
				cmd := exec.Command("/usr/bin/time", "-f", "peak-rss-kib %M", bin, "agent", "--once")
				cmd.Env = env
				var stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stderr, &stderr
				b.StartTimer()
				err := cmd.Run()
				b.StopTimer()
				if err != nil {
					b.Fatalf("agent --once: %v\n%s", err, stderr.String())
				}
				for _, l := range strings.Split(stderr.String(), "\n") {
					if v, ok := strings.CutPrefix(l, "peak-rss-kib "); ok {
						kib, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
						peak = max(peak, kib<<10)
					}
				}
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
