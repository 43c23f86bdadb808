package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/repotest"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
)

// machineEnv is one machine for process tests: its own home, agent dir,
// state dir and config, sharing a remote.
type machineEnv struct {
	t        *testing.T
	home     string
	agentDir string
	remote   string
	s3       backend.S3Options
	machine  string
	env      []string // more of its environment (an identity file)
}

func newMachineEnv(t *testing.T, remoteURL string, s3 backend.S3Options, machine string) *machineEnv {
	home := t.TempDir()
	m := &machineEnv{t: t, home: home, agentDir: filepath.Join(home, ".omp", "agent"), remote: remoteURL, s3: s3, machine: machine}
	if err := os.MkdirAll(filepath.Join(m.agentDir, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	return m
}

// environ is the whole environment of an ompsync process of this machine.
func (m *machineEnv) environ() []string {
	env := []string{
		"OMPSYNC_TEST_MAIN=1",
		"HOME=" + m.home,
		"PATH=" + os.Getenv("PATH"),
		"OMPSYNC_AGENT_DIR=" + m.agentDir,
		"OMPSYNC_STATE_DIR=" + filepath.Join(m.home, "state"),
		"OMPSYNC_REMOTE=" + m.remote,
		"OMPSYNC_MACHINE=" + m.machine,
		"OMPSYNC_LOG_LEVEL=debug",
	}
	if m.s3.Endpoint != "" {
		env = append(env,
			"OMPSYNC_S3_CLIENT="+m.s3.Client,
			"OMPSYNC_S3_ENDPOINT="+m.s3.Endpoint,
			"OMPSYNC_S3_PATH_STYLE=true",
			"OMPSYNC_S3_ACCESS_KEY_ID="+m.s3.AccessKeyID,
			"OMPSYNC_S3_SECRET_ACCESS_KEY="+m.s3.SecretAccessKey,
		)
	}
	if v, ok := os.LookupEnv("AWS_CA_BUNDLE"); ok {
		env = append(env, "AWS_CA_BUNDLE="+v)
	}
	return append(env, m.env...)
}

// start runs `ompsync args...` as a process of this machine.
func (m *machineEnv) start(args ...string) (*exec.Cmd, *syncBuffer) {
	m.t.Helper()
	cmd := exec.Command(ompsyncBin, args...)
	cmd.Env = m.environ()
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	return cmd, out
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ompsync runs a command to completion and returns its exit code and output.
func (m *machineEnv) ompsync(args ...string) (int, string) {
	m.t.Helper()
	cmd, out := m.start(args...)
	err := cmd.Wait()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			m.t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return code, out.String()
}

// sessionWriter imitates omp: sessions appear whole by rename, then grow by
// whole lines appended, sometimes in two writes, with title slot rewrites.
type sessionWriter struct {
	dir   string
	rng   *rand.Rand
	files []string
	n     int
}

func newSessionWriter(dir string, seed uint64, sessions int) (*sessionWriter, error) {
	w := &sessionWriter{dir: dir, rng: rand.New(rand.NewPCG(seed, 1))}
	for i := range sessions {
		id := fmt.Sprintf("0190%04x-0000-7000-8000-%012x", i, seed)
		rel := filepath.Join("-work", fmt.Sprintf("2026-11-30T00-00-00-000Z_%s.jsonl", id))
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, err
		}
		body := titleSlotLine("") + fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-11-30T00:00:00Z","cwd":"/home/u/work"}`+"\n", id)
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			return nil, err
		}
		if err := os.Rename(tmp, p); err != nil {
			return nil, err
		}
		w.files = append(w.files, p)
	}
	return w, nil
}

func titleSlotLine(title string) string {
	s := fmt.Sprintf(`{"type":"title","v":1,"title":%q,"updatedAt":"2026-11-30T00:00:00.000Z","pad":"`, title)
	return s + strings.Repeat(" ", 256-len(s)-3) + "\"}\n"
}

// step appends one entry to a random session (sometimes split in two
// writes, sometimes large), or renames a session in place.
func (w *sessionWriter) step() error {
	p := w.files[w.rng.IntN(len(w.files))]
	w.n++
	if w.rng.IntN(20) == 0 {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteAt([]byte(titleSlotLine(fmt.Sprintf("title %d", w.n))), 0)
		f.Close()
		return err
	}
	size := 50 + w.rng.IntN(400)
	if w.rng.IntN(30) == 0 {
		size = 200_000
	}
	line := fmt.Sprintf(`{"type":"message","id":"%08x","parentId":null,"timestamp":"2026-11-30T00:00:00Z","text":"%s"}`+"\n", w.n, strings.Repeat("z", size))
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if w.rng.IntN(4) == 0 {
		cut := len(line) / 2
		if _, err := f.WriteString(line[:cut]); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
		line = line[cut:]
	}
	_, err = f.WriteString(line)
	return err
}

// remoteCopy reassembles a session's newest generation on machine.
func remoteCopy(t *testing.T, r *repo.Repo, id, machine string) []byte {
	t.Helper()
	invs, err := r.Inventory(context.Background(), id, machine)
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range invs {
		if inv.Stream.Name != repo.SessionStream {
			continue
		}
		as, err := repotest.ReadGeneration(context.Background(), r, inv.Stream, inv.Newest(), 1<<40)
		if err != nil {
			t.Fatalf("session %s: %v", id, err)
		}
		return as.Data
	}
	t.Fatalf("session %s: not on the remote", id)
	return nil
}

// The agent is killed with SIGKILL at random moments while sessions grow and
// restarted; afterwards the remote reassembles every file byte for byte.
func TestAgentSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	forEachRemote(t, func(t *testing.T, url string, s3 backend.S3Options) {
		m := newMachineEnv(t, url, s3, "crashy")
		w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 42, 4)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 7))
		kills := 0
		for round := 0; round < 5; round++ {
			cmd, out := m.start("agent", "--interval", "50ms")
			deadline := time.Now().Add(time.Duration(200+rng.IntN(600)) * time.Millisecond)
			for time.Now().Before(deadline) {
				if err := w.step(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			kills++
			if strings.Contains(out.String(), "panic") {
				t.Fatalf("agent panicked:\n%s", out)
			}
		}
		code, out := m.ompsync("agent", "--once")
		if code != 0 {
			t.Fatalf("agent --once after %d kills: exit %d\n%s", kills, code, out)
		}
		client, err := backend.Open(context.Background(), url, s3)
		if err != nil {
			t.Fatal(err)
		}
		r := repo.New(client, repo.NewZstd())
		for _, p := range w.files {
			want, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			id := strings.TrimSuffix(filepath.Base(p), ".jsonl")[len("2026-11-30T00-00-00-000Z_"):]
			if got := remoteCopy(t, r, id, "crashy"); !bytes.Equal(got, want) {
				t.Fatalf("after %d SIGKILLs, session %s: remote %d bytes, local %d", kills, id, len(got), len(want))
			}
		}
		t.Logf("%d kills, %d writes, remote identical", kills, w.n)
	})
}
