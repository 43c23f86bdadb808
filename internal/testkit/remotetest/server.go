package remotetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Environment variables that point tests at a shared S3 server. .ci/run
// starts versitygw and sets them; Main does the same for one test binary.
const (
	EnvEndpoint  = "OMPSYNC_TEST_S3_ENDPOINT"   // e.g. http://127.0.0.1:7070
	EnvAccessKey = "OMPSYNC_TEST_S3_ACCESS_KEY" //
	EnvSecretKey = "OMPSYNC_TEST_S3_SECRET_KEY" //
	EnvVersitygw = "OMPSYNC_TEST_VERSITYGW"     // path of the versitygw binary

	// A MinIO server, the S3 server self-hosting users run most: when set
	// (.ci/run starts one), Backends and RunS3Driver run on it too.
	EnvMinioEndpoint  = "OMPSYNC_TEST_MINIO_ENDPOINT"
	EnvMinioAccessKey = "OMPSYNC_TEST_MINIO_ACCESS_KEY"
	EnvMinioSecretKey = "OMPSYNC_TEST_MINIO_SECRET_KEY"
)

// howToRunMinio is the message when the MinIO tests cannot run.
const howToRunMinio = "no MinIO test server: run `bash .ci/run`, or start one " +
	"(go install github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c; minio server DIR) and set " + EnvMinioEndpoint + ", " +
	EnvMinioAccessKey + " and " + EnvMinioSecretKey

// howToRun is the message when S3 tests cannot run.
const howToRun = "no S3 test server: run `bash .ci/run`, or set " + EnvEndpoint + ", " + EnvAccessKey +
	" and " + EnvSecretKey + " (path-style, us-east-1), or install versitygw " +
	"(go install github.com/versity/versitygw/cmd/versitygw@v1.8.0) for packages whose TestMain calls remotetest.Main"

// skipOrFail skips the test, except in CI (CI=true), which must never pass
// by skipping.
func skipOrFail(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", msg)
	}
	t.Skip(msg)
}

// Server is an S3 test server: a private versitygw process (StartServer),
// or the shared one the environment names (SharedServer).
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	AccessKey string
	SecretKey string
	// Dir holds the buckets of a private server (one folder each).
	Dir string
	// Kind is the server: "versitygw" or "minio". Where they differ, a
	// test says which it expects what from.
	Kind string

	proc *process // nil for the shared server
}

// StartServer starts a private versitygw on a free loopback port, with its
// data in a temp folder, for tests that stop and restart the server. It is
// stopped when the test ends. Without a versitygw binary the test is skipped
// (failed under CI=true).
func StartServer(t testing.TB) *Server {
	t.Helper()
	bin, err := FindVersitygw()
	if err != nil {
		skipOrFail(t, err.Error())
	}
	p, err := startProcess(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return &Server{Endpoint: p.endpoint(), AccessKey: p.access, SecretKey: p.secret, Dir: p.dir, Kind: KindVersitygw, proc: p}
}

// SharedServer returns the server named by OMPSYNC_TEST_S3_*; without them
// the test is skipped (failed under CI=true). It cannot be stopped.
func SharedServer(t testing.TB) *Server {
	t.Helper()
	ep, ak, sk := os.Getenv(EnvEndpoint), os.Getenv(EnvAccessKey), os.Getenv(EnvSecretKey)
	if ep == "" || ak == "" || sk == "" {
		skipOrFail(t, howToRun)
	}
	return &Server{Endpoint: ep, AccessKey: ak, SecretKey: sk, Kind: KindVersitygw}
}

// Server kinds.
const (
	KindVersitygw = "versitygw"
	KindMinio     = "minio"
)

// MinioServer returns the MinIO server named by OMPSYNC_TEST_MINIO_*, or
// nil when they are unset; under CI=true, which must run on MinIO too,
// that fails the test.
func MinioServer(t testing.TB) *Server {
	t.Helper()
	srv := minioFromEnv()
	if srv == nil && os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", howToRunMinio)
	}
	return srv
}

