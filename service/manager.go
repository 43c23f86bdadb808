package service

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ompsync/ompsync/atomicfile"
)

// Runner runs a command and returns its combined stdout and stderr. The
// Manager runs systemctl, journalctl and launchctl only through it, so tests
// can record the commands instead of running them.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// ExecRunner runs commands with os/exec.
type ExecRunner struct{}

// Run implements Runner.
func (ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

// ErrUnsupported is returned by NewManager on systems other than Linux and
// macOS.
var ErrUnsupported = errors.New("running ompsync as a service is supported with systemd (Linux) and launchd (macOS)")

// ScheduledTaskCommand is the schtasks command line that makes Windows'
// Task Scheduler run the agent o describes at each logon of the user who
// runs it: what `service install` tells a Windows user to run. /TR takes
// the agent's command line as one argument, its own quotes escaped as \".
func ScheduledTaskCommand(o Options) string {
	q := func(s string) string { return `\"` + s + `\"` }
	tr := q(o.Binary) + " agent"
	if o.ConfigFile != "" {
		tr += " --config " + q(o.ConfigFile)
	}
	return `schtasks /Create /TN ompsync /SC ONLOGON /RL LIMITED /F /TR "` + tr + `"`
}

// logLines is how much of the agent's log Status shows.
const logLines = 20

// Manager installs, removes and reports on the agent's service for one user.
type Manager struct {
	opts    Options
	systemd bool // else launchd
	run     Runner
	out     io.Writer
}

// NewManager returns a Manager for the service manager of goos (usually
// runtime.GOOS): systemd for "linux", launchd for "darwin". Files go under
// o.Home; commands go through r; what the user should read goes to out.
func NewManager(goos string, o Options, r Runner, out io.Writer) (*Manager, error) {
	switch goos {
	case "linux", "darwin":
	case "windows":
		return nil, fmt.Errorf("%s: %w; to run the agent at logon, create a scheduled task: %s", goos, ErrUnsupported, ScheduledTaskCommand(o))
	default:
		return nil, fmt.Errorf("%s: %w; run \"ompsync agent\" under your own service manager", goos, ErrUnsupported)
	}
	if err := o.validate(true); err != nil {
		return nil, err
	}
	return &Manager{opts: o, systemd: goos == "linux", run: r, out: out}, nil
}

// Path is where the unit or plist is installed.
func (m *Manager) Path() string {
	if !m.systemd {
		return filepath.Join(m.opts.Home, "Library", "LaunchAgents", Label+".plist")
	}
	return filepath.Join(m.opts.Home, ".config", "systemd", "user", UnitName)
}

// action is a command an install or uninstall runs. Dry runs print the
// same steps they would take.
type action struct {
	cmd []string
	// tolerate reports whether a failed command means there was nothing to
	// do, such as booting out a job that is not loaded.
	tolerate func(out []byte, err error) bool
}

func run(cmd ...string) action { return action{cmd: cmd} }

type fileState int

const (
	absent fileState = iota
	differs
	same
)

// fileState renders the unit or plist Install writes and compares the
// installed one with it.
func (m *Manager) fileState() ([]byte, fileState, error) {
	render := Unit
	if !m.systemd {
		render = Plist
	}
	want, err := render(m.opts)
	if err != nil {
		return nil, absent, err
	}
	have, err := os.ReadFile(m.Path())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return want, absent, nil
	case err != nil:
		return nil, absent, fmt.Errorf("read installed service file: %w", err)
	case bytes.Equal(have, want):
		return want, same, nil
	default:
		return want, differs, nil
	}
}

