package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ompsync/ompsync/config"
)

// testEnv is a fake environment; tests never touch the process's own.
type testEnv map[string]string

func (e testEnv) lookup(k string) (string, bool) { v, ok := e[k]; return v, ok }

// environ is e as os.Environ gives the environment.
func (e testEnv) environ() []string {
	out := make([]string, 0, len(e))
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

func newEnv(t *testing.T) (testEnv, string) {
	t.Helper()
	home := t.TempDir()
	return testEnv{"HOME": home}, home
}

type result struct {
	code           int
	stdout, stderr string
}

func runWith(t *testing.T, env testEnv, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb, env.environ())
	return result{code, out.String(), errb.String()}
}

func writeFile(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// oneErrorLine checks that stderr is exactly one "ompsync: " line.
func oneErrorLine(t *testing.T, r result) string {
	t.Helper()
	if !strings.HasPrefix(r.stderr, "ompsync: ") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr is not one 'ompsync: ' line: %q", r.stderr)
	}
	return r.stderr
}

func TestVersion(t *testing.T) {
	env, _ := newEnv(t)
	r := runWith(t, env, "version")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("version: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"ompsync ", "commit:", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("version output lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := runWith(t, env, "--version"); r.code != 0 || !strings.HasPrefix(r.stdout, "ompsync ") {
		t.Errorf("--version: exit %d, %q", r.code, r.stdout)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"bogus"}, []string{`unknown command "bogus"`, "see 'ompsync --help'"}},
		{[]string{"conifg"}, []string{`did you mean "config"?`}},
		{[]string{"--bogus"}, []string{"unknown flag: --bogus", "see 'ompsync --help'"}},
		{[]string{"config", "bogus"}, []string{`unknown command "bogus"`, "see 'ompsync config --help'"}},
		{[]string{"config", "show", "extra"}, []string{`"extra"`, "see 'ompsync config show --help'"}},
		{[]string{"version", "now"}, []string{"see 'ompsync version --help'"}},
		{[]string{"config", "show", "--config"}, []string{"flag needs an argument", "--config"}},
		{[]string{"config", "init", "--force=maybe"}, []string{"--force", "see 'ompsync config init --help'"}},
		{[]string{"--log-level", "loud", "config", "show"}, []string{"log.level (flag --log-level)", "debug, info, warn, error", "see 'ompsync config show --help'"}},
		{[]string{"config", "show", "--remote", "ftp://host/x"}, []string{"remote (flag --remote)", "s3://bucket"}},
		{[]string{"config", "show", "--machine", "a b"}, []string{"machine (flag --machine)"}},
		{[]string{"restore", ""}, []string{"empty session id prefix", "see 'ompsync ls'", "see 'ompsync restore --help'"}},
		{[]string{"verify", "01a1", " "}, []string{"empty session id prefix", "see 'ompsync verify --help'"}},
		{[]string{"history", ""}, []string{"empty session id prefix", "see 'ompsync history --help'"}},
		{[]string{"cat", ""}, []string{"empty session id prefix", "see 'ompsync cat --help'"}},
		// Before the command, --machine names this machine; restore's own
		// picks a machine's copies, which cobra would take it for.
		{[]string{"--machine", "desk", "restore", "--all"}, []string{`--machine before "restore" names this machine`, `put it after "restore"`}},
		{[]string{"--remote", "file:///x", "--machine=desk", "ls"}, []string{`--machine before "ls"`}},
		// An unknown command asked for help is still unknown.
		{[]string{"serve", "--help"}, []string{`unknown command "serve"`, "see 'ompsync --help'"}},
		{[]string{"--remote", "file:///x", "resotre", "-h"}, []string{`unknown command "resotre"`, `did you mean "restore"?`}},
		{[]string{"service", "bogus", "--help"}, []string{`unknown command "bogus"`, "see 'ompsync service --help'"}},
		// Wrong arguments: what the command takes, from its Use line.
		{[]string{"cat"}, []string{"ompsync cat takes ID-PREFIX, got none (ID-PREFIX: the first characters of a session id, as 'ompsync ls' shows them)"}},
		{[]string{"history", "a", "b"}, []string{`ompsync history takes ID-PREFIX, got ["a" "b"] (ID-PREFIX:`}},
		{[]string{"grep"}, []string{"ompsync grep takes PATTERN [ID-PREFIX...], got none (PATTERN: the text to search for; ID-PREFIX:"}},
		{[]string{"ls", "extra"}, []string{`ompsync ls takes no arguments, got ["extra"]; see 'ompsync ls --help'`}},
		// -v is not verbose (it is --version alone): the log level is.
		{[]string{"agent", "-v"}, []string{"ompsync: unknown shorthand flag: 'v' in -v; for more output use --log-level debug; see 'ompsync agent --help'"}},
		{[]string{"ls", "--verbose"}, []string{"ompsync: unknown flag: --verbose; for more output use --log-level debug; see 'ompsync ls --help'"}},
		// cobra's own commands too: no help and exit 0 for what is not there.
		{[]string{"completion", "tcsh"}, []string{`unknown command "tcsh" for "ompsync completion"`, "see 'ompsync completion --help'"}},
		{[]string{"help", "bogus"}, []string{`unknown command "bogus" for "ompsync"`, "see 'ompsync --help'"}},
		{[]string{"help", "service", "bogus"}, []string{`unknown command "bogus" for "ompsync service"`, "see 'ompsync service --help'"}},
	}
	for _, tt := range tests {
		env, _ := newEnv(t)
		r := runWith(t, env, tt.args...)
		if r.code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", tt.args, r.code, r.stderr)
			continue
		}
		msg := oneErrorLine(t, r)
		for _, w := range tt.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%q: stderr %q lacks %q", tt.args, msg, w)
			}
		}
	}
}

