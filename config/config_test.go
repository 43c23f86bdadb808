package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/safename"
)

// testEnv is a fake environment: tests never touch the process's own.
type testEnv map[string]string

func (e testEnv) lookup(k string) (string, bool) { v, ok := e[k]; return v, ok }

// newEnv returns an environment whose HOME is a fresh folder.
func newEnv(t *testing.T) (testEnv, string) {
	t.Helper()
	home := t.TempDir()
	return testEnv{"HOME": home}, home
}

func opts(env testEnv) LoadOptions {
	return LoadOptions{LookupEnv: env.lookup, Hostname: func() (string, error) { return "test-host", nil }}
}

func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustLoad(t *testing.T, o LoadOptions) *Config {
	t.Helper()
	c, err := Load(o)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func TestDefaults(t *testing.T) {
	env, home := newEnv(t)
	c := mustLoad(t, opts(env))
	want := map[string]any{
		"AgentDir":          filepath.Join(home, ".omp/agent"),
		"Remote":            "file://" + filepath.Join(home, ".local/share/ompsync/remote"),
		"StateDir":          filepath.Join(home, ".local/state/ompsync"),
		"Machine":           "test-host",
		"Interval":          2 * time.Second,
		"ReconcileInterval": 60 * time.Second,
		"File":              "",
	}
	got := map[string]any{
		"AgentDir": c.AgentDir, "Remote": c.Remote, "StateDir": c.StateDir, "Machine": c.Machine,
		"Interval": c.Interval, "ReconcileInterval": c.ReconcileInterval, "File": c.File,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults:\n got %v\nwant %v", got, want)
	}
	if len(c.Include)+len(c.Exclude)+len(c.Sync.Include)+len(c.Sync.Exclude) != 0 {
		t.Errorf("lists not empty: %q %q %q %q", c.Include, c.Exclude, c.Sync.Include, c.Sync.Exclude)
	}
	wantS3 := S3{Client: "aws"}
	if c.S3 != wantS3 {
		t.Errorf("S3 = %+v, want %+v", c.S3, wantS3)
	}
	if c.Sync.Pull || c.Sync.PullInterval != 30*time.Second {
		t.Errorf("Sync = %+v", c.Sync)
	}
	if c.Log != (Log{Level: "info", Format: "text"}) || c.Metrics.Addr != "" {
		t.Errorf("Log = %+v, Metrics = %+v", c.Log, c.Metrics)
	}
	for _, k := range Keys() {
		if s := c.Source(k); s.Kind != FromDefault {
			t.Errorf("source of %s = %v, want default", k, s)
		}
	}
}

func TestXDGDefaults(t *testing.T) {
	env, _ := newEnv(t)
	base := t.TempDir()
	env["XDG_DATA_HOME"] = filepath.Join(base, "data")
	env["XDG_STATE_HOME"] = filepath.Join(base, "state")
	env["XDG_CONFIG_HOME"] = filepath.Join(base, "config")
	env["PI_CODING_AGENT_DIR"] = filepath.Join(base, "pi")
	if err := os.MkdirAll(filepath.Join(base, "config", "ompsync"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfgPath := writeConfig(t, filepath.Join(base, "config", "ompsync"), "machine: from-xdg-file\n")

	c := mustLoad(t, opts(env))
	if c.Remote != "file://"+filepath.Join(base, "data/ompsync/remote") {
		t.Errorf("Remote = %q", c.Remote)
	}
	if c.StateDir != filepath.Join(base, "state/ompsync") {
		t.Errorf("StateDir = %q", c.StateDir)
	}
	if c.AgentDir != filepath.Join(base, "pi") {
		t.Errorf("AgentDir = %q, want $PI_CODING_AGENT_DIR", c.AgentDir)
	}
	if c.File != cfgPath || c.Machine != "from-xdg-file" {
		t.Errorf("File = %q, Machine = %q; want the file under $XDG_CONFIG_HOME read", c.File, c.Machine)
	}
	// config show says which variable a default came from.
	for key, want := range map[string]string{
		"remote":     "default, from $XDG_DATA_HOME",
		"state_dir":  "default, from $XDG_STATE_HOME",
		"agent_dir":  "default, from $PI_CODING_AGENT_DIR",
		"pi.dir":     "default, from $PI_CODING_AGENT_DIR",
		"claude.dir": "default",
		"interval":   "default",
	} {
		if got := c.Source(key).String(); got != want {
			t.Errorf("source of %s = %q, want %q", key, got, want)
		}
	}

	// Without $PI_CODING_AGENT_DIR, omp's XDG layout is used once
	// $XDG_DATA_HOME/omp exists (sessions/ directly under it).
	delete(env, "PI_CODING_AGENT_DIR")
	if c := mustLoad(t, opts(env)); c.AgentDir == filepath.Join(base, "data", "omp") {
		t.Errorf("AgentDir = %q before $XDG_DATA_HOME/omp exists", c.AgentDir)
	}
	if err := os.MkdirAll(filepath.Join(base, "data", "omp", "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	if c := mustLoad(t, opts(env)); c.AgentDir != filepath.Join(base, "data", "omp") {
		t.Errorf("AgentDir = %q, want omp's XDG folder $XDG_DATA_HOME/omp", c.AgentDir)
	}

	// The XDG spec says relative values are to be ignored.
	env2, home := newEnv(t)
	env2["XDG_STATE_HOME"] = "relative/state"
	c = mustLoad(t, opts(env2))
	if c.StateDir != filepath.Join(home, ".local/state/ompsync") || c.Source("state_dir").String() != "default" {
		t.Errorf("StateDir with relative XDG_STATE_HOME = %q (%s)", c.StateDir, c.Source("state_dir"))
	}

	// Another program's variable is named as the default's origin.
	ca := filepath.Join(base, "ca.pem")
	env2["AWS_CA_BUNDLE"] = ca
	if c := mustLoad(t, opts(env2)); c.S3.CAFile != ca || c.Source("s3.ca_file").String() != "default, from $AWS_CA_BUNDLE" {
		t.Errorf("s3.ca_file = %q from %s, want $AWS_CA_BUNDLE's", c.S3.CAFile, c.Source("s3.ca_file"))
	}
}

func TestPrecedence(t *testing.T) {
	env, home := newEnv(t)
	file := writeConfig(t, home, `
remote: s3://file-bucket/p
machine: file-machine
interval: 3s
log:
  level: debug
s3:
  region: file-region
`)
	env["OMPSYNC_CONFIG"] = file
	env["OMPSYNC_REMOTE"] = "s3://env-bucket"
	env["OMPSYNC_MACHINE"] = "env-machine"
	env["OMPSYNC_INTERVAL"] = "4s"
	env["OMPSYNC_S3_REGION"] = "env-region"

	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.String("remote", "", "")
	fs.String("machine", "", "")    // defined but not given: must not win
	fs.String("interval", "9s", "") // a flag default must not win either
	fs.String("log-format", "", "")
	if err := fs.Parse([]string{"--remote", "file:///flag/dir", "--log-format=json"}); err != nil {
		t.Fatal(err)
	}
	o := opts(env)
	o.Flags = fs
	c := mustLoad(t, o)

	tests := []struct {
		key, got, want string
		src            SourceKind
	}{
		{"remote", c.Remote, "file:///flag/dir", FromFlag},
		{"log.format", c.Log.Format, "json", FromFlag},
		{"machine", c.Machine, "env-machine", FromEnv},
		{"interval", c.Interval.String(), "4s", FromEnv},
		{"s3.region", c.S3.Region, "env-region", FromEnv},
		{"log.level", c.Log.Level, "debug", FromFile},
		{"state_dir", c.StateDir, filepath.Join(home, ".local/state/ompsync"), FromDefault},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.key, tt.got, tt.want)
		}
		if s := c.Source(tt.key); s.Kind != tt.src {
			t.Errorf("source of %s = %v, want kind %v", tt.key, s, tt.src)
		}
	}
	if got := c.Source("remote").String(); got != "flag --remote" {
		t.Errorf("remote source = %q", got)
	}
	if got := c.Source("machine").String(); got != "env OMPSYNC_MACHINE" {
		t.Errorf("machine source = %q", got)
	}
	if got := c.Source("log.level").String(); got != "file "+file+":6" {
		t.Errorf("log.level source = %q, want the file and line 6", got)
	}

	// Without the environment, the file wins over the defaults.
	delete(env, "OMPSYNC_MACHINE")
	delete(env, "OMPSYNC_INTERVAL")
	c = mustLoad(t, opts(env))
	if c.Machine != "file-machine" || c.Interval != 3*time.Second {
		t.Errorf("file values: machine %q interval %v", c.Machine, c.Interval)
	}
}

func TestTypedFlags(t *testing.T) {
	env, _ := newEnv(t)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.Bool("sync-pull", false, "")
	fs.StringSlice("include", nil, "")
	fs.Duration("reconcile-interval", time.Minute, "")
	if err := fs.Parse([]string{"--sync-pull", "--include", "a/*,b", "--reconcile-interval=90s"}); err != nil {
		t.Fatal(err)
	}
	o := opts(env)
	o.Flags = fs
	c := mustLoad(t, o)
	if !c.Sync.Pull || !reflect.DeepEqual(c.Include, []string{"a/*", "b"}) || c.ReconcileInterval != 90*time.Second {
		t.Errorf("Sync.Pull %v, Include %q, ReconcileInterval %v", c.Sync.Pull, c.Include, c.ReconcileInterval)
	}
}

// TestFlagsShowTheirDefault: a key's flag shows the key's default in
// --help (and the man pages: --interval="2s", not ""), and a flag not given
// still leaves the value to the environment.
func TestFlagsShowTheirDefault(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	AddFlags(fs, "interval", "retention.generations", "sync.pull", "remote", "include")
	for name, want := range map[string]string{"interval": "2s", "retention-generations": "720h", "sync-pull": "false", "remote": "", "include": "[]"} {
		if got := fs.Lookup(name).DefValue; got != want {
			t.Errorf("--%s default %q, want %q", name, got, want)
		}
	}
	for _, want := range []string{`[OMPSYNC_INTERVAL] (default "2s")`, `[OMPSYNC_RETENTION_GENERATIONS] (default "720h")`} {
		if !strings.Contains(fs.FlagUsages(), want) {
			t.Errorf("help lacks %q:\n%s", want, fs.FlagUsages())
		}
	}
	env, _ := newEnv(t)
	env["OMPSYNC_INTERVAL"] = "4s"
	o := opts(env)
	o.Flags = fs
	if c := mustLoad(t, o); c.Interval != 4*time.Second || c.Source("interval").Kind != FromEnv {
		t.Errorf("interval %v from %v, want 4s from the environment", c.Interval, c.Source("interval"))
	}
}

func TestLists(t *testing.T) {
	env, home := newEnv(t)
	env["OMPSYNC_INCLUDE"] = " sessions/-work*/*.jsonl, ,sessions/x ,"
	env["OMPSYNC_SYNC_EXCLUDE"] = "a"
	env["OMPSYNC_CONFIG"] = writeConfig(t, home, `
exclude: [ "*.tmp", "sessions/secret/*" ]
sync:
  include: "one, two"
`)
	c := mustLoad(t, opts(env))
	check := func(name string, got, want []string) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	check("include (env)", c.Include, []string{"sessions/-work*/*.jsonl", "sessions/x"})
	check("exclude (file list)", c.Exclude, []string{"*.tmp", "sessions/secret/*"})
	check("sync.include (file string)", c.Sync.Include, []string{"one", "two"})
	check("sync.exclude (env)", c.Sync.Exclude, []string{"a"})
}

func TestEmptyEnvIsUnset(t *testing.T) {
	env, home := newEnv(t)
	env["OMPSYNC_CONFIG"] = writeConfig(t, home, "machine: from-file\n")
	env["OMPSYNC_MACHINE"] = ""
	env["OMPSYNC_REMOTE"] = ""
	c := mustLoad(t, opts(env))
	if c.Machine != "from-file" || c.Source("remote").Kind != FromDefault {
		t.Errorf("machine %q (%v), remote source %v", c.Machine, c.Source("machine"), c.Source("remote"))
	}
}

// An OMPSYNC_ variable that names no setting is refused, as an unknown key
// in the file is: with OMPSYNC_REMOT the backup would quietly go to the
// default remote.
func TestUnknownEnvVariable(t *testing.T) {
	tests := []struct {
		name, value string
		want        []string // "" in want: loads
	}{
		{"OMPSYNC_REMOT", "s3://bucket", []string{"OMPSYNC_REMOT is set", "did you mean OMPSYNC_REMOTE?", "docs/CONFIG.md"}},
		{"OMPSYNC_S3_ENDPONT", "http://127.0.0.1:9000", []string{"OMPSYNC_S3_ENDPONT", "did you mean OMPSYNC_S3_ENDPOINT?"}},
		{"OMPSYNC_BUCKET", "my-bucket", []string{"OMPSYNC_BUCKET is set, but no setting has that name; correct or unset it"}},
		{"OMPSYNC_REMOT", "", nil},             // empty counts as unset
		{"OMPSYNC_TEST_S3_ENDPOINT", "x", nil}, // the tests' own
		{"OMPSYNC_BENCH_BIN", "x", nil},
		{"OMPSYNC_OMP_CACHE", "x", nil},
		{"OMPSYNC_MACHINE", "laptop", nil},
		{"OMPSYNCREMOTE", "x", nil}, // not ours
	}
	for _, tt := range tests {
		env, _ := newEnv(t)
		env[tt.name] = tt.value
		o := opts(env)
		for k := range env {
			o.EnvNames = append(o.EnvNames, k)
		}
		c, err := Load(o)
		if tt.want == nil {
			if err != nil {
				t.Errorf("%s=%q: %v", tt.name, tt.value, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s=%q: loaded (remote %s), want an error", tt.name, tt.value, c.Remote)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tt.name, err, w)
			}
		}
		if tt.value != "" && strings.Contains(err.Error(), tt.value) {
			t.Errorf("%s: the error shows the value: %q", tt.name, err)
		}
	}
	// Without the names (an injected lookup alone) nothing is checked.
	env, _ := newEnv(t)
	env["OMPSYNC_REMOT"] = "s3://bucket"
	if _, err := Load(opts(env)); err != nil {
		t.Errorf("without EnvNames: %v", err)
	}
}

func TestUnknownKey(t *testing.T) {
	tests := []struct {
		body string
		want []string
	}{
		{"remote: s3://bucket\nremtoe: x\n", []string{`unknown key "remtoe"`, ":2", `did you mean "remote"?`}},
		{"s3:\n  client: aws\n  bucket: b\n", []string{`unknown key "s3.bucket"`, ":3"}},
		{"client: minio\n", []string{`unknown key "client"`, `did you mean "s3.client"?`}},
		{"zzzzzzzz: 1\n", []string{`unknown key "zzzzzzzz"`, "docs/CONFIG.md", "config init --path FILE"}},
		{"s3: minio\n", []string{"s3 holds keys", "s3.client", ":1"}},
		{"log:\n  level: info\n  colour: red\n", []string{`unknown key "log.colour"`}},
	}
	for _, tt := range tests {
		env, home := newEnv(t)
		path := writeConfig(t, home, tt.body)
		o := opts(env)
		o.ConfigFile = path
		_, err := Load(o)
		if err == nil {
			t.Errorf("%q: loaded, want an error", tt.body)
			continue
		}
		msg := err.Error()
		for _, w := range append(tt.want, path) {
			if !strings.Contains(msg, w) {
				t.Errorf("%q: error %q lacks %q", tt.body, msg, w)
			}
		}
	}
}

func TestFileShapes(t *testing.T) {
	// Files a person leaves behind while editing: all load.
	for _, body := range []string{
		"",
		"# only comments\n",
		"s3:\n  # client: minio\n",
		"sync:\nlog:\n",
		"machine:\n", // a null value leaves the default
		"log: &l\n  level: debug\nsync: {pull_interval: 5s}\n", // anchors and flow maps
	} {
		env, home := newEnv(t)
		o := opts(env)
		o.ConfigFile = writeConfig(t, home, body)
		c, err := Load(o)
		if err != nil {
			t.Errorf("%q: %v", body, err)
			continue
		}
		if c.Machine != "test-host" {
			t.Errorf("%q: machine %q", body, c.Machine)
		}
	}

	env, home := newEnv(t)
	o := opts(env)
	o.ConfigFile = writeConfig(t, home, "remote: [unclosed\n")
	_, err := Load(o)
	if err == nil || !strings.Contains(err.Error(), o.ConfigFile) || strings.Contains(err.Error(), "\n") {
		t.Errorf("YAML syntax error: %v; want one line naming the file", err)
	}
	o.ConfigFile = writeConfig(t, home, "- remote\n")
	if _, err = Load(o); err == nil || !strings.Contains(err.Error(), "key: value") {
		t.Errorf("top-level list: %v", err)
	}
	o.ConfigFile = writeConfig(t, home, "machine:\n  name: x\n")
	if _, err = Load(o); err == nil || !strings.Contains(err.Error(), "machine") {
		t.Errorf("mapping under a key: %v", err)
	}
}

func TestBadValues(t *testing.T) {
	longName := strings.Repeat("m", 65)
	tests := []struct {
		env  map[string]string
		file string
		want []string // all must appear in the one-line message
	}{
		{env: map[string]string{"OMPSYNC_INTERVAL": "soon"},
			want: []string{"interval (env OMPSYNC_INTERVAL)", `"soon" is not a duration`, "2s"}},
		{file: "interval: 5\n",
			want: []string{"interval (file ", `"5" has no unit`, "2s (the default)"}},
		{env: map[string]string{"OMPSYNC_RECONCILE_INTERVAL": "-1s"},
			want: []string{"reconcile_interval", "not positive"}},
		{file: "sync:\n  pull_interval: 0s\n",
			want: []string{"sync.pull_interval", "not positive"}},
		{env: map[string]string{"OMPSYNC_SYNC_PULL": "maybe"},
			want: []string{"sync.pull (env OMPSYNC_SYNC_PULL)", `"maybe" is not a boolean`, "true or false"}},
		{file: "s3:\n  path_style: yes\n",
			want: []string{"s3.path_style", `"yes" is not a boolean`}},
		{env: map[string]string{"OMPSYNC_S3_CLIENT": "boto"},
			want: []string{"s3.client", `"boto" is not one of ` + strings.Join(backend.Clients("s3"), ", ")}},
		{file: "log:\n  level: loud\n",
			want: []string{"log.level", `"loud" is not one of debug, info, warn, error`}},
		{env: map[string]string{"OMPSYNC_LOG_FORMAT": "xml"},
			want: []string{"log.format", "text, json"}},
		{env: map[string]string{"OMPSYNC_REMOTE": "http://example.com/x"},
			want: []string{"remote (env OMPSYNC_REMOTE)", "http://example.com/x", backend.AcceptedForms()}},
		{file: "remote: /mnt/backup\n",
			want: []string{"remote (file ", "/mnt/backup", backend.AcceptedForms()}},
		{env: map[string]string{"OMPSYNC_MACHINE": "my/laptop"},
			want: []string{"machine", `"my/laptop"`, safename.MachineRule}},
		{env: map[string]string{"OMPSYNC_MACHINE": ".."}, want: []string{"machine", safename.MachineRule}},
		{env: map[string]string{"OMPSYNC_MACHINE": longName}, want: []string{"machine", safename.MachineRule}},
		{file: "machine: \"\"\n", want: []string{"machine", safename.MachineRule}},
		{env: map[string]string{"OMPSYNC_S3_ENDPOINT": "minio:9000"},
			want: []string{"s3.endpoint", "http://127.0.0.1:9000"}},
		{env: map[string]string{"OMPSYNC_S3_ENDPOINT": "https://user:pw@s3.example.com"},
			want: []string{"s3.endpoint", "holds credentials"}},
		{env: map[string]string{"OMPSYNC_METRICS_ADDR": "9090"},
			want: []string{"metrics.addr", "host:port"}},
		{env: map[string]string{"OMPSYNC_EXCLUDE": "sessions/[abc"},
			want: []string{"exclude", `"sessions/[abc"`, "malformed"}},
		{env: map[string]string{"OMPSYNC_AGENT_DIR": "~bob/agent"},
			want: []string{"agent_dir", "~user"}},
		{file: "agent_dir: \"\"\n", want: []string{"agent_dir", "empty"}},
		{file: "s3:\n  client: [aws, minio]\n", want: []string{"s3.client", "not a list"}},
	}
	for _, tt := range tests {
		env, home := newEnv(t)
		for k, v := range tt.env {
			env[k] = v
		}
		if tt.file != "" {
			env["OMPSYNC_CONFIG"] = writeConfig(t, home, tt.file)
		}
		_, err := Load(opts(env))
		if err == nil {
			t.Errorf("env %v file %q: loaded, want an error", tt.env, tt.file)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			t.Errorf("message is not one line: %q", msg)
		}
		for _, w := range tt.want {
			if !strings.Contains(msg, w) {
				t.Errorf("env %v file %q: error %q lacks %q", tt.env, tt.file, msg, w)
			}
		}
		var ke *KeyError
		if !errors.As(err, &ke) {
			t.Errorf("error %q is not a *KeyError", msg)
		}
	}
}

func TestFlagErrorSource(t *testing.T) {
	env, _ := newEnv(t)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.String("log-level", "", "")
	if err := fs.Parse([]string{"--log-level=LOUD"}); err != nil {
		t.Fatal(err)
	}
	o := opts(env)
	o.Flags = fs
	_, err := Load(o)
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Key != "log.level" || ke.Source.Kind != FromFlag || ke.Source.Name != "--log-level" {
		t.Fatalf("error %v, want a KeyError for log.level from --log-level", err)
	}
	// Enums are matched without regard to case.
	fs2 := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs2.String("log-level", "", "")
	_ = fs2.Parse([]string{"--log-level=WARN"})
	o.Flags = fs2
	if c := mustLoad(t, o); c.Log.Level != "warn" {
		t.Errorf("log.level = %q, want warn", c.Log.Level)
	}
}

func TestConfigFileLookup(t *testing.T) {
	env, home := newEnv(t)
	missing := filepath.Join(home, "nope.yaml")

	// A file named by --config or OMPSYNC_CONFIG must exist.
	o := opts(env)
	o.ConfigFile = missing
	if _, err := Load(o); err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing --config file: %v", err)
	}
	env["OMPSYNC_CONFIG"] = missing
	if _, err := Load(opts(env)); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing OMPSYNC_CONFIG file: %v", err)
	}
	// A folder named as the file: which file to name instead.
	o.ConfigFile = home
	if _, err := Load(o); err == nil || !strings.Contains(err.Error(), "is a folder: name the file in it (--config "+filepath.Join(home, "config.yaml")+")") {
		t.Errorf("--config naming a folder: %v", err)
	}

	// --config wins over OMPSYNC_CONFIG.
	o = opts(env)
	o.ConfigFile = writeConfig(t, home, "machine: named\n")
	if c := mustLoad(t, o); c.Machine != "named" || c.File != o.ConfigFile {
		t.Errorf("machine %q file %q", c.Machine, c.File)
	}

	// The default file may be absent.
	delete(env, "OMPSYNC_CONFIG")
	c := mustLoad(t, opts(env))
	if c.File != "" {
		t.Errorf("File = %q with no config file", c.File)
	}
	p, explicit, err := FilePath(opts(env))
	if err != nil || explicit || p != filepath.Join(home, ".config/ompsync/config.yaml") {
		t.Errorf("FilePath = %q, %v, %v", p, explicit, err)
	}

	// A folder where the file should be is an error, not an empty config.
	o.ConfigFile = home
	if _, err := Load(o); err == nil {
		t.Error("a folder as config file loaded")
	}
}

func TestTildeExpansion(t *testing.T) {
	env, home := newEnv(t)
	writeConfig(t, home, "agent_dir: ~/omp-agent\n")
	env["OMPSYNC_STATE_DIR"] = "~"
	o := opts(env)
	o.ConfigFile = "~/config.yaml"
	c := mustLoad(t, o)
	if c.File != filepath.Join(home, "config.yaml") {
		t.Errorf("File = %q, want ~ expanded", c.File)
	}
	if c.AgentDir != filepath.Join(home, "omp-agent") {
		t.Errorf("AgentDir = %q", c.AgentDir)
	}
	if c.StateDir != home {
		t.Errorf("StateDir = %q, want %q", c.StateDir, home)
	}

	// A relative path is taken from the current folder.
	env["OMPSYNC_STATE_DIR"] = "rel/state"
	c = mustLoad(t, o)
	wd, _ := os.Getwd()
	if c.StateDir != filepath.Join(wd, "rel/state") {
		t.Errorf("StateDir = %q, want it absolute", c.StateDir)
	}
}

func TestMachineFromHostname(t *testing.T) {
	tests := []struct{ host, want string }{
		{"laptop", "laptop"},
		{"Ann's MacBook Pro.local", "Ann-s-MacBook-Pro.local"},
		{"héte", "h--te"},
		{strings.Repeat("a", 70), strings.Repeat("a", 64)},
	}
	for _, tt := range tests {
		env, _ := newEnv(t)
		o := opts(env)
		o.Hostname = func() (string, error) { return tt.host, nil }
		c := mustLoad(t, o)
		if c.Machine != tt.want {
			t.Errorf("host %q: machine %q, want %q", tt.host, c.Machine, tt.want)
		}
	}

	// No usable default: an error that says to set machine, unless it is set.
	env, _ := newEnv(t)
	o := opts(env)
	o.Hostname = func() (string, error) { return "", errors.New("no name") }
	if _, err := Load(o); err == nil || !strings.Contains(err.Error(), "set machine") {
		t.Errorf("no host name: %v", err)
	}
	env["OMPSYNC_MACHINE"] = "explicit"
	if c := mustLoad(t, o); c.Machine != "explicit" {
		t.Errorf("machine = %q", c.Machine)
	}
}

const (
	testSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	testKeyID  = "AKIAIOSFODNN7EXAMPLE"
)

func TestSecretsRedacted(t *testing.T) {
	env, home := newEnv(t)
	env["OMPSYNC_S3_SECRET_ACCESS_KEY"] = testSecret
	env["OMPSYNC_CONFIG"] = writeConfig(t, home, "s3:\n  access_key_id: "+testKeyID+"\n")
	c := mustLoad(t, opts(env))
	if c.S3.SecretAccessKey != testSecret || c.S3.AccessKeyID != testKeyID {
		t.Fatalf("secrets not loaded: %q %q", c.S3.AccessKeyID, c.S3.SecretAccessKey)
	}

	shown := map[string]any{}
	for _, s := range c.Settings() {
		shown[s.Key] = s.Value
	}
	if shown["s3.secret_access_key"] != Redacted {
		t.Errorf("secret shown as %q", shown["s3.secret_access_key"])
	}
	if shown["s3.access_key_id"] != "AKIA"+Redacted {
		t.Errorf("access key id shown as %q, want its first 4 characters", shown["s3.access_key_id"])
	}

	// The config printed or logged whole still hides the secret.
	var out bytes.Buffer
	fmt.Fprintf(&out, "%v %+v %#v %s", c, c, c, c.S3)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("cfg", "s3", c.S3, "config", c)
	if strings.Contains(out.String(), testSecret) || strings.Contains(out.String(), testKeyID) {
		t.Errorf("a secret leaked:\n%s", out.String())
	}

	// A short key id is hidden whole; an unset one is shown as unset.
	c.S3.AccessKeyID = "short"
	c.S3.SecretAccessKey = ""
	for _, s := range c.Settings() {
		if s.Key == "s3.access_key_id" && s.Value != Redacted {
			t.Errorf("short key id shown as %q", s.Value)
		}
		if s.Key == "s3.secret_access_key" && s.Value != "" {
			t.Errorf("unset secret shown as %q", s.Value)
		}
	}
}

func TestStarterLoads(t *testing.T) {
	for _, extra := range []testEnv{
		{},
		{"PI_CODING_AGENT_DIR": "/srv/pi/agent", "XDG_STATE_HOME": "/var/tmp/state"},
	} {
		env, home := newEnv(t)
		for k, v := range extra {
			env[k] = v
		}
		defaults := mustLoad(t, opts(env))
		data, err := Starter(opts(env))
		if err != nil {
			t.Fatal(err)
		}
		o := opts(env)
		o.ConfigFile = writeConfig(t, home, string(data))
		fromFile := mustLoad(t, o)
		for _, k := range Keys() {
			key := keys[indexOf(k)]
			_, leaf, nested := strings.Cut(k, ".")
			if !nested {
				leaf = k
			}
			switch {
			case key.derived && fromFile.Source(k).Kind != FromDefault:
				t.Errorf("starter pins %s, whose default follows the machine (source %v)", k, fromFile.Source(k))
			case key.derived && !regexp.MustCompile(`(?m)^\s*# `+regexp.QuoteMeta(leaf)+`:`).Match(data):
				t.Errorf("starter does not show %s commented out", k)
			case !key.derived && fromFile.Source(k).Kind != FromFile:
				t.Errorf("starter does not set %s (source %v)", k, fromFile.Source(k))
			}
			if !strings.Contains(string(data), "# "+keys[indexOf(k)].help+"\n") {
				t.Errorf("starter has no comment for %s", k)
			}
		}
		// Same values as the defaults, apart from the bookkeeping.
		fromFile.File, fromFile.sources, defaults.sources = "", nil, nil
		if !reflect.DeepEqual(fromFile, defaults) {
			t.Errorf("starter values differ from the defaults:\nfile     %+v\ndefaults %+v", fromFile, defaults)
		}
	}

	// The file follows the machine it is read on: another host name and
	// home give their own defaults, not the ones it was written with.
	env, home := newEnv(t)
	data, err := Starter(opts(env))
	if err != nil {
		t.Fatal(err)
	}
	o := opts(env)
	o.ConfigFile = writeConfig(t, home, string(data))
	env2, home2 := newEnv(t)
	o2 := opts(env2)
	o2.ConfigFile = o.ConfigFile
	o2.Hostname = func() (string, error) { return "the-new-laptop", nil }
	moved := mustLoad(t, o2)
	if moved.Machine != "the-new-laptop" || !strings.HasPrefix(moved.StateDir, home2) || !strings.Contains(moved.Remote, home2) {
		t.Errorf("the starter read on another machine: machine %q, state_dir %q, remote %q; want that machine's", moved.Machine, moved.StateDir, moved.Remote)
	}
	// An endpoint on 127.0.0.1 set later takes path style, which the file
	// does not pin to false.
	env2["OMPSYNC_S3_ENDPOINT"] = "http://127.0.0.1:9000"
	if c, err := Load(o2); err != nil || !c.S3.PathStyle {
		t.Errorf("the starter with an endpoint on 127.0.0.1: path style %v, %v", c != nil && c.S3.PathStyle, err)
	}

	// With no usable host name the starter leaves machine for the user.
	env, _ = newEnv(t)
	o = opts(env)
	o.Hostname = func() (string, error) { return "", nil }
	data, err = Starter(o)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^# machine:`).Match(data) {
		t.Errorf("starter without a host name:\n%s", data)
	}
}

