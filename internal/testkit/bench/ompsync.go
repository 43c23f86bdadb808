package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Ompsync runs the ompsync binary against one bucket of the server,
// configured through OMPSYNC_* variables only (no config file is read).
type Ompsync struct {
	Bin string
	// LogLevel is the agents' log level (default warn); with LogDir set,
	// each daemon's log is kept there as agent-<n>.log.
	LogLevel, LogDir string

	env []string
	// peak is the peak resident memory of the last Run (shared by the
	// copies With makes).
	peak *atomic.Int64
}

// LastPeak is the peak resident memory of the last command run, in bytes
// (the kernel's ru_maxrss of that process alone).
func (o *Ompsync) LastPeak() int64 { return o.peak.Load() }

// NewOmpsync configures the binary for agentDir and stateDir, uploading to
// bucket through endpoint (a Proxy). home is an empty folder used as HOME
// and XDG dirs so that nothing of the user's is read.
func NewOmpsync(bin, endpoint, accessKey, secretKey, bucket, agentDir, stateDir, home string) *Ompsync {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OMPSYNC_") && !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_STATE_HOME="+filepath.Join(home, ".state"),
		"XDG_DATA_HOME="+filepath.Join(home, ".data"),
		"OMPSYNC_AGENT_DIR="+agentDir,
		"OMPSYNC_STATE_DIR="+stateDir,
		"OMPSYNC_MACHINE=bench",
		"OMPSYNC_REMOTE=s3://"+bucket,
		"OMPSYNC_S3_ENDPOINT="+endpoint,
		"OMPSYNC_S3_PATH_STYLE=true",
		"OMPSYNC_S3_ACCESS_KEY_ID="+accessKey,
		"OMPSYNC_S3_SECRET_ACCESS_KEY="+secretKey,
	)
	return &Ompsync{Bin: bin, env: env, LogLevel: "warn", peak: new(atomic.Int64)}
}

// With returns o with extra KEY=VALUE settings.
func (o *Ompsync) With(kv ...string) *Ompsync {
	c := *o
	c.env = slices.Concat(o.env, kv)
	return &c
}

// Run runs one command to its end and returns its combined output.
func (o *Ompsync) Run(ctx context.Context, args ...string) ([]byte, error) {
	return o.RunProgram(ctx, o.Bin, args...)
}

// RunProgram is Run for another program that reads the same settings.
func (o *Ompsync) RunProgram(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = slices.Concat(o.env, []string{"OMPSYNC_LOG_LEVEL=" + o.LogLevel})
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if cmd.ProcessState != nil {
		if rss := peakRSS(cmd.ProcessState); rss > 0 {
			o.peak.Store(rss)
		}
	}
	if err != nil {
		return out.Bytes(), fmt.Errorf("ompsync %s: %w: %s", strings.Join(args, " "), err, tail(out.String()))
	}
	return out.Bytes(), nil
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}

// Has reports whether the binary knows a command (restore and ls come in a
// later version than the agent).
func (o *Ompsync) Has(ctx context.Context, command string) bool {
	cmd := exec.CommandContext(ctx, o.Bin, command, "--help")
	cmd.Env = o.env
	out, err := cmd.CombinedOutput()
	// cobra answers an unknown command's --help with the root help.
	return err == nil && bytes.Contains(out, []byte("ompsync "+command+" "))
}

// Daemon is a running `ompsync agent`.
type Daemon struct {
	Cmd     *exec.Cmd
	Started time.Time
	// Ready receives the time the agent told its service manager it is
	// ready (READY=1 on NOTIFY_SOCKET): it watches and has made its first
	// pass.
	Ready <-chan time.Time

	out     syncBuffer
	logFile *os.File
	notify  *net.UnixConn
	done    chan error
}

// StartDaemon starts `ompsync agent` with extra KEY=VALUE settings, with a
// private NOTIFY_SOCKET in dir to learn when it is ready.
func (o *Ompsync) StartDaemon(dir string, extra ...string) (*Daemon, error) {
	return o.StartWith(dir, []string{o.Bin, "agent"}, extra...)
}

// StartWith is StartDaemon for another program (argv[0]) that reads the
// same settings, such as an agent run in-process for profiling.
func (o *Ompsync) StartWith(dir string, argv []string, extra ...string) (*Daemon, error) {
	sock := filepath.Join(dir, fmt.Sprintf("notify-%d.sock", time.Now().UnixNano()))
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("notify socket: %w", err)
	}
	d := &Daemon{notify: conn, done: make(chan error, 1)}
	ready := make(chan time.Time, 1)
	d.Ready = ready
	go func() {
		buf := make([]byte, 4096)
		sent := false
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			if !sent && bytes.Contains(buf[:n], []byte("READY=1")) {
				ready <- time.Now()
				sent = true
			}
		}
	}()
	d.Cmd = exec.Command(argv[0], argv[1:]...)
	d.Cmd.Env = slices.Concat(o.env, []string{"OMPSYNC_LOG_LEVEL=" + o.LogLevel}, extra, []string{"NOTIFY_SOCKET=" + sock})
	d.Cmd.Stdout, d.Cmd.Stderr = &d.out, &d.out
	if o.LogDir != "" {
		f, err := os.CreateTemp(o.LogDir, "agent-*.log")
		if err != nil {
			conn.Close()
			return nil, err
		}
		d.logFile = f
		w := io.MultiWriter(&d.out, f)
		d.Cmd.Stdout, d.Cmd.Stderr = w, w
	}
	d.Started = time.Now()
	if err := d.Cmd.Start(); err != nil {
		conn.Close()
		return nil, err
	}
	go func() { d.done <- d.Cmd.Wait() }()
	return d, nil
}

// WaitReady waits for READY=1 and returns the time from start to ready.
func (d *Daemon) WaitReady(timeout time.Duration) (time.Duration, error) {
	select {
	case t := <-d.Ready:
		return t.Sub(d.Started), nil
	case err := <-d.done:
		d.done <- err
		return 0, fmt.Errorf("agent exited before it was ready: %v: %s", err, tail(d.out.String()))
	case <-time.After(timeout):
		return 0, fmt.Errorf("agent not ready after %s: %s", timeout, tail(d.out.String()))
	}
}

// Pid is the agent's process id.
func (d *Daemon) Pid() int { return d.Cmd.Process.Pid }

// Stop sends SIGTERM and waits; the agent must flush and exit 0.
func (d *Daemon) Stop() error {
	defer d.notify.Close()
	if d.logFile != nil {
		defer func() {
			d.logFile.Close()
			if fi, err := os.Stat(d.logFile.Name()); err == nil && fi.Size() == 0 {
				os.Remove(d.logFile.Name())
			}
		}()
	}
	_ = d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		if err != nil {
			return fmt.Errorf("agent exit: %w: %s", err, tail(d.out.String()))
		}
		return nil
	case <-time.After(60 * time.Second):
		_ = d.Cmd.Process.Kill()
		<-d.done
		return errors.New("agent did not stop within 60s of SIGTERM")
	}
}

// Output is what the agent logged so far.
func (d *Daemon) Output() string { return d.out.String() }

// syncBuffer is a bytes.Buffer safe for the process's output copier and a
// concurrent reader.
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