func TestFailures(t *testing.T) {
	_, home := newEnv(t)
	// An agent folder to back up, so that a run that is not refused would
	// write the default remote.
	if err := os.MkdirAll(filepath.Join(home, ".omp", "agent", "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(home, "bad.yaml")
	writeFile(t, bad, "remote: s3://bucket\nbukcet: x\n", 0o600)
	tests := []struct {
		env  testEnv
		args []string
		want string
	}{
		{testEnv{"OMPSYNC_INTERVAL": "soon"}, []string{"config", "show"}, `interval (env OMPSYNC_INTERVAL): "soon" is not a duration`},
		{nil, []string{"--config", filepath.Join(home, "missing.yaml"), "config", "show"}, "missing.yaml does not exist"},
		{testEnv{"OMPSYNC_CONFIG": filepath.Join(home, "missing.yaml")}, []string{"config", "show"}, "missing.yaml does not exist"},
		{nil, []string{"config", "show", "--config", bad}, `unknown key "bukcet"`},
		// A misspelt variable would send the backup to the default remote.
		{testEnv{"OMPSYNC_REMOT": "s3://bucket/omp"}, []string{"agent", "--once"}, "OMPSYNC_REMOT is set, but no setting has that name (did you mean OMPSYNC_REMOTE?)"},
	}
	for _, tt := range tests {
		e := testEnv{"HOME": home}
		for k, v := range tt.env {
			e[k] = v
		}
		r := runWith(t, e, tt.args...)
		if r.code != 1 {
			t.Errorf("%q: exit %d, want 1 (stderr %q)", tt.args, r.code, r.stderr)
			continue
		}
		if msg := oneErrorLine(t, r); !strings.Contains(msg, tt.want) {
			t.Errorf("%q: stderr %q lacks %q", tt.args, msg, tt.want)
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".local")); !os.IsNotExist(err) {
		t.Errorf("a refused run made the default remote or state: %v", err)
	}
}

const (
	testSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	testKeyID  = "AKIAIOSFODNN7EXAMPLE"
)

type shown struct {
	File     string `json:"file"`
	Settings []struct {
		Key    string `json:"key"`
		Env    string `json:"env"`
		Value  any    `json:"value"`
		Source string `json:"source"`
		From   string `json:"from"`
	} `json:"settings"`
}

func (s shown) get(t *testing.T, key string) (value any, source, from string) {
	t.Helper()
	for _, x := range s.Settings {
		if x.Key == key {
			return x.Value, x.Source, x.From
		}
	}
	t.Fatalf("config show --json has no %s", key)
	return nil, "", ""
}

func showJSONOutput(t *testing.T, env testEnv, args ...string) shown {
	t.Helper()
	r := runWith(t, env, args...)
	if r.code != 0 {
		t.Fatalf("%q: exit %d, stderr %q", args, r.code, r.stderr)
	}
	var s shown
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("%q: not JSON: %v\n%s", args, err, r.stdout)
	}
	return s
}

func TestConfigShow(t *testing.T) {
	env, home := newEnv(t)
	cfgFile := filepath.Join(home, "ompsync.yaml")
	writeFile(t, cfgFile, "log:\n  level: debug\ns3:\n  secret_access_key: "+testSecret+"\n", 0o600)
	env["OMPSYNC_CONFIG"] = cfgFile
	env["OMPSYNC_REMOTE"] = "s3://env-bucket/p"
	env["OMPSYNC_S3_ACCESS_KEY_ID"] = testKeyID
	env["OMPSYNC_EXCLUDE"] = "a/*,b/*"

	r := runWith(t, env, "config", "show", "--machine", "flag-machine")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, testSecret) || strings.Contains(r.stdout, testKeyID) {
		t.Fatalf("config show printed a secret:\n%s", r.stdout)
	}
	lines := map[string][]string{}
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines[f[0]] = f
		}
	}
	want := map[string]string{
		"machine":              "flag-machine flag --machine",
		"remote":               "s3://env-bucket/p env OMPSYNC_REMOTE",
		"exclude":              "a/*,b/* env OMPSYNC_EXCLUDE",
		"log.level":            "debug file " + cfgFile + ":2",
		"s3.secret_access_key": "<redacted> file " + cfgFile + ":4",
		"s3.access_key_id":     "AKIA<redacted> env OMPSYNC_S3_ACCESS_KEY_ID",
		"log.format":           "text default",
		"interval":             "2s default",
		"reconcile_interval":   "1m default",
	}
	for key, w := range want {
		if got := strings.Join(lines[key][1:], " "); got != w {
			t.Errorf("%s line: %q, want %q", key, got, w)
		}
	}
	if !strings.Contains(r.stdout, "# config file: "+cfgFile) {
		t.Errorf("output does not name the config file:\n%s", r.stdout)
	}

	r = runWith(t, env, "config", "show", "--json", "--machine", "flag-machine")
	if strings.Contains(r.stdout, testSecret) || strings.Contains(r.stdout, testKeyID) {
		t.Fatalf("config show --json printed a secret:\n%s", r.stdout)
	}
	s := showJSONOutput(t, env, "config", "show", "--json", "--machine", "flag-machine")
	if s.File != cfgFile {
		t.Errorf("file = %q", s.File)
	}
	if v, src, from := s.get(t, "s3.secret_access_key"); v != config.Redacted || src != "file" || from != cfgFile+":4" {
		t.Errorf("secret: %v %s %s", v, src, from)
	}
	if v, src, from := s.get(t, "remote"); v != "s3://env-bucket/p" || src != "env" || from != "OMPSYNC_REMOTE" {
		t.Errorf("remote: %v %s %s", v, src, from)
	}
	if v, src, _ := s.get(t, "exclude"); fmt.Sprint(v) != "[a/* b/*]" || src != "env" {
		t.Errorf("exclude: %v %s", v, src)
	}
	if v, src, _ := s.get(t, "sync.pull"); v != false || src != "default" {
		t.Errorf("sync.pull: %v %s", v, src)
	}
}