// Install writes the unit or plist and has the service manager start the
// agent now and at every login. An identical file is left alone, but the
// service is still enabled and started. With dryRun it prints the file and
// the commands and changes nothing.
func (m *Manager) Install(ctx context.Context, dryRun bool) error {
	content, state, err := m.fileState()
	if err != nil {
		return err
	}
	path := m.Path()
	switch state {
	case same:
		fmt.Fprintf(m.out, "%s is already installed.\n", path)
	case differs:
		fmt.Fprintf(m.out, "%s exists with different content; it is replaced.\n", path)
	}

	// Both managers are told of a file written first.
	if state != same {
		if err := m.write(content, dryRun); err != nil {
			return err
		}
	}
	var acts []action
	switch {
	case m.systemd && state == absent:
		acts = []action{m.systemctl("daemon-reload"), m.systemctl("enable", "--now", UnitName)}
	case m.systemd && state == differs:
		// enable --now leaves a running agent on the old unit: restart it.
		acts = []action{m.systemctl("daemon-reload"), m.systemctl("enable", UnitName), m.systemctl("restart", UnitName)}
	case m.systemd:
		acts = []action{m.systemctl("enable", "--now", UnitName)}
	case state == same && m.loaded(ctx):
		fmt.Fprintf(m.out, "%s is loaded.\n", Label)
	default:
		if state != same {
			acts = []action{m.bootout()}
		}
		// enable undoes an earlier `launchctl disable`, which would make
		// bootstrap fail.
		acts = append(acts, run("launchctl", "enable", m.target()), run("launchctl", "bootstrap", m.domain(), path))
	}
	if err := m.apply(ctx, acts, dryRun); err != nil {
		return err
	}
	if dryRun {
		return nil
	}
	if m.systemd {
		user := "$USER"
		if m.opts.User != "" {
			user = shellWord(m.opts.User)
		}
		fmt.Fprintf(m.out, "The ompsync agent is running. Follow its log with:\n"+
			"  journalctl --user -u ompsync -f\n"+
			"It stops when you log out. To keep it running without a login, run once:\n"+
			"  loginctl enable-linger %s\n", user)
	} else {
		fmt.Fprintf(m.out, "The ompsync agent is running and starts at every login. Follow its log with:\n"+
			"  tail -f %s\n", shellWord(m.opts.LogPath()))
	}
	return nil
}

// Uninstall stops the agent, disables it and removes the unit or plist. A
// missing file is reported and is not an error.
func (m *Manager) Uninstall(ctx context.Context, dryRun bool) error {
	path := m.Path()
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(m.out, "The ompsync service is not installed: %s does not exist.\n", path)
		return nil
	} else if err != nil {
		return fmt.Errorf("stat service file: %w", err)
	}
	if m.systemd {
		// The file goes even when systemd cannot be told (no user
		// manager for this login): what cannot be done is said, and the
		// exit status says it.
		stopErr := m.apply(ctx, []action{m.systemctl("disable", "--now", UnitName)}, dryRun)
		if err := m.remove(dryRun); err != nil {
			return err
		}
		if stopErr != nil {
			fmt.Fprintln(m.out, "The ompsync service file is removed, but systemd could not be told: if it runs the agent now, the agent goes on until systemd stops.")
			return fmt.Errorf("the unit file is removed, but systemd could not disable and stop the service: %w", stopErr)
		}
		if err := m.apply(ctx, []action{m.systemctl("daemon-reload")}, dryRun); err != nil {
			return err
		}
	} else if err := m.apply(ctx, []action{m.bootout()}, dryRun); err != nil {
		return err
	} else if err := m.remove(dryRun); err != nil {
		return err
	}
	if !dryRun {
		fmt.Fprintln(m.out, "The ompsync service is removed.")
		if !m.systemd {
			fmt.Fprintf(m.out, "Its log stays at %s.\n", m.opts.LogPath())
		}
	}
	return nil
}

