//go:build linux

package hostile

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/bintest"
	"github.com/ompsync/ompsync/internal/testkit/faultproxy"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
)

func TestMain(m *testing.M) {
	if n, err := strconv.ParseInt(os.Getenv("OMPSYNC_TEST_HOG"), 10, 64); err == nil {
		// TestMemoryCapped: touch n bytes, then exit 0.
		b := make([]byte, n)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		os.Exit(0)
	}
	remotetest.Main(m)
}

// The cap the hostile runs are under holds: in a capped memory cgroup,
// where one can be made, a process touching half again its 1 GiB is killed
// by the kernel; else the address-space limit refuses one that asks for
// more than its 4 GiB.
func TestMemoryCapped(t *testing.T) {
	sb := &sandbox{dir: t.TempDir(), bin: os.Args[0], cgroupProcs: memoryCgroup(t)}
	hog, by := int64(rssCap+rssCap/2), "the memory cgroup "+filepath.Dir(sb.cgroupProcs)
	if sb.cgroupProcs == "" {
		hog, by = addressLimitKiB<<10+1<<30, "ulimit -v (no memory cgroup can be made here)"
	}
	sb.env = []string{"OMPSYNC_TEST_HOG=" + strconv.FormatInt(hog, 10)}
	out, err := sb.capped(t.Context(), nil).CombinedOutput()
	if err == nil {
		t.Fatalf("a process touching %d MiB under %s exited 0\n%s", hog>>20, by, out)
	}
	t.Logf("%d MiB refused by %s: %v", hog>>20, by, err)
}

// The cap. Go's runtime reserves address space up front and does not start
// reliably under an address-space limit near 1 GiB: under ulimit -v 1 GiB
// even `ompsync ls` dies in about one run of 15 ("runtime: out of memory:
// cannot allocate 4194304-byte block (3866624 in use)"), and 22 of this
// suite's runs died so. The limit that stops a runaway process is therefore
// 4 GiB of address space (ulimit -v), and what is asserted is the kernel's
// high-water mark of resident memory (ru_maxrss), below 1 GiB. Where the
// kernel lets this process make a memory cgroup (root, cgroup v1 or v2 with
// the memory controller), every run is also in one capped at 1 GiB, which
// the kernel enforces (memoryCgroup).
const (
	addressLimitKiB = 4 << 20
	rssCap          = 1 << 30
)

// sandbox is one run's world: everything the binary may write is inside
// dir; outside is a sibling folder a path escape would reach.
type sandbox struct {
	dir, outside                  string
	home, agentDir, stateDir, tmp string
	remoteDir                     string // the file remote, or "" for S3
	env                           []string
	bin                           string
	cgroupProcs                   string // the capped cgroup's procs file, or ""
}

func newSandbox(t *testing.T, bin string) *sandbox {
	t.Helper()
	root := t.TempDir()
	sb := &sandbox{dir: filepath.Join(root, "sandbox"), outside: filepath.Join(root, "outside"), bin: bin, cgroupProcs: memoryCgroup(t)}
	sb.home = filepath.Join(sb.dir, "home")
	sb.agentDir = filepath.Join(sb.home, ".omp", "agent")
	sb.stateDir = filepath.Join(sb.dir, "state")
	sb.tmp = filepath.Join(sb.dir, "tmp")
	for _, d := range []string{sb.outside, sb.agentDir, sb.stateDir, sb.tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sb.env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + sb.home, "TMPDIR=" + sb.tmp,
		"XDG_CONFIG_HOME=" + filepath.Join(sb.home, ".config"), "XDG_DATA_HOME=" + filepath.Join(sb.home, ".local/share"),
		"XDG_STATE_HOME=" + filepath.Join(sb.home, ".local/state"), "XDG_CACHE_HOME=" + filepath.Join(sb.home, ".cache"),
		"OMPSYNC_AGENT_DIR=" + sb.agentDir, "OMPSYNC_STATE_DIR=" + sb.stateDir,
	}
	return sb
}

