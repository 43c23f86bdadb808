// Package bintest builds the ompsync binary for the tests and benchmarks
// that run it as a user does: without the race detector, whose shadow
// memory would swamp what they measure and slow every run (the code the
// binary runs is raced in process by the packages' own tests).
package bintest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build builds cmd/ompsync into dir and returns its path. flags go to go
// build before the package (-ldflags, as the release script sets them).
func Build(dir string, flags ...string) (string, error) {
	bin := filepath.Join(dir, "ompsync")
	args := append([]string{"build", "-o", bin}, flags...)
	args = append(args, "github.com/ompsync/ompsync/cmd/ompsync")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build ompsync: %v\n%s", err, out)
	}
	return bin, nil
}

// ForTest builds the binary into a temp folder of tb.
func ForTest(tb testing.TB) string {
	tb.Helper()
	bin, err := Build(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// ForBench is the binary a benchmark runs: OMPSYNC_BENCH_BIN when set
// (another build: an older commit's, for the figure before), else this
// tree's.
func ForBench(tb testing.TB) string {
	tb.Helper()
	if bin := os.Getenv("OMPSYNC_BENCH_BIN"); bin != "" {
		return bin
	}
	return ForTest(tb)
}