// Status reports whether the service is installed, enabled and running, and
// prints the end of its log.
func (m *Manager) Status(ctx context.Context) error {
	_, state, err := m.fileState()
	if err != nil {
		return err
	}
	path := m.Path()
	switch state {
	case absent:
		fmt.Fprintf(m.out, "Installed: no (%s does not exist)\nRun \"ompsync service install\" to install it.\n", path)
		return nil
	case same:
		fmt.Fprintf(m.out, "Installed: %s\n", path)
	case differs:
		fmt.Fprintf(m.out, "Installed: %s (differs from what \"ompsync service install\" would write now)\n", path)
	}

	if m.systemd {
		enabled, errEnabled := m.query(ctx, m.systemctl("is-enabled", UnitName).cmd)
		active, errActive := m.query(ctx, m.systemctl("is-active", UnitName).cmd)
		if problem := cmp.Or(errEnabled, errActive); problem != nil {
			// One question systemd could not answer makes the other's
			// answer (is-enabled reads files, and says "disabled"
			// without a manager) no answer either; and without an answer
			// nothing is known of the agent: a failure, not a status.
			fmt.Fprintf(m.out, "Enabled:   unknown\nActive:    unknown\n")
			return fmt.Errorf("cannot ask systemd about the service: %w", problem)
		}
		fmt.Fprintf(m.out, "Enabled:   %s\nActive:    %s\n", enabled, active)
		cmd := []string{"journalctl", "--user", "-u", UnitName, "-n", strconv.Itoa(logLines), "--no-pager"}
		fmt.Fprintf(m.out, "\n%s:\n", commandLine(cmd))
		out, err := m.run.Run(ctx, cmd[0], cmd[1:]...)
		m.out.Write(out)
		if err != nil {
			fmt.Fprintf(m.out, "(%s)\n", describe(out, err))
		}
		return nil
	}

	out, err := m.run.Run(ctx, "launchctl", "print", m.target())
	if err != nil {
		fmt.Fprintf(m.out, "Loaded:    no\n")
	} else {
		fmt.Fprintf(m.out, "Loaded:    yes\nState:     %s\n", launchdState(out))
	}
	logPath := m.opts.LogPath()
	fmt.Fprintf(m.out, "\nLast %d lines of %s:\n", logLines, logPath)
	tail, err := tailLines(logPath, logLines)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintln(m.out, "(no log yet)")
		return nil
	}
	if err != nil {
		return err
	}
	m.out.Write(tail)
	return nil
}

// query runs a read-only command and returns its one-line answer. systemctl
// is-enabled and is-active exit non-zero for "disabled" and "inactive", so
// the output, not the exit status, is the answer; but a systemctl that
// could not be run, or could not reach the user manager, gave none, and the
// error says so.
func (m *Manager) query(ctx context.Context, cmd []string) (string, error) {
	out, err := m.run.Run(ctx, cmd[0], cmd[1:]...)
	s := strings.TrimSpace(string(out))
	if err != nil && (errors.Is(err, exec.ErrNotFound) || noUserManager(s)) {
		return "unknown", m.commandError(commandLine(cmd), out, err)
	}
	if s != "" {
		return strings.ReplaceAll(s, "\n", "; "), nil
	}
	if err != nil {
		return "unknown (" + err.Error() + ")", nil
	}
	return "unknown", nil
}

// noUserManager reports whether systemctl's output says there is no
// systemd user manager to talk to.
func noUserManager(out string) bool {
	return strings.Contains(out, "Failed to connect to bus") || strings.Contains(out, "XDG_RUNTIME_DIR")
}

func (m *Manager) apply(ctx context.Context, acts []action, dryRun bool) error {
	for _, a := range acts {
		line := commandLine(a.cmd)
		if dryRun {
			fmt.Fprintf(m.out, "Would run: %s\n", line)
			continue
		}
		fmt.Fprintf(m.out, "Running: %s\n", line)
		out, err := m.run.Run(ctx, a.cmd[0], a.cmd[1:]...)
		if err != nil && a.tolerate != nil && a.tolerate(out, err) {
			continue
		}
		if err != nil {
			return m.commandError(line, out, err)
		}
		for l := range strings.FieldsFuncSeq(string(out), func(r rune) bool { return r == '\n' }) { // no empty lines
			fmt.Fprintf(m.out, "  %s\n", l)
		}
	}
	return nil
}

// write replaces the unit or plist with content, mode 0644 whatever the
// umask, so that a crash leaves the old file or the new one and never half
// of one.
func (m *Manager) write(content []byte, dryRun bool) error {
	path := m.Path()
	if dryRun {
		fmt.Fprintf(m.out, "Would write %s (mode 0644):\n%s", path, content)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create service folder: %w", err)
	}
	if err := atomicfile.Write(path, content, atomicfile.Options{Perm: 0o644}); err != nil {
		return fmt.Errorf("write service file: %w", err)
	}
	fmt.Fprintf(m.out, "Wrote %s\n", path)
	return nil
}