func TestConfigShowWithoutFile(t *testing.T) {
	env, home := newEnv(t)
	r := runWith(t, env, "config", "show")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	want := "# config file: none (" + filepath.Join(home, ".config/ompsync/config.yaml") + " does not exist)"
	if !strings.Contains(r.stdout, want) {
		t.Errorf("output lacks %q:\n%s", want, r.stdout)
	}
}

func TestGlobalFlagsAnywhere(t *testing.T) {
	env, home := newEnv(t)
	cfgFile := filepath.Join(home, "elsewhere.yaml")
	writeFile(t, cfgFile, "machine: from-file\n", 0o600)
	for _, args := range [][]string{
		{"--config", cfgFile, "--remote", "s3://flag-bucket", "config", "show", "--json"},
		{"config", "show", "--json", "--config", cfgFile, "--remote=s3://flag-bucket"},
		{"config", "--config=" + cfgFile, "show", "--remote", "s3://flag-bucket", "--json"},
	} {
		s := showJSONOutput(t, env, args...)
		if s.File != cfgFile {
			t.Errorf("%q: file %q, want %q", args, s.File, cfgFile)
		}
		if v, src, _ := s.get(t, "machine"); v != "from-file" || src != "file" {
			t.Errorf("%q: machine %v from %s", args, v, src)
		}
		if v, src, from := s.get(t, "remote"); v != "s3://flag-bucket" || src != "flag" || from != "--remote" {
			t.Errorf("%q: remote %v from %s %s", args, v, src, from)
		}
	}
}