// memoryCgroup makes a memory cgroup capped at rssCap beside this test
// process's own and returns the file a process joins it by, or "" where the
// kernel does not let it (not root, no memory controller delegated): then
// the address-space limit and the resident-memory check stand alone.
func memoryCgroup(t *testing.T) string {
	t.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil || os.Geteuid() != 0 {
		return ""
	}
	for _, line := range strings.Split(strings.TrimSpace(string(self)), "\n") {
		// v1 "4:memory:/path", v2 "0::/path".
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		var dir, limit string
		switch {
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			dir, limit = filepath.Join("/sys/fs/cgroup/memory", f[2]), "memory.limit_in_bytes"
		case f[0] == "0" && f[1] == "":
			root := "/sys/fs/cgroup/unified"
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
				root = "/sys/fs/cgroup"
			}
			dir, limit = filepath.Join(root, f[2]), "memory.max"
		default:
			continue
		}
		child, err := os.MkdirTemp(dir, "ompsync-hostile-")
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(child, limit), []byte(strconv.Itoa(rssCap)), 0); err != nil {
			os.Remove(child)
			continue
		}
		// Removed once the test's processes are gone (a cgroup with none
		// is an empty folder to the kernel).
		t.Cleanup(func() { os.Remove(child) })
		return filepath.Join(child, "cgroup.procs")
	}
	return ""
}

// fileRemote makes the sandbox's folder remote a copy of built
// (buildFileRemote) whose files are hard links: the file driver never
// writes an object in place (it renames a temp file over it), so what a
// command does to the copy leaves built as it was.
func (sb *sandbox) fileRemote(t *testing.T, built string) {
	t.Helper()
	sb.remoteDir = filepath.Join(sb.dir, "remote")
	err := filepath.WalkDir(built, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(built, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(sb.remoteDir, rel), 0o700)
		}
		return os.Link(p, filepath.Join(sb.remoteDir, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	sb.env = append(sb.env, "OMPSYNC_REMOTE=file://"+sb.remoteDir)
}

// run is one run of the binary and what it left.
type run struct {
	code           int
	stdout, stderr string
	maxRSS         int64
}

// capped is the binary under the address-space limit (and in the capped
// memory cgroup when there is one), in the sandbox.
func (sb *sandbox) capped(ctx context.Context, env []string, args ...string) *exec.Cmd {
	script := fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, addressLimitKiB)
	if sb.cgroupProcs != "" {
		script = fmt.Sprintf(`echo $$ > %q && %s`, sb.cgroupProcs, script)
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, sb.bin}, args...)...)
	cmd.Env = append(append([]string(nil), sb.env...), env...)
	cmd.Dir = sb.dir
	return cmd
}