func indexOf(name string) int {
	for i, k := range keys {
		if k.name == name {
			return i
		}
	}
	return -1
}

func TestPermissionWarning(t *testing.T) {
	env, home := newEnv(t)
	p := writeConfig(t, home, "machine: m\n")
	o := opts(env)
	o.ConfigFile = p
	if w := mustLoad(t, o).Warnings(); len(w) != 0 {
		t.Errorf("mode 0600: warnings %q", w)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	w := mustLoad(t, o).Warnings()
	if len(w) != 1 || !strings.Contains(w[0], p) || !strings.Contains(w[0], "chmod 600") {
		t.Errorf("mode 0644: warnings %q", w)
	}
}

func TestLogger(t *testing.T) {
	env, _ := newEnv(t)
	env["OMPSYNC_LOG_FORMAT"] = "json"
	env["OMPSYNC_LOG_LEVEL"] = "warn"
	c := mustLoad(t, opts(env))
	var buf bytes.Buffer
	l := c.LeveledLogger(&buf, c.LogLevel())
	l.Info("hidden")
	l.Warn("shown", "n", 1)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not one JSON record: %q", buf.String())
	}
	if rec["msg"] != "shown" || rec["level"] != "WARN" {
		t.Errorf("record %v", rec)
	}
}

func TestNames(t *testing.T) {
	for key, want := range map[string][2]string{
		"agent_dir":          {"OMPSYNC_AGENT_DIR", "agent-dir"},
		"log.level":          {"OMPSYNC_LOG_LEVEL", "log-level"},
		"s3.path_style":      {"OMPSYNC_S3_PATH_STYLE", "s3-path-style"},
		"reconcile_interval": {"OMPSYNC_RECONCILE_INTERVAL", "reconcile-interval"},
	} {
		if got := [2]string{EnvVar(key), FlagName(key)}; got != want {
			t.Errorf("%s: %v, want %v", key, got, want)
		}
	}
	if k, ok := Lookup("s3.secret_access_key"); !ok || !k.Secret || k.Kind != "string" {
		t.Errorf("Lookup(secret) = %+v, %v", k, ok)
	}
	if k, _ := Lookup("sync.pull"); k.Kind != "bool" {
		t.Errorf("sync.pull kind %q", k.Kind)
	}
}