func TestConfigInit(t *testing.T) {
	env, home := newEnv(t)
	path := filepath.Join(home, ".config", "ompsync", "config.yaml")

	r := runWith(t, env, "config", "init")
	if r.code != 0 || !strings.Contains(r.stdout, path) {
		t.Fatalf("init: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %04o, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("folder mode %04o, want 0700", di.Mode().Perm())
	}
	written, _ := os.ReadFile(path)

	// The written file loads and sets every key but those whose default
	// follows the machine or another key, which it shows commented out.
	s := showJSONOutput(t, env, "config", "show", "--json")
	if s.File != path {
		t.Errorf("config show read %q, want %q", s.File, path)
	}
	follows := map[string]bool{"agent_dir": true, "pi.dir": true, "claude.dir": true, "codex.dir": true,
		"remote": true, "state_dir": true, "machine": true, "s3.ca_file": true, "s3.path_style": true, "projects.roots": true}
	for _, x := range s.Settings {
		if want := map[bool]string{false: "file", true: "default"}[follows[x.Key]]; x.Source != want {
			t.Errorf("%s comes from %s, want %s", x.Key, x.Source, want)
		}
	}

	// And the first backup runs with it as it does without it: to the
	// default remote, whose parent folders do not exist yet.
	writeFile(t, filepath.Join(home, ".omp", "agent", "sessions", "-w", "2026-11-30T00-00-00-000Z_019e19b4-0000-7000-8000-000000000001.jsonl"),
		`{"type":"session","version":3,"id":"019e19b4-0000-7000-8000-000000000001","timestamp":"2026-11-30T00:00:00Z","cwd":"/w"}`+"\n", 0o600)
	if r := runWith(t, env, "agent", "--once"); r.code != 0 || !strings.Contains(r.stdout, "1 uploaded") {
		t.Errorf("agent --once after config init: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A second init keeps the (edited) file.
	edited := "machine: mine\n"
	writeFile(t, path, edited, 0o644)
	r = runWith(t, env, "config", "init")
	if r.code != 1 {
		t.Fatalf("init over a file: exit %d, want 1", r.code)
	}
	if msg := oneErrorLine(t, r); !strings.Contains(msg, "already exists") || !strings.Contains(msg, "--force") {
		t.Errorf("init over a file: %q", msg)
	}
	if got, _ := os.ReadFile(path); string(got) != edited {
		t.Errorf("init without --force changed the file to %q", got)
	}

	// --force replaces it, private again.
	r = runWith(t, env, "config", "init", "--force")
	if r.code != 0 {
		t.Fatalf("init --force: exit %d, stderr %q", r.code, r.stderr)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, written) {
		t.Errorf("init --force wrote something else:\n%s", got)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after --force %04o", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("folder holds %d entries, want only the config file", len(entries))
	}

	// --path and --config choose where it goes, with ~ expanded.
	r = runWith(t, env, "config", "init", "--path", "~/a/b.yaml")
	if _, err := os.Stat(filepath.Join(home, "a/b.yaml")); r.code != 0 || err != nil {
		t.Errorf("--path: exit %d, stderr %q, %v", r.code, r.stderr, err)
	}
	r = runWith(t, env, "--config", filepath.Join(home, "c.yaml"), "config", "init")
	if _, err := os.Stat(filepath.Join(home, "c.yaml")); r.code != 0 || err != nil {
		t.Errorf("--config: exit %d, stderr %q, %v", r.code, r.stderr, err)
	}
	// -q prints errors only: the file is written, nothing said.
	r = runWith(t, env, "-q", "config", "init", "--path", "~/d.yaml")
	if _, err := os.Stat(filepath.Join(home, "d.yaml")); r.code != 0 || err != nil || r.stdout != "" || r.stderr != "" {
		t.Errorf("-q config init: exit %d, stdout %q, stderr %q, %v", r.code, r.stdout, r.stderr, err)
	}
}

func TestConfigInitIgnoresBrokenConfig(t *testing.T) {
	env, home := newEnv(t)
	env["OMPSYNC_INTERVAL"] = "never"
	path := filepath.Join(home, "broken.yaml")
	writeFile(t, path, "nonsense: [\n", 0o600)
	r := runWith(t, env, "--config", path, "config", "init", "--force")
	if r.code != 0 {
		t.Fatalf("init --force over a broken file: exit %d, stderr %q", r.code, r.stderr)
	}
	delete(env, "OMPSYNC_INTERVAL")
	if r := runWith(t, env, "--config", path, "config", "show"); r.code != 0 {
		t.Errorf("show after init: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestConfigInitHintNamesFile: the command init suggests over an existing
// file, run by a shell as printed, replaces that file and not the default.
func TestConfigInitHintNamesFile(t *testing.T) {
	env, home := newEnv(t)
	def := filepath.Join(home, ".config", "ompsync", "config.yaml")
	writeFile(t, def, "machine: default\n", 0o600)
	file := filepath.Join(home, "my dir", "it's.yaml")
	for _, given := range [][]string{{"config", "init", "--path", file}, {"--config", file, "config", "init"}} {
		writeFile(t, file, "machine: mine\n", 0o600)
		r := runWith(t, env, given...)
		msg := oneErrorLine(t, r)
		_, hint, ok := strings.Cut(strings.TrimSpace(msg), "keep it, or replace it with: ")
		if r.code != exitFailure || !ok || !strings.HasPrefix(msg, "ompsync: "+file+" already exists;") {
			t.Fatalf("%q: exit %d, %q", given, r.code, msg)
		}
		words, err := exec.Command("sh", "-c", "printf '%s\\n' "+hint).Output()
		if err != nil {
			t.Fatalf("hint %q: %v", hint, err)
		}
		args := strings.Split(strings.TrimSuffix(string(words), "\n"), "\n")
		if args[0] != "ompsync" {
			t.Fatalf("hint %q is not an ompsync command", hint)
		}
		if r := runWith(t, env, args[1:]...); r.code != 0 {
			t.Fatalf("hint %q: exit %d, %q", hint, r.code, r.stderr)
		}
		if got, _ := os.ReadFile(file); string(got) == "machine: mine\n" {
			t.Errorf("hint %q left %s as it was", hint, file)
		}
		if got, _ := os.ReadFile(def); string(got) != "machine: default\n" {
			t.Errorf("hint %q replaced the default config file", hint)
		}
	}
}

func TestPermissionWarningOnce(t *testing.T) {
	env, home := newEnv(t)
	path := filepath.Join(home, "open.yaml")
	writeFile(t, path, "machine: m\n", 0o644)

	// A command that loads the configuration twice still warns once.
	a := &app{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, env: env.lookup}
	root := newRootCmd(a)
	twice := &cobra.Command{Use: "twice", RunE: func(*cobra.Command, []string) error {
		if _, err := a.config(); err != nil {
			return err
		}
		_, err := a.config()
		return err
	}}
	root.AddCommand(twice)
	prepare(a, twice)
	if code := a.execute(context.Background(), root, []string{"--config", path, "twice"}); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, a.stderr)
	}
	stderr := a.stderr.(*bytes.Buffer).String()
	if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "ompsync: warning:") || !strings.Contains(stderr, "chmod 600 "+path) {
		t.Errorf("stderr %q, want one warning with the chmod to run", stderr)
	}
}

// TestAddedCommand checks the contract for commands others add: their flags
// named after keys override the configuration, usagef exits 2, other errors 1.
func TestAddedCommand(t *testing.T) {
	env, _ := newEnv(t)
	// newTree builds the tree as a command's author would, fresh for each
	// run since cobra keeps parsed flag values.
	newTree := func(out, errb *bytes.Buffer) (*app, *cobra.Command) {
		a := &app{stdout: out, stderr: errb, env: env.lookup}
		root := newRootCmd(a)
		work := &cobra.Command{
			Use:  "work [MODE]",
			Args: cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				cfg, err := a.config()
				if err != nil {
					return err
				}
				switch {
				case len(args) == 1 && args[0] == "usage":
					return usagef("no such mode %q", args[0])
				case len(args) == 1:
					return errors.New("it broke")
				}
				fmt.Fprintf(a.stdout, "interval=%s machine=%s\n", cfg.Interval, cfg.Machine)
				return nil
			},
		}
		config.AddFlags(work.Flags(), "interval")
		work.Flags().Bool("fast", false, "")
		work.Flags().Bool("slow", false, "")
		work.MarkFlagsMutuallyExclusive("fast", "slow")
		root.AddCommand(work)
		prepare(a, work)
		return a, root
	}

	tests := []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"work", "--interval", "5s", "--machine", "m2"}, 0, "interval=5s machine=m2", ""},
		{[]string{"work", "--interval", "5"}, 2, "", "interval (flag --interval)"},
		{[]string{"work", "usage"}, 2, "", `no such mode "usage"; see 'ompsync work --help'`},
		{[]string{"work", "x"}, 1, "", "ompsync: it broke\n"},
		{[]string{"work", "x", "y"}, 2, "", `ompsync work takes [MODE], got ["x" "y"]; see 'ompsync work --help'`},
		{[]string{"work", "--fast", "--slow"}, 2, "", "see 'ompsync work --help'"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		a, root := newTree(&out, &errb)
		code := a.execute(context.Background(), root, tt.args)
		if code != tt.code || !strings.Contains(out.String(), tt.out) || !strings.Contains(errb.String(), tt.err) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q, %q",
				tt.args, code, out.String(), errb.String(), tt.code, tt.out, tt.err)
		}
	}
}

func TestHelp(t *testing.T) {
	env, _ := newEnv(t)
	r := runWith(t, env, "--help")
	if r.code != 0 {
		t.Fatalf("--help: exit %d", r.code)
	}
	for _, want := range []string{"OMPSYNC_REMOTE", "config init", "--agent-dir", "~/.config/ompsync/config.yaml"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("root help lacks %q", want)
		}
	}
	if r := runWith(t, env, "config"); r.code != 0 || !strings.Contains(r.stdout, "show") {
		t.Errorf("config alone: exit %d, stdout %q", r.code, r.stdout)
	}
	// The commands cobra adds have their help, as --help lists them.
	for _, args := range [][]string{{"completion", "--help"}, {"completion", "bash", "--help"}, {"help", "completion", "bash"}, {"help", "cat"}} {
		if r := runWith(t, env, args...); r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("%q: exit %d, stdout %.80q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}
