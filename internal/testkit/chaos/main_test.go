//go:build chaos

package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/bintest"
	"github.com/ompsync/ompsync/internal/testkit/faultproxy"
)

// ompsyncBin is the ompsync binary the agents run, built once by TestMain.
var ompsyncBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ompsync-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	if ompsyncBin, err = bintest.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// failf fails a check with a line that starts "FAILED:": .ci/run prints
// those lines last, so the tail of a failed run says what broke.
func failf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Errorf("FAILED: "+format, args...)
}

// duration is how long each scenario runs its chaos: CHAOS_DURATION,
// default 60s.
func duration(t *testing.T) time.Duration {
	t.Helper()
	d := 60 * time.Second
	if s := os.Getenv("CHAOS_DURATION"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			t.Fatalf("CHAOS_DURATION=%q: want a positive duration like 60s or 10m", s)
		}
	}
	return d
}

// seed is CHAOS_SEED, or a fresh one, logged so a run can be repeated (as
// far as timing allows).
func seed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: want a number", s)
		}
		return n
	}
	n := uint64(time.Now().UnixNano())
	t.Logf("CHAOS_SEED=%d", n)
	return n
}

// lockedRand is a seeded source shared by goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newRand(seed, stream uint64) *lockedRand {
	return &lockedRand{r: rand.New(rand.NewPCG(seed, stream))}
}

func (l *lockedRand) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

func (l *lockedRand) Float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

// between returns a random duration in [lo, hi).
func (l *lockedRand) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(l.IntN(int(hi-lo)))
}

// stats counts what a scenario survived.
type stats struct {
	mu sync.Mutex
	// Process events.
	Kills, Stops, Starts, Exits int
	ExitReasons                 []string
	// Disk-full periods of the state dirs.
	DiskFull int
	// What the simulated omp did, by kind; bad inputs among them.
	Ops       map[string]int
	BadInputs map[string]int
	// Faults the proxy injected.
	Faults faultproxy.Counts
	// Shrinks are local files seen smaller than before (must stay empty).
	Shrinks []string
}

func newStats() *stats { return &stats{Ops: map[string]int{}, BadInputs: map[string]int{}} }

func (s *stats) add(f func(s *stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *stats) op(kind string)  { s.add(func(s *stats) { s.Ops[kind]++ }) }
func (s *stats) bad(kind string) { s.add(func(s *stats) { s.BadInputs[kind]++ }) }

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func sorted(m map[string]int) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&b, " %s=%d", k, m[k])
	}
	return b.String()
}

// report logs the counts, and appends them as one JSON line to
// $CHAOS_REPORT when set (docs/RELIABILITY.md quotes them).
func (s *stats) report(t *testing.T, scenario string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Logf("%s: chaos for %s: %d SIGKILLs, %d SIGTERMs, %d starts, %d unexpected exits, %d disk-full periods",
		scenario, d, s.Kills, s.Stops, s.Starts, s.Exits, s.DiskFull)
	t.Logf("%s: faults: %v", scenario, s.Faults)
	t.Logf("%s: omp operations: %d:%s", scenario, sum(s.Ops), sorted(s.Ops))
	t.Logf("%s: bad inputs: %d:%s", scenario, sum(s.BadInputs), sorted(s.BadInputs))
	for _, r := range s.ExitReasons {
		t.Logf("%s: unexpected exit: %s", scenario, r)
	}
	path := os.Getenv("CHAOS_REPORT")
	if path == "" {
		return
	}
	faults := map[string]int64{}
	for f, n := range s.Faults.Faults {
		faults[f.String()] = n
	}
	line, _ := json.Marshal(map[string]any{
		"scenario": scenario, "seconds": d.Seconds(), "kills": s.Kills, "stops": s.Stops, "starts": s.Starts,
		"unexpected_exits": s.Exits, "exit_reasons": s.ExitReasons, "disk_full": s.DiskFull,
		"requests": s.Faults.Requests, "faults": faults, "faults_total": s.Faults.Total(),
		"ops": s.Ops, "bad_inputs": s.BadInputs, "shrinks": len(s.Shrinks), "failed": t.Failed(),
	})
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		failf(t, "CHAOS_REPORT: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s\n", line)
}
