package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeRunner records commands and answers them from replies, keyed by the
// command line; anything not in replies succeeds with no output.
type fakeRunner struct {
	calls   []string
	replies map[string]reply
}

type reply struct {
	out  string
	code int   // non-zero: the command fails with this exit code
	err  error // the command could not be started
}

type exitError int

func (e exitError) Error() string { return "exit status " + strconv.Itoa(int(e)) }
func (e exitError) ExitCode() int { return int(e) }

func (f *fakeRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	f.calls = append(f.calls, line)
	r := f.replies[line]
	switch {
	case r.err != nil:
		return nil, r.err
	case r.code != 0:
		return []byte(r.out), exitError(r.code)
	}
	return []byte(r.out), nil
}

// takeCalls returns the commands run since the last call.
func (f *fakeRunner) takeCalls() []string {
	c := f.calls
	f.calls = nil
	return c
}

func newManager(t *testing.T, goos string, o Options, r Runner) (*Manager, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	m, err := NewManager(goos, o, r, &out)
	if err != nil {
		t.Fatal(err)
	}
	return m, &out
}

func equalCalls(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands run:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func readGolden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// linuxUser is the plain options in a temporary home.
func linuxUser(t *testing.T) Options {
	o := plain
	o.Home = t.TempDir()
	o.UID = 1000
	o.User = "alice"
	return o
}

func TestInstallDryRunSystemd(t *testing.T) {
	o := linuxUser(t)
	r := &fakeRunner{}
	m, out := newManager(t, "linux", o, r)
	if err := m.Install(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	want := "Would write " + o.Home + "/.config/systemd/user/ompsync.service (mode 0644):\n" +
		readGolden(t, "unit_plain.golden") +
		"Would run: systemctl --user daemon-reload\n" +
		"Would run: systemctl --user enable --now ompsync.service\n"
	if out.String() != want {
		t.Errorf("dry run printed:\n%s\nwant:\n%s", out, want)
	}
	equalCalls(t, r.calls)
	if _, err := os.Stat(filepath.Join(o.Home, ".config")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dry run created %s/.config: %v", o.Home, err)
	}
}

func TestInstallSystemd(t *testing.T) {
	ctx := context.Background()
	o := linuxUser(t)
	r := &fakeRunner{}
	m, out := newManager(t, "linux", o, r)
	path := filepath.Join(o.Home, ".config", "systemd", "user", "ompsync.service")
	if m.Path() != path {
		t.Errorf("Path() = %s, want %s", m.Path(), path)
	}

	if err := m.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	equalCalls(t, r.takeCalls(), "systemctl --user daemon-reload", "systemctl --user enable --now ompsync.service")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != readGolden(t, "unit_plain.golden") {
		t.Errorf("installed unit:\n%s", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("unit mode: %v %v, want 0644", fi.Mode(), err)
	}
	if !strings.Contains(out.String(), "loginctl enable-linger alice\n") {
		t.Errorf("install does not mention linger:\n%s", out)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("unit folder holds %d entries, want only the unit", len(entries))
	}

	t.Run("identical", func(t *testing.T) {
		out.Reset()
		if err := m.Install(ctx, false); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.String(), path+" is already installed.\n") {
			t.Errorf("reinstall printed:\n%s", out)
		}
		equalCalls(t, r.takeCalls(), "systemctl --user enable --now ompsync.service")
	})

	t.Run("replaced", func(t *testing.T) {
		o2 := o
		o2.ConfigFile = filepath.Join(o.Home, "ompsync.toml")
		m2, out := newManager(t, "linux", o2, r)
		if err := m2.Install(ctx, false); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.String(), path+" exists with different content; it is replaced.\n") {
			t.Errorf("install over an old unit printed:\n%s", out)
		}
		equalCalls(t, r.takeCalls(),
			"systemctl --user daemon-reload",
			"systemctl --user enable ompsync.service",
			"systemctl --user restart ompsync.service")
		got, _ := os.ReadFile(path)
		if want := "ExecStart=/home/alice/go/bin/ompsync agent --config " + o2.ConfigFile; line(t, got, "ExecStart") != want {
			t.Errorf("replaced unit has %s, want %s", line(t, got, "ExecStart"), want)
		}
	})
}

func TestUninstallSystemd(t *testing.T) {
	ctx := context.Background()
	o := linuxUser(t)
	r := &fakeRunner{}
	m, out := newManager(t, "linux", o, r)
	if err := m.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	r.takeCalls()

	out.Reset()
	if err := m.Uninstall(ctx, true); err != nil {
		t.Fatal(err)
	}
	want := "Would run: systemctl --user disable --now ompsync.service\n" +
		"Would remove " + m.Path() + "\n" +
		"Would run: systemctl --user daemon-reload\n"
	if out.String() != want {
		t.Errorf("dry run printed:\n%s\nwant:\n%s", out, want)
	}
	equalCalls(t, r.takeCalls())
	if _, err := os.Stat(m.Path()); err != nil {
		t.Fatalf("dry run removed the unit: %v", err)
	}

	if err := m.Uninstall(ctx, false); err != nil {
		t.Fatal(err)
	}
	equalCalls(t, r.takeCalls(), "systemctl --user disable --now ompsync.service", "systemctl --user daemon-reload")
	if _, err := os.Stat(m.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unit still there after uninstall: %v", err)
	}

	out.Reset()
	if err := m.Uninstall(ctx, false); err != nil {
		t.Fatalf("uninstall when not installed: %v", err)
	}
	if want := "The ompsync service is not installed: " + m.Path() + " does not exist.\n"; out.String() != want {
		t.Errorf("got %q, want %q", out, want)
	}
	equalCalls(t, r.takeCalls())
}

func TestSystemctlErrors(t *testing.T) {
	reload := "systemctl --user daemon-reload"
	for name, tc := range map[string]struct {
		reply reply
		want  []string
	}{
		"no user bus": {
			reply{out: "Failed to connect to bus: No medium found\n", code: 1},
			[]string{reload + ": exit status 1: Failed to connect to bus: No medium found", "loginctl enable-linger"},
		},
		"no systemd": {
			reply{err: &exec.Error{Name: "systemctl", Err: exec.ErrNotFound}},
			[]string{"does not seem to run systemd"},
		},
		"other": {
			reply{out: "Failed to reload daemon: Access denied\n", code: 1},
			[]string{reload + ": exit status 1: Failed to reload daemon: Access denied"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := &fakeRunner{replies: map[string]reply{reload: tc.reply}}
			m, _ := newManager(t, "linux", linuxUser(t), r)
			err := m.Install(context.Background(), false)
			if err == nil {
				t.Fatal("install succeeded")
			}
			equalCalls(t, r.calls, reload)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestStatusSystemd(t *testing.T) {
	ctx := context.Background()
	o := linuxUser(t)
	journal := "journalctl --user -u ompsync.service -n 20 --no-pager"
	r := &fakeRunner{replies: map[string]reply{
		"systemctl --user is-enabled ompsync.service": {out: "enabled\n"},
		"systemctl --user is-active ompsync.service":  {out: "failed\n", code: 3},
		journal: {out: "Nov 30 05:30:00 host ompsync[42]: level=ERROR msg=\"upload failed\"\n"},
	}}
	m, out := newManager(t, "linux", o, r)

	if err := m.Status(ctx); err != nil {
		t.Fatal(err)
	}
	want := "Installed: no (" + m.Path() + " does not exist)\nRun \"ompsync service install\" to install it.\n"
	if out.String() != want {
		t.Errorf("status printed:\n%s\nwant:\n%s", out, want)
	}
	equalCalls(t, r.takeCalls())

	if err := m.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	r.takeCalls()
	out.Reset()
	if err := m.Status(ctx); err != nil {
		t.Fatal(err)
	}
	want = "Installed: " + m.Path() + "\n" +
		"Enabled:   enabled\n" +
		"Active:    failed\n" +
		"\n" + journal + ":\n" +
		"Nov 30 05:30:00 host ompsync[42]: level=ERROR msg=\"upload failed\"\n"
	if out.String() != want {
		t.Errorf("status printed:\n%s\nwant:\n%s", out, want)
	}
	equalCalls(t, r.takeCalls(),
		"systemctl --user is-enabled ompsync.service",
		"systemctl --user is-active ompsync.service",
		journal)

	// A unit written by an older install, or edited by hand, is flagged.
	if err := os.WriteFile(m.Path(), []byte("[Service]\nExecStart=/old/ompsync agent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := m.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(out.String(), "\n"); !strings.HasSuffix(first, "(differs from what \"ompsync service install\" would write now)") {
		t.Errorf("status of a stale unit begins %q", first)
	}

	// No user manager (a login without one): is-enabled still reads the
	// files and says "disabled", which nothing then knows; both unknown.
	r.replies["systemctl --user is-enabled ompsync.service"] = reply{out: "disabled\n", code: 1}
	r.replies["systemctl --user is-active ompsync.service"] = reply{out: "Failed to connect to bus: No medium found\n", code: 1}
	out.Reset()
	err := m.Status(ctx)
	if err == nil || !strings.Contains(err.Error(), "cannot ask systemd") || !strings.Contains(out.String(), "Enabled:   unknown\nActive:    unknown\n") {
		t.Errorf("status without a user manager: %v\n%s", err, out)
	}
}

func macUser(t *testing.T) Options {
	o := tricky
	o.Home = filepath.Join(t.TempDir(), "Al Smith")
	o.UID = 501
	o.User = "al"
	return o
}

func TestInstallDryRunLaunchd(t *testing.T) {
	o := macUser(t)
	r := &fakeRunner{}
	m, out := newManager(t, "darwin", o, r)
	plistFile := o.Home + "/Library/LaunchAgents/io.github.ompsync.agent.plist"
	if err := m.Install(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	content, err := Plist(o)
	if err != nil {
		t.Fatal(err)
	}
	want := "Would write " + plistFile + " (mode 0644):\n" + string(content) +
		"Would run: launchctl bootout gui/501/io.github.ompsync.agent\n" +
		"Would run: launchctl enable gui/501/io.github.ompsync.agent\n" +
		"Would run: launchctl bootstrap gui/501 '" + plistFile + "'\n"
	if out.String() != want {
		t.Errorf("dry run printed:\n%s\nwant:\n%s", out, want)
	}
	equalCalls(t, r.calls)
	if _, err := os.Stat(filepath.Join(o.Home, "Library")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dry run created %s/Library: %v", o.Home, err)
	}
}

func TestInstallLaunchd(t *testing.T) {
	ctx := context.Background()
	o := macUser(t)
	target := "gui/501/io.github.ompsync.agent"
	r := &fakeRunner{replies: map[string]reply{
		"launchctl bootout " + target: {out: "Boot-out failed: 3: No such process\n", code: 3},
		"launchctl print " + target:   {out: "Bad request.\nCould not find service \"io.github.ompsync.agent\" in domain for user gui: 501\n", code: 113},
	}}
	m, out := newManager(t, "darwin", o, r)
	plistFile := filepath.Join(o.Home, "Library", "LaunchAgents", "io.github.ompsync.agent.plist")
	if m.Path() != plistFile {
		t.Errorf("Path() = %s, want %s", m.Path(), plistFile)
	}

	if err := m.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	equalCalls(t, r.takeCalls(),
		"launchctl bootout "+target,
		"launchctl enable "+target,
		"launchctl bootstrap gui/501 "+plistFile)
	got, err := os.ReadFile(plistFile)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := Plist(o); !bytes.Equal(got, want) {
		t.Errorf("installed plist:\n%s", got)
	}
	if !strings.Contains(out.String(), "tail -f '"+o.LogPath()+"'\n") {
		t.Errorf("install does not say where the log is:\n%s", out)
	}

	// Same plist, not loaded (say after a bootout by hand): load it.
	out.Reset()
	if err := m.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	equalCalls(t, r.takeCalls(), "launchctl print "+target, "launchctl enable "+target, "launchctl bootstrap gui/501 "+plistFile)

	// Same plist, loaded: nothing to do.
	delete(r.replies, "launchctl print "+target)
	out.Reset()
	if err := m.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	equalCalls(t, r.takeCalls(), "launchctl print "+target)
	if !strings.HasPrefix(out.String(), plistFile+" is already installed.\nio.github.ompsync.agent is loaded.\n") {
		t.Errorf("reinstall printed:\n%s", out)
	}

	// A bootout failure other than "not loaded" stops the install.
	r.replies["launchctl bootout "+target] = reply{out: "Boot-out failed: 5: Input/output error\n", code: 5}
	o2 := o
	o2.ConfigFile = ""
	m2, _ := newManager(t, "darwin", o2, r)
	err = m2.Install(ctx, false)
	if err == nil || !strings.Contains(err.Error(), "launchctl bootout "+target+": exit status 5: Boot-out failed: 5: Input/output error") {
		t.Errorf("install with a failing bootout: %v", err)
	}
	equalCalls(t, r.takeCalls(), "launchctl bootout "+target)
}

func TestUninstallLaunchd(t *testing.T) {
	ctx := context.Background()
	o := macUser(t)
	r := &fakeRunner{}
	m, out := newManager(t, "darwin", o, r)
	if err := m.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	r.takeCalls()
	if err := m.Uninstall(ctx, false); err != nil {
		t.Fatal(err)
	}
	equalCalls(t, r.takeCalls(), "launchctl bootout gui/501/io.github.ompsync.agent")
	if _, err := os.Stat(m.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("plist still there after uninstall: %v", err)
	}
	if !strings.HasSuffix(out.String(), "The ompsync service is removed.\nIts log stays at "+o.LogPath()+".\n") {
		t.Errorf("uninstall printed:\n%s", out)
	}
}

func TestStatusLaunchd(t *testing.T) {
	ctx := context.Background()
	o := macUser(t)
	print := "launchctl print gui/501/io.github.ompsync.agent"
	r := &fakeRunner{replies: map[string]reply{print: {out: `gui/501/io.github.ompsync.agent = {
	active count = 1
	path = /Users/al/Library/LaunchAgents/io.github.ompsync.agent.plist
	state = running

	program = /usr/local/bin/ompsync
	pid = 4242
	last exit code = (never exited)

	endpoints = {
		state = active
	}
}
`}}}
	m, out := newManager(t, "darwin", o, r)
	if err := m.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(o.LogPath()), 0o755); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	for i := 1; i <= 25; i++ {
		fmt.Fprintf(&log, "line %d\n", i)
	}
	if err := os.WriteFile(o.LogPath(), []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r.takeCalls()
	out.Reset()
	if err := m.Status(ctx); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	fmt.Fprintf(&want, "Installed: %s\nLoaded:    yes\nState:     running (pid 4242), last exit code (never exited)\n\nLast 20 lines of %s:\n", m.Path(), o.LogPath())
	for i := 6; i <= 25; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if out.String() != want.String() {
		t.Errorf("status printed:\n%s\nwant:\n%s", out, want.String())
	}
	equalCalls(t, r.takeCalls(), print)
}

func TestUnsupportedOS(t *testing.T) {
	_, err := NewManager("plan9", plain, &fakeRunner{}, &bytes.Buffer{})
	if !errors.Is(err, ErrUnsupported) || !strings.HasPrefix(err.Error(), "plan9: ") {
		t.Errorf("NewManager(plan9) error = %v", err)
	}
}

// On Windows, install says what to run instead: the Task Scheduler command
// for the binary and config file in use, paths with spaces quoted as
// schtasks wants them inside /TR, on one line.
func TestWindowsScheduledTask(t *testing.T) {
	o := Options{Binary: `C:\Program Files\ompsync\ompsync.exe`, ConfigFile: `C:\Users\Ann Lee\ompsync.yaml`, Home: `C:\Users\Ann Lee`}
	want := `schtasks /Create /TN ompsync /SC ONLOGON /RL LIMITED /F /TR "\"C:\Program Files\ompsync\ompsync.exe\" agent --config \"C:\Users\Ann Lee\ompsync.yaml\""`
	if got := ScheduledTaskCommand(o); got != want {
		t.Errorf("ScheduledTaskCommand =\n%s\nwant\n%s", got, want)
	}
	o.ConfigFile = ""
	if got, want := ScheduledTaskCommand(o), `schtasks /Create /TN ompsync /SC ONLOGON /RL LIMITED /F /TR "\"C:\Program Files\ompsync\ompsync.exe\" agent"`; got != want {
		t.Errorf("without a config file: %s\nwant %s", got, want)
	}
	_, err := NewManager("windows", o, &fakeRunner{}, &bytes.Buffer{})
	if !errors.Is(err, ErrUnsupported) || !strings.HasSuffix(err.Error(), ScheduledTaskCommand(o)) || strings.Contains(err.Error(), "\n") {
		t.Errorf("NewManager(windows) error = %v; want one line ending with the schtasks command", err)
	}
}

func TestTailLines(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "log")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	long := strings.Repeat("x", 70<<10)
	for name, tc := range map[string]struct{ in, want string }{
		"empty":             {"", ""},
		"fewer":             {"a\nb\n", "a\nb\n"},
		"no final newline":  {"a\nb\nc", "b\nc\n"},
		"more":              {"a\nb\nc\nd\n", "c\nd\n"},
		"partial line drop": {long + "\nlast\n", "last\n"},
		"one huge line":     {long + "\n", ""},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := tailLines(write(tc.in), 2)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
