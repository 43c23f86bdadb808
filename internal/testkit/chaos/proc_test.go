//go:build chaos

package chaos

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
)

// machine is one computer: a home with an agent dir, a state dir (on a
// small disk when possible), an omp, and ompsync agent processes.
type machine struct {
	t        *testing.T
	name     string
	home     string
	agentDir string
	stateDir string
	small    bool // the state dir is a small tmpfs
	env      []string
	log      *lockedFile
	omp      *omp
}

// lockedFile is the machine's agent log: every process appends to it.
type lockedFile struct {
	mu sync.Mutex
	f  *os.File
}

func (l *lockedFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

func newMachine(t *testing.T, i int, name, client, endpoint, bucket string, srv *remotetest.Server, rng *lockedRand, st *stats, sync bool) *machine {
	t.Helper()
	home := t.TempDir()
	m := &machine{t: t, name: name, home: home, agentDir: filepath.Join(home, ".omp", "agent"), stateDir: filepath.Join(home, "state")}
	for _, d := range []string{filepath.Join(m.agentDir, "sessions"), m.stateDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	m.small = smallDisk(t, m.stateDir)
	f, err := os.Create(filepath.Join(home, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		if t.Failed() {
			// The agents' debug logs outlive a failed run, to be read
			// with its seed.
			keep := filepath.Join(os.TempDir(), "ompsync-chaos-"+filepath.Base(home)+"-"+name+".log")
			if b, err := os.ReadFile(f.Name()); err == nil && os.WriteFile(keep, b, 0o600) == nil {
				t.Logf("%s: agent logs kept in %s", name, keep)
			}
		}
	})
	m.log = &lockedFile{f: f}
	m.env = []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"),
		"OMPSYNC_AGENT_DIR=" + m.agentDir, "OMPSYNC_STATE_DIR=" + m.stateDir,
		"OMPSYNC_REMOTE=s3://" + bucket, "OMPSYNC_MACHINE=" + name,
		"OMPSYNC_S3_CLIENT=" + client, "OMPSYNC_S3_ENDPOINT=" + endpoint, "OMPSYNC_S3_PATH_STYLE=true",
		"OMPSYNC_S3_ACCESS_KEY_ID=" + srv.AccessKey, "OMPSYNC_S3_SECRET_ACCESS_KEY=" + srv.SecretKey,
		"OMPSYNC_LOG_LEVEL=debug",
	}
	if v, ok := os.LookupEnv("AWS_CA_BUNDLE"); ok {
		m.env = append(m.env, "AWS_CA_BUNDLE="+v)
	}
	outside := filepath.Join(t.TempDir(), "elsewhere", "2026-01-01T00-00-00-000Z_0utside0-0000-7000-8000-000000000000.jsonl")
	m.omp = newOmp(m.agentDir, i, rng, st, sync, outside)
	if err := os.MkdirAll(filepath.Dir(outside), 0o700); err != nil {
		t.Fatal(err)
	}
	body := `{"type":"session","version":3,"id":"0utside0-0000-7000-8000-000000000000","timestamp":"x","cwd":"/x"}` + "\n" + m.omp.secret + "\n"
	if err := os.WriteFile(outside, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return m
}

// agentArgs is how the chaos runs the agent: short intervals, so much
// happens in a short run.
func agentArgs(pull bool) []string {
	a := []string{"agent", "--interval", "200ms", "--reconcile-interval", "2s"}
	if pull {
		a = append(a, "--pull", "--pull-interval", "1s")
	}
	return a
}

// ompsync runs a command to completion and returns its exit code and
// output (also appended to the machine's log).
func (m *machine) ompsync(env []string, args ...string) (int, string) {
	m.t.Helper()
	cmd := exec.Command(ompsyncBin, args...)
	cmd.Env = append(append([]string{}, m.env...), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	fmt.Fprintf(m.log, "=== ompsync %s\n%s", strings.Join(args, " "), out.String())
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	} else if err != nil {
		m.t.Fatal(err)
	}
	return 0, out.String()
}

// supervise keeps one agent process running until stop is closed, as a
// service manager would, and kills it with SIGKILL (sometimes stops it with
// SIGTERM) at random moments when chaos is on. It returns when the last
// process has ended.
func (m *machine) supervise(args []string, chaos bool, rng *lockedRand, st *stats, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		cmd := exec.Command(ompsyncBin, args...)
		cmd.Env = m.env
		var tail tailBuffer
		cmd.Stdout = ioMulti(m.log, &tail)
		cmd.Stderr = cmd.Stdout
		fmt.Fprintf(m.log, "=== start %s\n", strings.Join(args, " "))
		if err := cmd.Start(); err != nil {
			failf(m.t, "start agent: %v", err)
			return
		}
		st.add(func(s *stats) { s.Starts++ })
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		life := time.Hour
		if chaos {
			life = rng.between(300*time.Millisecond, 4*time.Second)
		}
		select {
		case err := <-done:
			// It ended by itself: a crash or a refusal to go on.
			reason := fmt.Sprintf("%s: %v: %s", m.name, err, tail.last())
			st.add(func(s *stats) { s.Exits++; s.ExitReasons = append(s.ExitReasons, reason) })
			if strings.Contains(tail.String(), "panic:") {
				failf(m.t, "agent on %s panicked:\n%s", m.name, tail.String())
			}
			time.Sleep(300 * time.Millisecond)
			continue
		case <-time.After(life):
			if rng.IntN(10) == 0 {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				st.add(func(s *stats) { s.Stops++ })
			} else {
				_ = cmd.Process.Kill()
				st.add(func(s *stats) { s.Kills++ })
			}
		case <-stop:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			st.add(func(s *stats) { s.Stops++ })
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			// SIGQUIT makes the Go runtime print every goroutine into
			// the log: where the stop hangs.
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			failf(m.t, "agent on %s did not stop within 30s of SIGTERM; its goroutines are in its log", m.name)
		}
		fmt.Fprintf(m.log, "=== ended\n")
		if strings.Contains(tail.String(), "panic:") {
			failf(m.t, "agent on %s panicked:\n%s", m.name, tail.String())
		}
		if chaos {
			time.Sleep(rng.between(0, 300*time.Millisecond))
		}
	}
}

// tailBuffer keeps the last few KB a process wrote.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 16<<10 {
		t.b = t.b[len(t.b)-8<<10:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// last is the last non-empty line, shortened.
func (t *tailBuffer) last() string {
	lines := strings.Split(strings.TrimSpace(t.String()), "\n")
	l := lines[len(lines)-1]
	if len(l) > 300 {
		l = l[:300] + "..."
	}
	return l
}

type multiWriter []interface{ Write([]byte) (int, error) }

func (w multiWriter) Write(p []byte) (int, error) {
	for _, x := range w {
		if _, err := x.Write(p); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func ioMulti(ws ...interface{ Write([]byte) (int, error) }) multiWriter { return ws }

// watchSizes records, until stop, every file under the agent dir seen
// smaller than before: ompsync must never truncate local data. Only for
// machines whose omp never shrinks a file itself (sync mode).
func (m *machine) watchSizes(st *stats, stop <-chan struct{}) {
	seen := map[string]int64{}
	for {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		// Sessions only: the bad inputs (notes files) are rewritten by the
		// test itself.
		matches, _ := filepath.Glob(filepath.Join(m.agentDir, "sessions", "*", "*_019b*.jsonl"))
		for _, p := range matches {
			fi, err := os.Lstat(p)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			if fi.Size() < seen[p] {
				msg := fmt.Sprintf("%s: %s shrank from %d to %d bytes", m.name, p, seen[p], fi.Size())
				st.add(func(s *stats) { s.Shrinks = append(s.Shrinks, msg) })
			}
			seen[p] = max(seen[p], fi.Size())
		}
	}
}