func finish(t *testing.T, cmd *exec.Cmd, err error, stdout, stderr *bytes.Buffer) run {
	t.Helper()
	r := run{stdout: stdout.String(), stderr: stderr.String(), code: -1}
	var ee *exec.ExitError
	switch {
	case err == nil:
		r.code = 0
	case errorsAs(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run ompsync: %v", err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss << 10 // KiB on Linux
	}
	return r
}

func errorsAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// runOnce runs a command that ends by itself.
func (sb *sandbox) runOnce(t *testing.T, env []string, args ...string) run {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := sb.capped(ctx, env, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("ompsync %s still running after 3 minutes\n%s", strings.Join(args, " "), stderr.String())
	}
	return finish(t, cmd, err, &stdout, &stderr)
}

// runAgent runs the agent until done reports true about its log so far (or
// it exits), then stops it with SIGTERM.
func (sb *sandbox) runAgent(t *testing.T, env []string, done func(log string) bool, args ...string) run {
	t.Helper()
	cmd := sb.capped(t.Context(), env, args...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var stderr bytes.Buffer
	seen := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		closed := false
		for sc.Scan() {
			mu.Lock()
			stderr.WriteString(sc.Text() + "\n")
			if !closed && done(stderr.String()) {
				close(seen)
				closed = true
			}
			mu.Unlock()
		}
		io.Copy(io.Discard, pr)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()
	var err error
	select {
	case <-seen:
		cmd.Process.Signal(syscall.SIGTERM)
		err = <-exited
	case err = <-exited:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-exited
		mu.Lock()
		t.Fatalf("the agent did not get there in 2 minutes:\n%s", stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	return finish(t, cmd, err, &stdout, &stderr)
}

// tree is every path under dir with a hash of its content (folders: "").
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// changes lists what differs between two trees.
func changes(before, after map[string]string) []string {
	var out []string
	for p, h := range after {
		if b, ok := before[p]; !ok || b != h {
			out = append(out, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, p+" (removed)")
		}
	}
	return out
}

// command is one reader run against a hostile remote.
type command struct {
	name string
	// machine the binary runs as.
	machine string
	// writes: where the command may write besides the agent dir's good
	// session (relative to the sandbox).
	writes []string
	// exit is the status expected; -1: 0 or 1.
	exit int
}

func commandsFor(h Remote) []command {
	cmds := []command{
		// A restore keeps the checkouts it found (projects.roots) in the
		// state dir, as a cache.
		{name: "restore", machine: "victim", writes: []string{"state"}, exit: 1},
		{name: "verify", machine: "victim", exit: 1},
		{name: "pull", machine: "victim", writes: []string{"state", "remote"}, exit: 0},
		{name: "compact", machine: EvilMachine, writes: []string{"remote", "state/maintenance.lock"}, exit: -1},
	}
	if !h.Catalog {
		cmds = append(cmds, command{name: "restore one", machine: "victim", writes: []string{"state"}, exit: 1})
		if !h.Recorded {
			cmds = append(cmds, command{name: "restore at", machine: "victim", writes: []string{"state"}, exit: 1})
		}
		if !h.Blob {
			cmds = append(cmds, command{name: "cat", machine: "victim", exit: 1})
			cmds = append(cmds, command{name: "grep", machine: "victim", writes: []string{"state"}, exit: 1})
		}
	}
	if h.Compacts {
		cmds[3].exit = 1
	}
	return cmds
}

// Each hostile remote against restore (also of the bad session alone, and
// --at now), cat, grep, verify, pull and compact, the real
// binary under the cap: no crash, resident memory below 1 GiB, nothing
// written but the good session (and, for pull and compact, the state and
// the remote), the damage named in one line with the bad session, and the
// exit status the command owes: 1 for restore and verify; compact 1 where
// it reads the damage; pull keeps running (a bad pulled session must not
// stop the backup) and ends with 0 on SIGTERM.
func TestHostileRemotes(t *testing.T) {
	bin := bintest.ForTest(t)
	var mu sync.Mutex
	peak := map[string]int64{}
	t.Cleanup(func() {
		for k, v := range peak {
			t.Logf("peak RSS %-8s %6.1f MiB", k, float64(v)/(1<<20))
		}
	})
	for _, h := range Remotes() {
		t.Run(h.Name, func(t *testing.T) {
			backends := []string{"file"}
			var built string // the file remote, built once for every command
			var builtTree map[string]string
			if h.Listing != nil {
				backends = backend.Clients("s3")
			} else {
				built = buildFileRemote(t, h)
				builtTree = tree(t, built)
			}
			for _, be := range backends {
				for _, c := range commandsFor(h) {
					t.Run(be+"/"+c.name, func(t *testing.T) {
						r := runHostile(t, bin, h, be, built, c)
						if built != "" {
							// A command that wrote an object in place would
							// have changed it for the commands after it.
							if ch := changes(builtTree, tree(t, built)); len(ch) > 0 {
								t.Fatalf("the remote shared by hard links changed: %v", ch)
							}
						}
						mu.Lock()
						peak[c.name] = max(peak[c.name], r.maxRSS)
						mu.Unlock()
					})
				}
			}
		})
	}
}

// buildFileRemote builds h into a folder, written without fsyncs, once
// for every command run against it (sandbox.fileRemote): building some (the
// 5,000 chunks of a reference bomb) took most of a run.
func buildFileRemote(t *testing.T, h Remote) string {
	t.Helper()
	rc := fastRemote(t)
	if err := h.Build(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	return rc.(fastPut).dir
}

// runHostile runs command c against hostile remote h on backend be: for
// "file", a copy of built.
func runHostile(t *testing.T, bin string, h Remote, be, built string, c command) run {
	sb := newSandbox(t, bin)
	var rc remote.Client
	var env []string
	if be == "file" {
		sb.fileRemote(t, built)
	} else {
		srv := remotetest.SharedServer(t)
		bucket := srv.NewBucket(t)
		p, err := faultproxy.Start(srv.Endpoint, faultproxy.Config{Rewrite: h.Listing})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		opts := backend.S3Options{Client: be, Endpoint: srv.Endpoint, Region: "us-east-1", PathStyle: true, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}
		if rc, err = backend.OpenRaw(t.Context(), "s3://"+bucket, opts); err != nil {
			t.Fatal(err)
		}
		sb.env = append(sb.env, "OMPSYNC_REMOTE=s3://"+bucket, "OMPSYNC_S3_CLIENT="+be, "OMPSYNC_S3_ENDPOINT="+p.URL,
			"OMPSYNC_S3_PATH_STYLE=true", "OMPSYNC_S3_REGION=us-east-1",
			"OMPSYNC_S3_ACCESS_KEY_ID="+srv.AccessKey, "OMPSYNC_S3_SECRET_ACCESS_KEY="+srv.SecretKey)
	}
	if rc != nil {
		if err := h.Build(t.Context(), rc); err != nil {
			t.Fatal(err)
		}
	}
	env = append(env, "OMPSYNC_MACHINE="+c.machine)
	before := tree(t, sb.dir)

	var r run
	switch c.name {
	case "restore":
		r = sb.runOnce(t, env, "restore", "--all")
	case "restore one":
		r = sb.runOnce(t, env, "restore", BadID)
	case "restore at":
		r = sb.runOnce(t, env, "restore", "--at", "0s", BadID)
	case "cat":
		r = sb.runOnce(t, env, "cat", BadID)
		if r.stdout != "" {
			t.Errorf("cat of a damaged session printed %d bytes", len(r.stdout))
		}
	case "grep":
		// A word of every line of the good session: what is printed is its.
		r = sb.runOnce(t, env, "grep", "-i", "e", BadID)
		if r.stdout != "" {
			t.Errorf("grep of a damaged session printed %d bytes", len(r.stdout))
		}
	case "verify":
		r = sb.runOnce(t, env, "verify")
	case "compact":
		// Idle at once, so that it merges (and reads) every small chunk.
		r = sb.runOnce(t, append(env, "OMPSYNC_COMPACTION_IDLE=1ms"), "compact")
	case "pull":
		good := filepath.Join(sb.agentDir, filepath.FromSlash(GoodRel))
		r = sb.runAgent(t, env, func(log string) bool {
			_, err := os.Stat(good)
			return err == nil && namesDamage(h, log)
		}, "agent", "--pull", "--pull-interval", "300ms", "--interval", "200ms", "--log-level", "info")
	}
	t.Logf("exit %d, peak RSS %.1f MiB", r.code, float64(r.maxRSS)/(1<<20))

	out := r.stdout + r.stderr
	for _, crash := range []string{"panic:", "fatal error:", "goroutine ", "SIGSEGV", "out of memory"} {
		if strings.Contains(out, crash) {
			t.Fatalf("ompsync %s crashed (%q):\n%s", c.name, crash, tail(out))
		}
	}
	if r.maxRSS >= rssCap {
		t.Errorf("peak resident memory %d MiB, at or above the %d MiB cap", r.maxRSS>>20, rssCap>>20)
	}
	switch {
	case c.exit >= 0 && r.code != c.exit:
		t.Errorf("exit %d, want %d:\n%s", r.code, c.exit, tail(out))
	case c.exit < 0 && r.code != 0 && r.code != 1:
		t.Errorf("exit %d, want 0 or 1:\n%s", r.code, tail(out))
	}
	if c.exit != 0 && r.code != 0 && !namesDamage(h, out) {
		t.Errorf("no line names %s with %q:\n%s", damaged(h), h.Want, tail(out))
	}
	if c.exit == 0 && !namesDamage(h, out) {
		t.Errorf("the agent's log has no line naming %s with %q:\n%s", damaged(h), h.Want, tail(out))
	}

	// Nothing written outside the sandbox's allowed places.
	if entries, _ := os.ReadDir(sb.outside); len(entries) > 0 {
		t.Errorf("written outside the sandbox: %v", entries)
	}
	allowed := append([]string{"tmp", "home/.omp/agent/sessions", "home/.omp/agent/sessions/-w"}, c.writes...)
	if c.name == "restore" || c.name == "pull" {
		allowed = append(allowed, filepath.Join("home/.omp/agent", filepath.FromSlash(GoodRel)))
	}
	for _, p := range changes(before, tree(t, sb.dir)) {
		ok := false
		for _, a := range allowed {
			if p == a || strings.HasPrefix(p, a+"/") {
				ok = true
			}
		}
		if !ok {
			t.Errorf("ompsync %s wrote %s", c.name, p)
		}
	}
	if c.name == "restore" || c.name == "pull" {
		got, err := os.ReadFile(filepath.Join(sb.agentDir, filepath.FromSlash(GoodRel)))
		if want, _ := GoodSession(); err != nil || !bytes.Equal(got, want) {
			t.Errorf("the good session beside the damage was not restored whole: %v", err)
		}
	}
	return r
}

func damaged(h Remote) string {
	if h.Catalog {
		return "the evil machine's catalog"
	}
	return "session " + BadID
}

// namesDamage reports whether one line of out names the damage.
func namesDamage(h Remote, out string) bool {
	for _, l := range strings.Split(out, "\n") {
		for _, want := range strings.Split(h.Want, "|") {
			if strings.Contains(l, want) && (h.Catalog && strings.Contains(l, "catalog") && strings.Contains(l, EvilMachine) || strings.Contains(l, BadID)) {
				return true
			}
		}
	}
	return false
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}
