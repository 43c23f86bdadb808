package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote/backend"
)

// secretEnv runs ompsync processes with the S3 keys in a config file only.
type secretEnv struct {
	t        *testing.T
	home     string
	agentDir string
	stateDir string
	config   string
	// outputs collects everything a user or a log collector could see.
	outputs map[string]string
}

func newSecretEnv(t *testing.T, srv *remotetest.Server, bucket, client, accessKey, secretKey string) *secretEnv {
	home := t.TempDir()
	e := &secretEnv{
		t: t, home: home, agentDir: filepath.Join(home, ".omp", "agent"), stateDir: filepath.Join(home, "state"),
		config: filepath.Join(home, ".config", "ompsync", "config.yaml"), outputs: map[string]string{},
	}
	body := fmt.Sprintf("remote: s3://%s/omp\nmachine: secretive\ns3:\n  client: %s\n  endpoint: %s\n  path_style: true\n  access_key_id: %s\n  secret_access_key: %s\nlog:\n  level: debug\n",
		bucket, client, srv.Endpoint, accessKey, secretKey)
	writeFile(t, e.config, body, 0o600)
	sess := filepath.Join(e.agentDir, "sessions", "-work", "2026-11-30T00-00-00-000Z_019a0000-0000-7000-8000-5ec4e75ec4e7.jsonl")
	writeFile(t, sess, titleSlotLine("secret test")+`{"type":"session","version":3,"id":"019a0000-0000-7000-8000-5ec4e75ec4e7","timestamp":"2026-11-30T00:00:00Z","cwd":"/home/u/work"}`+"\n"+
		entry("00000001", "", "hello")+"\n", 0o600)
	return e
}

func (e *secretEnv) environ(extra ...string) []string {
	env := []string{
		"OMPSYNC_TEST_MAIN=1", "HOME=" + e.home, "PATH=" + os.Getenv("PATH"),
		"OMPSYNC_CONFIG=" + e.config, "OMPSYNC_AGENT_DIR=" + e.agentDir, "OMPSYNC_STATE_DIR=" + e.stateDir,
	}
	if v, ok := os.LookupEnv("AWS_CA_BUNDLE"); ok {
		env = append(env, "AWS_CA_BUNDLE="+v)
	}
	return append(env, extra...)
}

