package service

import (
	"bytes"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"howett.net/plist"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden and the files in deploy/")

// Options for the files shipped in deploy/: a packaged binary, and a
// placeholder home that the plist's comment tells the user to fix.
var (
	shippedSystemd = Options{Binary: "/usr/bin/ompsync"}
	shippedLaunchd = Options{Binary: "/usr/local/bin/ompsync", Home: "/Users/USERNAME"}
)

// A home, binary and config file with every character the escaping must get
// right: spaces, systemd specifiers and variables, quotes, backslash, XML.
var tricky = Options{
	Binary:     "/home/Al Smith/100% $ure/bin/ompsync",
	ConfigFile: `/home/Al Smith/$HOME "q" \b & <x>'s.toml`,
	Home:       "/Users/Al Smith & <Co>",
}

var plain = Options{
	Binary: "/home/alice/go/bin/ompsync",
	Home:   "/home/alice",
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./service -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the templates in service/templates render; "+
			"edit the template, not this file, then run go test ./service -update to rewrite it. Rendered:\n%s", path, got)
	}
}

func mustUnit(t *testing.T, o Options) []byte {
	t.Helper()
	b, err := Unit(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustPlist(t *testing.T, o Options) []byte {
	t.Helper()
	b, err := Plist(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// line returns the one line of unit that starts with key=.
func line(t *testing.T, unit []byte, key string) string {
	t.Helper()
	var found []string
	for _, l := range strings.Split(string(unit), "\n") {
		if strings.HasPrefix(l, key+"=") {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s= line, got %q", key, found)
	}
	return found[0]
}

func TestUnitGolden(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      Options
		execStart string
	}{
		{"plain", plain, `ExecStart=/home/alice/go/bin/ompsync agent`},
		{"config", Options{Binary: "/usr/bin/ompsync", ConfigFile: "/etc/ompsync/alice.toml"},
			`ExecStart=/usr/bin/ompsync agent --config /etc/ompsync/alice.toml`},
		{"escaped", tricky,
			`ExecStart="/home/Al Smith/100%% $ure/bin/ompsync" agent --config "/home/Al Smith/$$HOME \"q\" \\b & <x>'s.toml"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			unit := mustUnit(t, tc.opts)
			if got := line(t, unit, "ExecStart"); got != tc.execStart {
				t.Errorf("got  %s\nwant %s", got, tc.execStart)
			}
			golden(t, filepath.Join("testdata", "unit_"+tc.name+".golden"), unit)
		})
	}
}

func TestUnitSettings(t *testing.T) {
	unit := mustUnit(t, plain)
	for key, want := range map[string]string{
		"Type":            "notify",
		"ExecReload":      "/bin/kill -HUP $MAINPID",
		"Restart":         "on-failure",
		"RestartSec":      "5",
		"TimeoutStopSec":  "30",
		"KillSignal":      "SIGTERM",
		"NoNewPrivileges": "yes",
		"WantedBy":        "default.target",
	} {
		if got := line(t, unit, key); got != key+"="+want {
			t.Errorf("got %s, want %s=%s", got, key, want)
		}
	}
	// A user manager cannot set up the mount namespace these need.
	for _, key := range []string{"User", "PrivateTmp", "ProtectSystem"} {
		if bytes.Contains(unit, []byte("\n"+key+"=")) {
			t.Errorf("user unit sets %s=", key)
		}
	}

	sys, err := SystemUnit(shippedSystemd)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"User":       "%i",
		"PrivateTmp": "yes",
		"Type":       "notify",
		"WantedBy":   "multi-user.target",
	} {
		if got := line(t, sys, key); got != key+"="+want {
			t.Errorf("system unit: got %s, want %s=%s", got, key, want)
		}
	}
}

func TestExecWord(t *testing.T) {
	for _, tc := range []struct {
		in   string
		arg  bool
		want string
	}{
		{"/usr/bin/ompsync", false, "/usr/bin/ompsync"},
		{"--config", true, "--config"},
		{"", true, `""`},
		{"/a b", false, `"/a b"`},
		{"/a b", true, `"/a b"`},
		{"100%", true, "100%%"},
		{"/100%/ompsync", false, "/100%%/ompsync"},
		{"$HOME", true, "$$HOME"},
		{"/$HOME/ompsync", false, `"/$HOME/ompsync"`},
		{`a"b`, true, `"a\"b"`},
		{`a\b`, true, `"a\\b"`},
		{"it's", true, `"it's"`},
		{";", true, `";"`},
		{"/home/zoë/ompsync", false, `"/home/zoë/ompsync"`},
	} {
		if got := execWord(tc.in, tc.arg); got != tc.want {
			t.Errorf("execWord(%q, %v) = %s, want %s", tc.in, tc.arg, got, tc.want)
		}
	}
}

func TestRejectsWhatCannotBeWritten(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Binary: "ompsync", Home: "/h"}, "not absolute"},
		{Options{Binary: "/bin/ompsync", ConfigFile: "ompsync.toml", Home: "/h"}, "not absolute"},
		{Options{Binary: "/bin/omp\nsync", Home: "/h"}, "control character"},
		{Options{Binary: "/bin/omp\xffsync", Home: "/h"}, "not valid UTF-8"},
	} {
		for name, render := range map[string]func(Options) ([]byte, error){"Unit": Unit, "Plist": Plist} {
			_, err := render(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s(%+v) error = %v, want %q", name, tc.opts, err, tc.want)
			}
		}
	}
	if _, err := Unit(Options{Binary: `/home/o'brien/ompsync`}); err == nil || !strings.Contains(err.Error(), "quotes") {
		t.Errorf("Unit with a quote in the binary path: error = %v", err)
	}
	if _, err := Plist(Options{Binary: `/home/o'brien/ompsync`, Home: "/h"}); err != nil {
		t.Errorf("Plist with a quote in the binary path: %v", err)
	}
	if _, err := Plist(Options{Binary: "/bin/ompsync"}); err == nil || !strings.Contains(err.Error(), "home") {
		t.Errorf("Plist without a home: error = %v", err)
	}
}

func TestPlistGolden(t *testing.T) {
	for name, o := range map[string]Options{"plain": plain, "escaped": tricky} {
		t.Run(name, func(t *testing.T) {
			golden(t, filepath.Join("testdata", "plist_"+name+".golden"), mustPlist(t, o))
		})
	}
}

// agentPlist is the part of the plist launchd acts on.
type agentPlist struct {
	Label             string
	ProgramArguments  []string
	RunAtLoad         bool
	KeepAlive         map[string]bool
	ThrottleInterval  int
	ExitTimeOut       int
	ProcessType       string
	Umask             int
	StandardOutPath   string
	StandardErrorPath string
}

func TestPlistParses(t *testing.T) {
	for name, tc := range map[string]struct {
		opts Options
		args []string
		log  string
	}{
		"plain": {plain, []string{"/home/alice/go/bin/ompsync", "agent"}, "/home/alice/Library/Logs/ompsync.log"},
		"escaped": {tricky,
			[]string{tricky.Binary, "agent", "--config", tricky.ConfigFile},
			"/Users/Al Smith & <Co>/Library/Logs/ompsync.log"},
	} {
		t.Run(name, func(t *testing.T) {
			b := mustPlist(t, tc.opts)
			var got agentPlist
			format, err := plist.Unmarshal(b, &got)
			if err != nil {
				t.Fatal(err)
			}
			if format != plist.XMLFormat {
				t.Errorf("format %d, want XML", format)
			}
			want := agentPlist{
				Label:             "io.github.ompsync.agent",
				ProgramArguments:  tc.args,
				RunAtLoad:         true,
				KeepAlive:         map[string]bool{"SuccessfulExit": false},
				ThrottleInterval:  5,
				ExitTimeOut:       30,
				ProcessType:       "Background",
				Umask:             0o077,
				StandardOutPath:   tc.log,
				StandardErrorPath: tc.log,
			}
			if !equalPlist(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			// howett.net/plist is lenient; a strict XML parser also rejects
			// what launchd would, such as "--" inside a comment.
			d := xml.NewDecoder(bytes.NewReader(b))
			d.Strict = true
			for {
				if _, err := d.Token(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("not well-formed XML: %v", err)
				}
			}
		})
	}
}

func equalPlist(a, b agentPlist) bool {
	if strings.Join(a.ProgramArguments, "\x00") != strings.Join(b.ProgramArguments, "\x00") ||
		len(a.KeepAlive) != len(b.KeepAlive) {
		return false
	}
	for k, v := range b.KeepAlive {
		if w, ok := a.KeepAlive[k]; !ok || w != v {
			return false
		}
	}
	a.ProgramArguments, b.ProgramArguments, a.KeepAlive, b.KeepAlive = nil, nil, nil, nil
	return a.Label == b.Label && a.RunAtLoad == b.RunAtLoad && a.ThrottleInterval == b.ThrottleInterval &&
		a.ExitTimeOut == b.ExitTimeOut && a.ProcessType == b.ProcessType && a.Umask == b.Umask &&
		a.StandardOutPath == b.StandardOutPath && a.StandardErrorPath == b.StandardErrorPath
}

// The files in deploy/ are what packagers ship; they must be what the
// templates render, so that the two never drift apart.
func TestShippedFiles(t *testing.T) {
	unit := mustUnit(t, shippedSystemd)
	sys, err := SystemUnit(shippedSystemd)
	if err != nil {
		t.Fatal(err)
	}
	deploy := filepath.Join("..", "deploy")
	golden(t, filepath.Join(deploy, "systemd", "ompsync.service"), unit)
	golden(t, filepath.Join(deploy, "systemd", "ompsync@.service"), sys)
	golden(t, filepath.Join(deploy, "launchd", Label+".plist"), mustPlist(t, shippedLaunchd))
}

// systemdAnalyze returns the path of systemd-analyze, skipping the test where
// it is missing, except in CI, which installs it.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze not found; CI must install the systemd package")
		}
		t.Skip("systemd-analyze not found (apt-get install systemd); not verifying units")
	}
	return p
}

// verify runs systemd-analyze verify on unit, written to dir as name. It
// passes only when systemd prints nothing: unknown keys and bad values are
// warnings that leave the exit status 0.
func verify(t *testing.T, analyze, dir, name string, unit []byte, user bool) (string, error) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"verify"}
	if user {
		args = append(args, "--user")
	}
	cmd := exec.Command(analyze, append(args, path)...)
	// A user manager needs a runtime dir, which root in a container lacks;
	// a private home keeps the real user's units out of the check.
	runtime := t.TempDir()
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtime, "HOME="+dir, "SYSTEMD_LOG_COLOR=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze := systemdAnalyze(t)
	// systemd checks that ExecStart names an executable, so a binary in a
	// folder whose name needs escaping proves the quoting round-trips.
	// (Quotes and backslashes systemd refuses in an executable path.)
	dir := t.TempDir()
	binDir := filepath.Join(dir, `bin 100% $HOME`)
	if err := os.Mkdir(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "ompsync")
	trueBin, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, trueBin, 0o755); err != nil {
		t.Fatal(err)
	}
	o := Options{Binary: bin, ConfigFile: filepath.Join(binDir, `config 50% "q" \b it's.toml`)}

	t.Run("user unit", func(t *testing.T) {
		out, err := verify(t, analyze, dir, UnitName, mustUnit(t, o), true)
		if err != nil || out != "" {
			t.Fatalf("systemd-analyze verify --user: %v\n%s", err, out)
		}
	})
	t.Run("system unit", func(t *testing.T) {
		sys, err := SystemUnit(o)
		if err != nil {
			t.Fatal(err)
		}
		// A template is verified through an instance; root always exists.
		out, err := verify(t, analyze, dir, "ompsync@root.service", sys, false)
		if err != nil || out != "" {
			t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
		}
	})
	t.Run("missing binary fails", func(t *testing.T) {
		// The check above means something only if verify looks at the path.
		missing := o
		missing.Binary = filepath.Join(binDir, "nope")
		out, err := verify(t, analyze, dir, UnitName, mustUnit(t, missing), true)
		if err == nil || !strings.Contains(out, "nope") {
			t.Fatalf("verify accepted a unit whose binary does not exist: %v\n%s", err, out)
		}
	})
}

// SystemUnit renders the system-wide instance unit (ompsync@.service, in
// deploy/), which runs the agent as the user named by the instance.
func SystemUnit(o Options) ([]byte, error) {
	return renderUnit(o, true)
}