// TestConfigDocDocumentsEveryKey checks that docs/CONFIG.md, the user's
// reference, has a row for every key, between the generated markers.
// (cmd/ompsync's TestConfigDocUpToDate checks the rows are what the generator
// writes, flags included.)
func TestConfigDocDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile("../docs/CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	_, ref, ok := strings.Cut(string(data), DocBegin)
	if !ok {
		t.Fatalf("docs/CONFIG.md has no line %q", DocBegin)
	}
	ref, _, ok = strings.Cut(ref, DocEnd)
	if !ok {
		t.Fatalf("docs/CONFIG.md has no line %q", DocEnd)
	}
	for _, k := range keys {
		row := fmt.Sprintf("| `%s` | `%s` |", k.name, EnvVar(k.name))
		if !strings.Contains(ref, row) {
			t.Errorf("docs/CONFIG.md key table has no row starting %q; run: go run ./cmd/ompsync config doc --write docs/CONFIG.md", row)
		}
	}
}

func TestReplaceDoc(t *testing.T) {
	file := "intro\n" + DocBegin + "\nold table\n" + DocEnd + "\nnotes\n"
	got, err := ReplaceDoc(file, "new table\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + DocBegin + "\nnew table\n" + DocEnd + "\nnotes\n"; got != want {
		t.Errorf("ReplaceDoc = %q, want %q", got, want)
	}
	if _, err := ReplaceDoc("no markers\n", "t"); err == nil || !strings.Contains(err.Error(), DocBegin) {
		t.Errorf("ReplaceDoc without markers: err = %v, want one naming the missing line", err)
	}
}