// remove removes the unit or plist.
func (m *Manager) remove(dryRun bool) error {
	path := m.Path()
	if dryRun {
		fmt.Fprintf(m.out, "Would remove %s\n", path)
		return nil
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove service file: %w", err)
	}
	fmt.Fprintf(m.out, "Removed %s\n", path)
	return nil
}

// commandError explains a failed command, with a hint for the failures a
// user can fix.
func (m *Manager) commandError(line string, out []byte, err error) error {
	msg := strings.TrimSpace(string(out))
	var hint string // on a line of its own
	switch {
	case errors.Is(err, exec.ErrNotFound) && m.systemd:
		hint = "\nthis system does not seem to run systemd; start \"ompsync agent\" from your own init system"
	case noUserManager(msg):
		hint = "\nthere is no systemd user manager for this login (common under su, sudo and in containers); " +
			"log in as the user, or have root run \"loginctl enable-linger USER\", then try again"
	}
	if msg != "" {
		err = fmt.Errorf("%w: %s", err, msg)
	}
	return fmt.Errorf("%s: %w%s", line, err, hint)
}

func (m *Manager) systemctl(args ...string) action {
	return run(append([]string{"systemctl", "--user"}, args...)...)
}

// domain is the launchd domain of the user's GUI login session.
func (m *Manager) domain() string { return "gui/" + strconv.Itoa(m.opts.UID) }

// target names the agent's job within the domain.
func (m *Manager) target() string { return m.domain() + "/" + Label }

// bootout unloads the job; a job that is not loaded is fine.
func (m *Manager) bootout() action {
	return action{
		cmd: []string{"launchctl", "bootout", m.target()},
		tolerate: func(out []byte, err error) bool {
			// launchctl says "No such process" (exit 3) or, on older
			// macOS, "Could not find specified service" (exit 113).
			var ee interface{ ExitCode() int }
			if errors.As(err, &ee) && (ee.ExitCode() == 3 || ee.ExitCode() == 113) {
				return true
			}
			s := string(out)
			return strings.Contains(s, "No such process") || strings.Contains(s, "Could not find specified service")
		},
	}
}

// loaded reports whether launchd has the job loaded.
func (m *Manager) loaded(ctx context.Context) bool {
	_, err := m.run.Run(ctx, "launchctl", "print", m.target())
	return err == nil
}

// launchdState picks the state, pid and last exit code out of
// `launchctl print` for the job. Its output is not a stable format, so only
// the first occurrence of each key (the job's own) is read.
func launchdState(out []byte) string {
	fields := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), " = ")
		if !ok {
			continue
		}
		if _, seen := fields[k]; !seen {
			fields[k] = v
		}
	}
	state := cmp.Or(fields["state"], "unknown")
	if pid := fields["pid"]; pid != "" {
		state += " (pid " + pid + ")"
	}
	if code := fields["last exit code"]; code != "" {
		state += ", last exit code " + code
	}
	return state
}

// describe is a one-line account of a failed command.
func describe(out []byte, err error) string {
	if s := strings.TrimSpace(string(out)); s != "" && !strings.Contains(s, "\n") {
		return s
	}
	return err.Error()
}

// tailLines returns the last n lines of the file at path, reading at most
// its last 64 KiB.
func tailLines(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read log: %w", err)
	}
	const window = 64 << 10
	off := max(fi.Size()-window, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read log: %w", err)
	}
	if off > 0 {
		// The window starts mid-line: drop the partial line.
		_, buf, _ = bytes.Cut(buf, []byte("\n"))
	}
	if len(buf) == 0 {
		return nil, nil
	}
	lines := bytes.Split(bytes.TrimSuffix(buf, []byte("\n")), []byte("\n"))
	return append(bytes.Join(lines[max(len(lines)-n, 0):], []byte("\n")), '\n'), nil
}

// commandLine shows a command as a user would type it into a shell.
func commandLine(cmd []string) string {
	words := make([]string, len(cmd))
	for i, w := range cmd {
		words[i] = shellWord(w)
	}
	return strings.Join(words, " ")
}

// shellWord single-quotes w for a POSIX shell when it needs quoting.
func shellWord(w string) string {
	if w != "" && strings.IndexFunc(w, func(r rune) bool { return !plainRune(r) }) < 0 {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