// run runs `ompsync args...` to completion, records its output and
// returns its exit code.
func (e *secretEnv) run(name string, extra []string, args ...string) (int, string) {
	e.t.Helper()
	cmd := exec.Command(ompsyncBin, args...)
	cmd.Env = e.environ(extra...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	e.outputs[name+": ompsync "+strings.Join(args, " ")] = out.String()
	return code, out.String()
}

// grepFiles records the content of every file under dir as an output,
// except the config file, which holds the keys by design.
func (e *secretEnv) grepFiles(what, dir string) {
	e.t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || p == e.config {
			return nil
		}
		b, err := os.ReadFile(p)
		if err == nil {
			e.outputs[what+" "+p] = string(b)
		}
		return nil
	})
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// The S3 secret key is a known test value; it must not appear in anything
// ompsync prints, logs (at debug level), serves as metrics, dumps on
// SIGQUIT, stores in its state or uploads, whether the remote works, is
// down, or refuses the key.
func TestSecretsNeverShown(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	srv := remotetest.StartServer(t)
	wrongSecret := "0wrong0secret0" + strings.Repeat("9", 26)
	for _, client := range backend.Clients("s3") {
		t.Run(client, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			e := newSecretEnv(t, srv, bucket, client, srv.AccessKey, srv.SecretKey)
			must := func(code int, out string) {
				t.Helper()
				if code != 0 {
					t.Fatalf("exit %d:\n%s", code, out)
				}
			}
			must(e.run("works", nil, "config", "show"))
			must(e.run("works", nil, "config", "show", "--json"))
			must(e.run("works", nil, "agent", "--once"))
			must(e.run("works", nil, "status"))
			must(e.run("works", nil, "status", "--json"))
			must(e.run("works", nil, "ls"))
			must(e.run("works", nil, "ls", "--json"))
			must(e.run("works", nil, "verify"))
			restored := filepath.Join(e.home, "restored")
			must(e.run("works", nil, "restore", "--all", "--to", restored))
			e.run("works", nil, "service", "unit", "--systemd")

			// A remote that is down, and one that refuses the keys.
			if code, out := e.run("down", []string{"OMPSYNC_S3_ENDPOINT=http://" + freeAddr(t)}, "ls"); code == 0 {
				t.Errorf("ls with the remote down: exit 0\n%s", out)
			}
			wrong := newSecretEnv(t, srv, bucket, client, srv.AccessKey, wrongSecret)
			wrong.outputs = e.outputs
			if code, out := wrong.run("refused", nil, "agent", "--once"); code == 0 {
				t.Errorf("agent --once with a wrong secret: exit 0\n%s", out)
			}
			wrong.run("refused", nil, "ls")

			// The long-running agent: its metrics, then its crash dump.
			addr := freeAddr(t)
			cmd := exec.Command(ompsyncBin, "agent", "--interval", "100ms", "--metrics-addr", addr)
			cmd.Env = e.environ()
			var out syncBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			metrics := ""
			for deadline := time.Now().Add(20 * time.Second); metrics == "" && time.Now().Before(deadline); {
				if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						metrics = string(b)
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			if metrics == "" {
				t.Errorf("no metrics served on %s:\n%s", addr, out.String())
			}
			e.outputs["metrics"] = metrics
			_ = cmd.Process.Signal(syscall.SIGQUIT) // the Go runtime dumps every goroutine's stack
			_ = cmd.Wait()
			e.outputs["agent then SIGQUIT"] = out.String()
			if !strings.Contains(out.String(), "goroutine ") {
				t.Errorf("SIGQUIT gave no stack dump:\n%s", out.String())
			}

			e.grepFiles("file", e.home)
			wrong.grepFiles("file", wrong.home)
			e.grepFiles("uploaded", srv.Dir)
			if len(e.outputs) < 20 {
				t.Fatalf("only %d outputs collected", len(e.outputs))
			}
			for what, text := range e.outputs {
				for name, needle := range map[string]string{"secret key": srv.SecretKey, "wrong secret key": wrongSecret} {
					if strings.Contains(text, needle) {
						t.Errorf("%s shows the %s:\n%s", what, name, text)
					}
				}
			}

			// What ompsync writes is private: state dir 0700 and its
			// files 0600; restored folders 0700 and files 0600.
			checkPrivate(t, e.stateDir)
			checkPrivate(t, restored)
		})
	}
}

// checkPrivate checks that every folder under dir is 0700 and every file
// 0600.
func checkPrivate(t *testing.T, dir string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if d.Type()&fs.ModeSymlink == 0 && fi.Mode().Perm() != want {
			t.Errorf("%s has mode %04o, want %04o", p, fi.Mode().Perm(), want)
		}
		n++
		return nil
	})
	if err != nil || n < 2 {
		t.Errorf("walk %s: %v (%d entries)", dir, err, n)
	}
}

// A config file others can read is warned about by every command that
// loads it; a state dir others can read (it lists every session's path
// and title) is warned about by the agent.
func TestPermissionWarnings(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	e := newSecretEnv(t, &remotetest.Server{Endpoint: "http://127.0.0.1:1"}, "bucket", backend.Clients("s3")[0], "AKIDEXAMPLE", "not-used-secret-0000")
	if err := os.Chmod(e.config, 0o644); err != nil {
		t.Fatal(err)
	}
	_, out := e.run("perm", nil, "config", "show")
	if !strings.Contains(out, "readable by other users") || !strings.Contains(out, e.config) {
		t.Errorf("config file mode 0644: no warning in\n%s", out)
	}
	if err := os.Chmod(e.config, 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("state dir", func(t *testing.T) {
		if err := os.MkdirAll(e.stateDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(e.stateDir, 0o755); err != nil {
			t.Fatal(err)
		}
		fileRemote := []string{"OMPSYNC_REMOTE=file://" + filepath.Join(e.home, "remote")}
		_, out := e.run("perm", fileRemote, "agent", "--once")
		if !strings.Contains(out, e.stateDir) || !strings.Contains(out, "chmod 700") {
			t.Errorf("state dir mode 0755: no warning in\n%s", out)
		}
	})
}
