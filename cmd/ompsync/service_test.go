package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"howett.net/plist"

	"github.com/ompsync/ompsync/service"
)

// testBinary is what `service` commands put in the unit: this test binary.
func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, err = filepath.EvalSymlinks(exe)
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// otherStderr is stderr without the warning that the test binary, which
// the unit names, is a temporary build.
func otherStderr(r result) string {
	var keep []string
	for _, l := range strings.SplitAfter(r.stderr, "\n") {
		if !strings.Contains(l, "is a temporary build") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

// serviceEnv is a home with a config file, the way a user installs the service.
func serviceEnv(t *testing.T) (testEnv, string, string) {
	t.Helper()
	env, home := newEnv(t)
	env["USER"] = "alice"
	cfg := filepath.Join(home, "my config", "ompsync.yaml")
	writeFile(t, cfg, "remote: s3://bucket/omp\n", 0o600)
	return env, home, cfg
}

func TestServiceUnit(t *testing.T) {
	env, home, cfg := serviceEnv(t)
	o := service.Options{Binary: testBinary(t), ConfigFile: cfg, Home: home}

	r := runWith(t, env, "--config", cfg, "service", "unit", "--systemd")
	want, err := service.Unit(o)
	if err != nil {
		t.Fatal(err)
	}
	if r.code != 0 || r.stdout != string(want) || otherStderr(r) != "" {
		t.Errorf("service unit --systemd: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	if !strings.Contains(r.stdout, `--config "`+cfg+`"`) {
		t.Errorf("unit does not pass the config file in use:\n%s", r.stdout)
	}

	// The config file found through OMPSYNC_CONFIG is passed explicitly too.
	env["OMPSYNC_CONFIG"] = cfg
	r = runWith(t, env, "service", "unit", "--launchd")
	if r.code != 0 || otherStderr(r) != "" {
		t.Fatalf("service unit --launchd: exit %d, stderr %q", r.code, r.stderr)
	}
	var p struct {
		Label             string
		ProgramArguments  []string
		StandardErrorPath string
	}
	if _, err := plist.Unmarshal([]byte(r.stdout), &p); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(p.ProgramArguments, " | "), o.Binary+" | agent | --config | "+cfg; got != want {
		t.Errorf("ProgramArguments %s, want %s", got, want)
	}
	if want := filepath.Join(home, "Library/Logs/ompsync.log"); p.Label != service.Label || p.StandardErrorPath != want {
		t.Errorf("Label %q, StandardErrorPath %q; want %q, %q", p.Label, p.StandardErrorPath, service.Label, want)
	}
}

func TestServiceUnitUsage(t *testing.T) {
	env, _, _ := serviceEnv(t)
	for _, args := range [][]string{
		{"service", "unit"},
		{"service", "unit", "--systemd", "--launchd"},
	} {
		r := runWith(t, env, args...)
		if r.code != 2 || r.stdout != "" {
			t.Errorf("%q: exit %d, stdout %q; want exit 2 and no output", args, r.code, r.stdout)
		}
		if msg := oneErrorLine(t, r); !strings.Contains(msg, "give one of --systemd or --launchd") {
			t.Errorf("%q: stderr %q", args, msg)
		}
	}
}

// Settings from the environment work in the shell but not in the service.
func TestServiceWarnsAboutEnvironment(t *testing.T) {
	env, _, cfg := serviceEnv(t)
	env["OMPSYNC_REMOTE"] = "s3://other-bucket/omp"
	env["AWS_SECRET_ACCESS_KEY"] = "do-not-print-me"
	r := runWith(t, env, "--config", cfg, "service", "unit", "--systemd")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, w := range []string{
		"ompsync: warning: remote is set by OMPSYNC_REMOTE, which the service will not see",
		"ompsync: warning: AWS_SECRET_ACCESS_KEY is set in this shell, but the service will not see it",
	} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "do-not-print-me") || strings.Contains(r.stdout, "do-not-print-me") {
		t.Error("a secret's value was printed")
	}
}

func TestServiceInstallDryRun(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the dry run prints the systemd plan on Linux only")
	}
	env, home, cfg := serviceEnv(t)
	plan := func(binary string) string {
		unit, err := service.Unit(service.Options{Binary: binary, ConfigFile: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return "Would write " + home + "/.config/systemd/user/ompsync.service (mode 0644):\n" + string(unit) +
			"Would run: systemctl --user daemon-reload\n" +
			"Would run: systemctl --user enable --now ompsync.service\n"
	}

	// An installed binary: the plan, exit 0. It is a link to the built one
	// in a folder that is not the temp dir (TMPDIR points elsewhere).
	bin := filepath.Join(home, "bin", "ompsync")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(ompsyncBin, bin); err != nil { // both under the temp dir
		t.Fatal(err)
	}
	tmp := filepath.Join(home, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "--config", cfg, "service", "install", "--dry-run")
	cmd.Env = append(env.environ(), "TMPDIR="+tmp)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if want := plan(bin); err != nil || stdout.String() != want || stderr.Len() != 0 {
		t.Errorf("installed binary: %v, stderr %q, stdout:\n%s\nwant:\n%s", err, stderr.String(), stdout.String(), want)
	}

	// A temporary build: the same plan, then exit 1 saying the install
	// would refuse, as the install itself does.
	r := runWith(t, env, "--config", cfg, "service", "install", "--dry-run")
	if want := plan(testBinary(t)); r.code != 1 || r.stdout != want {
		t.Errorf("temporary build: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	if msg := oneErrorLine(t, r); !strings.Contains(msg, "service install would refuse: "+testBinary(t)+" is a temporary build") {
		t.Errorf("temporary build: stderr %q", msg)
	}
	if _, err := os.Stat(filepath.Join(home, ".config", "systemd")); !os.IsNotExist(err) {
		t.Errorf("dry run created files: %v", err)
	}

	r = runWith(t, env, "service", "uninstall", "--dry-run")
	if want := "The ompsync service is not installed: " + home + "/.config/systemd/user/ompsync.service does not exist.\n"; r.code != 0 || r.stdout != want {
		t.Errorf("uninstall when not installed: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	r = runWith(t, env, "service", "status")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Installed: no (") {
		t.Errorf("status when not installed: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// A `go run` binary is gone after the run: a service must not point at it.
func TestServiceInstallRefusesTemporaryBinary(t *testing.T) {
	if !temporaryBinary(testBinary(t)) {
		// Installing for real would run systemctl: only test what refuses.
		t.Skip("this test binary is not in a temporary build folder")
	}
	env, home, cfg := serviceEnv(t)
	r := runWith(t, env, "--config", cfg, "service", "install")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1; stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if msg := oneErrorLine(t, r); !strings.Contains(msg, "is a temporary build") {
		t.Errorf("stderr %q", msg)
	}
	if _, err := os.Stat(filepath.Join(home, ".config", "systemd")); !os.IsNotExist(err) {
		t.Errorf("a refused install created files: %v", err)
	}
}

func TestTemporaryBinary(t *testing.T) {
	for path, want := range map[string]bool{
		"/usr/local/bin/ompsync":                     false,
		"/home/alice/go/bin/ompsync":                 false,
		"/home/alice/.cache/go-build/x/exe/ompsync":  true,
		filepath.Join(os.TempDir(), "ompsync"):       true,
		filepath.Join(os.TempDir()+"x", "ompsync"):   false,
		filepath.Join(os.TempDir(), "a", "b", "bin"): true,
	} {
		if got := temporaryBinary(path); got != want {
			t.Errorf("temporaryBinary(%s) = %v, want %v", path, got, want)
		}
	}
}
