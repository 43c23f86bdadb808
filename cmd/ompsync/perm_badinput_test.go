//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
)

// nobody is the user an unprivileged run switches to when the tests run
// as root (CI does), since root reads files whatever their mode.
const nobody = 65534

// unprivileged prepares a folder an unprivileged user can use and a copy
// of the test binary it can run, and returns how to start a process as
// that user (nil when the tests already run unprivileged).
func unprivileged(t *testing.T) (dir, bin string, cred *syscall.Credential) {
	t.Helper()
	dir, err := os.MkdirTemp("", "ompsync-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Give everything back its permissions so it can be removed.
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			_ = os.Chmod(p, 0o700)
			return nil
		})
		os.RemoveAll(dir)
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "ompsync.test")
	src, err := os.Open(ompsyncBin)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		return dir, bin, nil
	}
	cred = &syscall.Credential{Uid: nobody, Gid: nobody}
	probe := exec.Command(bin, "version")
	probe.Env = []string{"OMPSYNC_TEST_MAIN=1", "HOME=" + dir}
	probe.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("running as root but cannot switch to uid %d to test unreadable files: %v %s", nobody, err, out)
	}
	return dir, bin, cred
}

// runAs makes cmd run as the user cred names (nil: this one).
func runAs(cmd *exec.Cmd, cred *syscall.Credential) {
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
}

// chownAll gives the tree under dir to the unprivileged user.
func chownAll(t *testing.T, dir string, cred *syscall.Credential) {
	t.Helper()
	if cred == nil {
		return
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(cred.Uid), int(cred.Gid))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Files and folders the agent cannot read: the pass backs up everything
// else, names what it could not read, exits 1 for an unreadable session
// (so cron and scripts see it), and uploads it whole once it can be read.
// Nothing local is changed.
func TestUnreadableFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	dir, bin, cred := unprivileged(t)
	home := filepath.Join(dir, "home")
	agentDir := filepath.Join(home, ".omp", "agent")
	remoteDir := filepath.Join(home, "remote")
	ids := map[string]string{
		"readable": "019a0000-0000-7000-8000-0000000000a1",
		"locked":   "019a0000-0000-7000-8000-0000000000a2",
		"hidden":   "019a0000-0000-7000-8000-0000000000a3",
	}
	files := map[string]string{
		"readable": filepath.Join(agentDir, "sessions", "-work", "2026-11-30T00-00-00-000Z_"+ids["readable"]+".jsonl"),
		"locked":   filepath.Join(agentDir, "sessions", "-work", "2026-11-30T00-00-00-000Z_"+ids["locked"]+".jsonl"),
		"hidden":   filepath.Join(agentDir, "sessions", "-private", "2026-11-30T00-00-00-000Z_"+ids["hidden"]+".jsonl"),
	}
	want := map[string][]byte{}
	for name, p := range files {
		body := titleSlotLine(name) + fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-11-30T00:00:00Z","cwd":"/w"}`+"\n", ids[name]) +
			entry("00000001", "", "the "+name+" session") + "\n"
		writeFile(t, p, body, 0o600)
		want[name] = []byte(body)
	}
	if err := os.MkdirAll(remoteDir, 0o700); err != nil {
		t.Fatal(err)
	}
	chownAll(t, home, cred)
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(files["locked"], 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(files["hidden"]), 0); err != nil {
		t.Fatal(err)
	}

	once := func() (int, string) {
		t.Helper()
		cmd := exec.Command(bin, "agent", "--once")
		cmd.Env = []string{
			"OMPSYNC_TEST_MAIN=1", "HOME=" + home, "PATH=" + os.Getenv("PATH"),
			"OMPSYNC_AGENT_DIR=" + agentDir, "OMPSYNC_STATE_DIR=" + filepath.Join(home, "state"),
			"OMPSYNC_REMOTE=file://" + remoteDir, "OMPSYNC_MACHINE=box",
		}
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	code, out := once()
	t.Logf("first pass (uid %v):\n%s", cred, out)
	if code != 1 {
		t.Errorf("agent --once with an unreadable session: exit %d, want 1\n%s", code, out)
	}
	for _, w := range []string{files["locked"][len(agentDir)+1:], "permission denied", filepath.Dir(files["hidden"])} {
		if !strings.Contains(out, w) {
			t.Errorf("output does not name %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "panic") {
		t.Fatalf("agent panicked:\n%s", out)
	}
	client, err := backend.Open(context.Background(), "file://"+remoteDir, backend.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := repo.New(client, repo.NewZstd())
	if got := remoteCopy(t, r, ids["readable"], "box"); !bytes.Equal(got, want["readable"]) {
		t.Errorf("the readable session: remote %d bytes, want %d", len(got), len(want["readable"]))
	}

	// Readable again: everything is backed up, nothing was changed.
	if err := os.Chmod(files["locked"], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(files["hidden"]), 0o700); err != nil {
		t.Fatal(err)
	}
	if code, out := once(); code != 0 {
		t.Fatalf("agent --once once readable: exit %d\n%s", code, out)
	}
	for name, p := range files {
		if got := remoteCopy(t, r, ids[name], "box"); !bytes.Equal(got, want[name]) {
			t.Errorf("%s session: remote %d bytes, want %d", name, len(got), len(want[name]))
		}
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, want[name]) {
			t.Errorf("%s session changed locally: %v", name, err)
		}
	}
}