func minioFromEnv() *Server {
	ep, ak, sk := os.Getenv(EnvMinioEndpoint), os.Getenv(EnvMinioAccessKey), os.Getenv(EnvMinioSecretKey)
	if ep == "" || ak == "" || sk == "" {
		return nil
	}
	return &Server{Endpoint: ep, AccessKey: ak, SecretKey: sk, Kind: KindMinio}
}

// Stop stops a private server (SIGTERM, then SIGKILL after 5 s). Requests
// then fail as a network outage would.
func (s *Server) Stop() {
	if s.proc == nil {
		panic("remotetest: Stop on the shared server")
	}
	s.proc.stop()
}

// Start starts a stopped private server again on the same port with the
// same data.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if s.proc == nil {
		t.Fatal("remotetest: Start on the shared server")
	}
	if err := s.proc.start(); err != nil {
		t.Fatal(err)
	}
}

// NewBucket creates a bucket with a unique name through the S3 API and
// returns its name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "test-" + hex.EncodeToString(b[:])
	api := s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := api.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s on %s: %v", name, s.Endpoint, err)
	}
	return name
}

// FindVersitygw returns the versitygw binary: $OMPSYNC_TEST_VERSITYGW, else
// the one on PATH, else $(go env GOPATH)/bin/versitygw.
func FindVersitygw() (string, error) {
	if p := os.Getenv(EnvVersitygw); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w (unset it to look on PATH and in GOPATH/bin)", EnvVersitygw, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = strings.TrimSpace(strings.SplitN(string(out), string(os.PathListSeparator), 2)[0])
		}
	}
	if gopath != "" {
		p := filepath.Join(gopath, "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New(howToRun)
}

// process is one versitygw server, restartable on the same port.
type process struct {
	bin, dir, addr string
	access, secret string
	args           []string // more of versitygw's flags

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	logs *bytes.Buffer
}

func (p *process) endpoint() string { return "http://" + p.addr }

// startProcess starts versitygw with its buckets in dir/data.
func startProcess(bin, dir string, args ...string) (*process, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	p := &process{bin: bin, dir: data, access: "test-" + randomHex(6), secret: randomHex(20), args: args}
	var err error
	for range 3 { // the free port may be taken between probe and bind
		if p.addr, err = freePort(); err != nil {
			return nil, err
		}
		if err = p.start(); err == nil {
			return p, nil
		}
	}
	return nil, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// start runs the server and waits until it accepts connections.
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return errors.New("versitygw already running")
	}
	p.logs = new(bytes.Buffer)
	args := append([]string{"--access", p.access, "--secret", p.secret, "--port", p.addr, "--quiet"}, p.args...)
	cmd := exec.Command(p.bin, append(args, "posix", p.dir)...)
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start versitygw: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		select {
		case <-done:
			return fmt.Errorf("versitygw on %s exited at start: %s", p.addr, p.logs)
		default:
		}
		if c, err := net.DialTimeout("tcp", p.addr, time.Second); err == nil {
			c.Close()
			p.cmd, p.done = cmd, done
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-done
	return fmt.Errorf("versitygw on %s did not listen within 15s: %s", p.addr, p.logs)
}

// stop ends the server; it is a no-op when stopped.
func (p *process) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

// Versitygw is a versitygw process of its own on a loopback port, for the
// harnesses that are not tests (the bench command).
type Versitygw struct {
	Endpoint, AccessKey, SecretKey string
	Dir                            string // one folder per bucket
	p                              *process
}

// StartVersitygw starts versitygw with its buckets under dir; args are
// more of its flags.
func StartVersitygw(dir string, args ...string) (*Versitygw, error) {
	bin, err := FindVersitygw()
	if err != nil {
		return nil, err
	}
	p, err := startProcess(bin, dir, args...)
	if err != nil {
		return nil, err
	}
	return &Versitygw{Endpoint: p.endpoint(), AccessKey: p.access, SecretKey: p.secret, Dir: p.dir, p: p}, nil
}

// Pid is the server's process id, for CPU accounting.
func (v *Versitygw) Pid() int {
	v.p.mu.Lock()
	defer v.p.mu.Unlock()
	return v.p.cmd.Process.Pid
}

// Stop ends the server.
func (v *Versitygw) Stop() { v.p.stop() }