// TestREADMEExamplesLoad loads every YAML example in the README.
func TestREADMEExamplesLoad(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(data), -1)
	if len(blocks) < 2 {
		t.Fatalf("found %d YAML examples, want the AWS and the S3-compatible one", len(blocks))
	}
	for _, b := range blocks {
		env, home := newEnv(t)
		o := opts(env)
		o.ConfigFile = writeConfig(t, home, b[1])
		c, err := Load(o)
		if err != nil {
			t.Errorf("README example does not load: %v\n%s", err, b[1])
			continue
		}
		if !strings.HasPrefix(c.Remote, "s3://") {
			t.Errorf("README example remote %q", c.Remote)
		}
	}
}

// An endpoint that is an IP address or localhost cannot name a bucket
// under it: path style is its default, and false is refused, saying so.
func TestPathStyleForAddressEndpoints(t *testing.T) {
	for _, tt := range []struct {
		endpoint, pathStyle string
		want                bool
		err                 string
	}{
		{"http://127.0.0.1:9000", "", true, ""},
		{"http://[::1]:9000", "", true, ""},
		{"http://localhost:9000", "", true, ""},
		{"https://s3.example.com", "", false, ""},
		{"https://s3.example.com", "true", true, ""},
		{"http://127.0.0.1:9000", "false", false, "s3.path_style (env OMPSYNC_S3_PATH_STYLE): s3.endpoint 127.0.0.1 is an IP address or localhost, which cannot name a bucket (bucket.endpoint): set it to true"},
	} {
		env, _ := newEnv(t)
		env["OMPSYNC_S3_ENDPOINT"] = tt.endpoint
		if tt.pathStyle != "" {
			env["OMPSYNC_S3_PATH_STYLE"] = tt.pathStyle
		}
		c, err := Load(opts(env))
		switch {
		case tt.err != "":
			if err == nil || err.Error() != tt.err {
				t.Errorf("%s, path_style %q: error %v, want %q", tt.endpoint, tt.pathStyle, err, tt.err)
			}
		case err != nil:
			t.Errorf("%s, path_style %q: %v", tt.endpoint, tt.pathStyle, err)
		case c.S3.PathStyle != tt.want:
			t.Errorf("%s, path_style %q: path style %v, want %v", tt.endpoint, tt.pathStyle, c.S3.PathStyle, tt.want)
		}
	}
}

// Keys returns every configuration key in table order.
func Keys() []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.name
	}
	return out
}
