//go:build linux || darwin

package openfiles

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// holdOpen starts a process that holds path open (as its standard input)
// until the test ends.
func holdOpen(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", "60")
	cmd.Stdin = f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func TestScanFindsHolderByInode(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no open-file listing on " + runtime.GOOS)
	}
	testFindsHolder(t, func(suffixes ...string) (*Snapshot, error) { return Scan(suffixes...) })
}

// macOS's scan is lsof's; Linux has lsof too, so its parsing and matching
// are checked here against the same files as the /proc scan.
func TestLsofScanFindsHolderByInode(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no lsof on " + runtime.GOOS)
	}
	if _, err := exec.LookPath("lsof"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("lsof is not installed (apt-get install lsof); .ci/run installs it")
		}
		t.Skip("lsof is not installed (apt-get install lsof)")
	}
	testFindsHolder(t, func(suffixes ...string) (*Snapshot, error) { return scanLsof(os.Getpid(), suffixes) })
}

func testFindsHolder(t *testing.T, scan func(suffixes ...string) (*Snapshot, error)) {
	dir := t.TempDir()
	held := filepath.Join(dir, "a.jsonl")
	free := filepath.Join(dir, "b.jsonl")
	for _, p := range []string{held, free} {
		if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// This process holding a file does not count: ompsync reads the files
	// it backs up.
	self, err := os.Open(free)
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	cmd := holdOpen(t, held)
	if got, want := cwdOf(t, scan, cmd.Process.Pid), mustEval(t, "."); got != want {
		t.Errorf("Cwd = %q, want %q", got, want)
	}
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(held, link); err != nil {
		t.Fatal(err)
	}

	s, err := scan(".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Supported {
		t.Fatal("Supported = false on " + runtime.GOOS)
	}
	if got := s.WithSuffix(".jsonl"); !slices.Contains(got, cmd.Process.Pid) {
		t.Errorf("WithSuffix(.jsonl) = %v, want it to hold pid %d", got, cmd.Process.Pid)
	}
	for _, p := range []string{held, link} {
		got := s.Holders(p)
		if len(got) != 1 || got[0].PID != cmd.Process.Pid {
			t.Fatalf("Holders(%s) = %v, want pid %d", p, got, cmd.Process.Pid)
		}
		if got[0].Command != "sleep …" {
			t.Errorf("command %q, want %q: the program, and no argument text", got[0].Command, "sleep …")
		}
	}
	if got := s.Holders(free); len(got) != 0 {
		t.Errorf("Holders(free) = %v, want none (this process is not counted)", got)
	}
	if got := s.Holders(filepath.Join(dir, "missing.jsonl")); len(got) != 0 {
		t.Errorf("Holders(missing) = %v", got)
	}

	// A replaced file (new inode at the same path) is not the held one.
	if err := os.Rename(free, held); err != nil {
		t.Fatal(err)
	}
	if got := s.Holders(held); len(got) != 0 {
		t.Errorf("after replacing the file: Holders = %v, want none (another inode)", got)
	}

	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	s, err = scan(".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Holders(link); len(got) != 0 {
		t.Errorf("after the holder exited: %v", got)
	}
}

func TestScanSuffixFilter(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	p := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	holdOpen(t, p)
	s, err := Scan(".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Holders(p); len(got) != 0 {
		t.Errorf("a .txt file was recorded: %v", got)
	}
	s, err = Scan()
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Holders(p); len(got) != 1 {
		t.Errorf("Scan() with no suffix: Holders = %v, want one", got)
	}
}

func TestShortCommand(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"/usr/bin/bun", "/opt/omp/dist/cli.js", "--mode", "rpc"}, "bun cli.js --mode …"},
		{[]string{"omp", "-p", "my secret plan"}, "omp -p …"},
		{[]string{"omp", "--resume=01abc"}, "omp …"},
	} {
		if got := shortCommand(c.argv); got != c.want {
			t.Errorf("shortCommand(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
}

func cwdOf(t *testing.T, scan func(...string) (*Snapshot, error), pid int) string {
	t.Helper()
	s, err := scan()
	if err != nil {
		t.Fatal(err)
	}
	return s.Cwd(pid)
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	p, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = filepath.EvalSymlinks(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// BenchmarkScan is the cost of one scan of every process's open files on
// this machine (once per pull or restore).
func BenchmarkScan(b *testing.B) {
	procs, fds := 0, 0
	for b.Loop() {
		if _, err := Scan(".jsonl", "/agent.db"); err != nil {
			b.Fatal(err)
		}
	}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			if f, err := os.ReadDir("/proc/" + e.Name() + "/fd"); err == nil {
				procs++
				fds += len(f)
			}
		}
	}
	b.ReportMetric(float64(procs), "procs")
	b.ReportMetric(float64(fds), "fds")
}
