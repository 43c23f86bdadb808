// Package clienttest runs the real coding agents other than omp (pi, Claude
// Code, Codex) against the fake model of internal/testkit/omptest on 127.0.0.1, so
// tests can watch each write its own session files. Each agent gets a
// private HOME and nothing of the host's environment but PATH and the
// locale; nothing reaches the network.
//
// Every client is found through an environment variable naming the npm
// prefix it is installed under (.ci/run installs them, cached); without it
// a test skips with a message saying how to install, or fails under
// CI=true. It is meant for tests only.
package clienttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/omptest"
)

// skipOrFail skips the test, except in CI (CI=true), which must never pass
// by skipping.
func skipOrFail(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", msg)
	}
	t.Skip(msg)
}

// locate finds rel under the npm prefix named by env, or says how to
// install it.
func locate(env, rel, install string) (string, error) {
	prefix := os.Getenv(env)
	if prefix == "" {
		return "", fmt.Errorf("%s not set: run `bash .ci/run`, or `%s` and set %s=/tmp/<dir>", env, install, env)
	}
	p := filepath.Join(prefix, "node_modules", filepath.FromSlash(rel))
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("%s=%s: %w; install with `%s`", env, prefix, err, install)
	}
	if fi.Mode()&0o111 == 0 && !strings.HasSuffix(p, ".js") {
		return "", fmt.Errorf("%s is not executable", p)
	}
	return p, nil
}

// deadProxy is where HTTP that is not for the fake model goes: requests
// fail at once on loopback instead of leaving the machine.
const deadProxy = "http://127.0.0.1:1"

// home is what every client's simulated machine shares: a private HOME
// (symlinks resolved, as the clients resolve their cwd), a working folder
// and the environment the client runs with.
type home struct {
	t     testing.TB
	Dir   string // $HOME
	Cwd   string // the folder the client runs in: $HOME/work
	model *omptest.Model
	env   []string
}

func newHome(t testing.TB, model *omptest.Model) home {
	t.Helper()
	dir := t.TempDir()
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	h := home{t: t, Dir: dir, Cwd: filepath.Join(dir, "work"), model: model}
	for _, d := range []string{h.Cwd, filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.env = []string{
		"HOME=" + dir,
		"TMPDIR=" + filepath.Join(dir, "tmp"),
		"TERM=dumb",
		"NO_COLOR=1",
		"HTTP_PROXY=" + deadProxy, "HTTPS_PROXY=" + deadProxy, "http_proxy=" + deadProxy, "https_proxy=" + deadProxy,
		"ALL_PROXY=" + deadProxy, "all_proxy=" + deadProxy,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PATH" || k == "LANG" || k == "TZ" || strings.HasPrefix(k, "LC_") {
			h.env = append(h.env, kv)
		}
	}
	return h
}

// command is a client command line run in Cwd with this HOME. Cancelling
// ctx kills the client and its process group.
func (h *home) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = h.Cwd
	cmd.Env = append([]string(nil), h.env...)
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs cmd and returns what it printed; err includes stderr's tail.
func run(cmd *exec.Cmd) (stdout, stderr string, err error) {
	var out, errb bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &out
	}
	cmd.Stderr = &errb
	err = cmd.Run()
	if err != nil {
		var ee *exec.ExitError
		what := filepath.Base(cmd.Path) + " " + strings.Join(cmd.Args[1:], " ")
		if errors.As(err, &ee) || err != nil {
			err = fmt.Errorf("%s: %w; stderr: %s; stdout: %s", tail(what, 300), err, tail(errb.String(), 2000), tail(out.String(), 1000))
		}
	}
	return out.String(), errb.String(), err
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// Files lists the regular files under dir whose paths relative to it
// match glob (filepath.Match on each path), sorted.
func Files(t testing.TB, dir, glob string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if ok, _ := filepath.Match(glob, filepath.ToSlash(rel)); ok {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// encodePath is how pi names the folder of an absolute path: "/", "\" and
// ":" turned into "-", the leading "/" dropped.
func encodePath(p string) string {
	return strings.NewReplacer("/", "-", "\\", "-", ":", "-").Replace(strings.TrimPrefix(p, "/"))
}
