package config

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/safename"
)

// environ is the process environment as Load sees it: injected in tests so
// they never touch the real one.
type environ struct {
	lookup   func(string) (string, bool)
	hostname func() (string, error)
	// from is the variable the last default was taken from ("" for none),
	// so that config show can say where a default came from.
	from string
}

// get returns a variable's value; an empty variable counts as unset, so
// `OMPSYNC_REMOTE= ompsync ...` falls back to the file and the default.
func (e *environ) get(name string) (string, bool) {
	v, ok := e.lookup(name)
	return v, ok && v != ""
}

// defaultFrom is get for a default taken from another program's variable
// ($AWS_CA_BUNDLE, $CLAUDE_CONFIG_DIR): it records the variable in e.from.
func (e *environ) defaultFrom(name string) (string, bool) {
	v, ok := e.get(name)
	if ok {
		e.from = "$" + name
	}
	return v, ok
}

// home returns the user's home folder: $HOME, else the account database.
func (e *environ) home() (string, error) {
	if h, ok := e.get("HOME"); ok {
		return h, nil
	}
	u, err := user.Current()
	if err != nil || u.HomeDir == "" {
		return "", errors.New("cannot find the home folder: set HOME")
	}
	return u.HomeDir, nil
}

// xdg returns $name if it holds an absolute path (the XDG spec says to
// ignore relative ones), else "" so callers fall back to a ~ default.
func (e *environ) xdg(name string) string {
	if v, ok := e.get(name); ok && filepath.IsAbs(v) {
		e.from = "$" + name
		return v
	}
	return ""
}

// expand turns a leading ~ or ~/ into the home folder and makes a relative
// path absolute against the current folder.
func (e *environ) expand(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		h, err := e.home()
		if err != nil {
			return "", err
		}
		p = filepath.Join(h, p[1:])
	} else if strings.HasPrefix(p, "~") {
		return "", fmt.Errorf("%q: only ~ and ~/ are expanded, not ~user; write the full path", p)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%q: %w", p, err)
	}
	return abs, nil
}

// xdgDefault returns a default of $xdgVar/sub, or ~/fallback/sub when the
// variable is unset.
func xdgDefault(xdgVar, fallback, sub string) func(*environ) (string, error) {
	return func(e *environ) (string, error) {
		if base := e.xdg(xdgVar); base != "" {
			return filepath.Join(base, sub), nil
		}
		return "~/" + fallback + "/" + sub, nil
	}
}

// defaultAgentDir is where omp keeps its sessions: $PI_CODING_AGENT_DIR,
// else $XDG_DATA_HOME/omp once that folder exists (omp then keeps
// sessions/ and blobs/ directly under it, with no agent/ level), else
// ~/.omp/agent.
func defaultAgentDir(e *environ) (string, error) {
	if d, ok := e.defaultFrom("PI_CODING_AGENT_DIR"); ok {
		return d, nil
	}
	if base := e.xdg("XDG_DATA_HOME"); base != "" {
		if fi, err := os.Stat(filepath.Join(base, "omp")); err == nil && fi.IsDir() {
			return filepath.Join(base, "omp"), nil
		}
	}
	return "~/.omp/agent", nil
}

// defaultRemote is a folder beside the user's other data; a URL cannot hold ~
// so the home folder is spelt out.
func defaultRemote(e *environ) (string, error) {
	base := e.xdg("XDG_DATA_HOME")
	if base == "" {
		h, err := e.home()
		if err != nil {
			return "", err
		}
		base = filepath.Join(h, ".local", "share")
	}
	return remote.Location{Scheme: "file", Dir: filepath.Join(base, "ompsync", "remote")}.String(), nil
}

// defaultMachine is the host name with every byte a machine name cannot hold
// turned into '-', cut to 64 bytes.
func defaultMachine(e *environ) (string, error) {
	h, err := e.hostname()
	if err != nil {
		return "", fmt.Errorf("cannot read the host name (%v): set machine", err)
	}
	b := []byte(strings.TrimSpace(h))
	for i, c := range b {
		if !safename.MachineByte(c) {
			b[i] = '-'
		}
	}
	m := string(b[:min(len(b), 64)])
	if !safename.Machine(m) {
		return "", fmt.Errorf("host name %q gives no usable machine name: set machine to %s", h, safename.MachineRule)
	}
	return m, nil
}

// FilePath returns the configuration file Load reads: LoadOptions.ConfigFile,
// else $OMPSYNC_CONFIG, else $XDG_CONFIG_HOME/ompsync/config.yaml
// (~/.config/ompsync/config.yaml). explicit is false for the last, whose
// absence is not an error.
func FilePath(opts LoadOptions) (path string, explicit bool, err error) {
	e := opts.environ()
	p, explicit := opts.ConfigFile, true
	if p == "" {
		p, explicit = e.get("OMPSYNC_CONFIG")
	}
	if !explicit {
		p, _ = xdgDefault("XDG_CONFIG_HOME", ".config", "ompsync/config.yaml")(e)
	}
	p, err = e.expand(p)
	if err != nil {
		return "", false, fmt.Errorf("config file %w", err)
	}
	return p, explicit, nil
}

// envNames are the names of the variables to check (LoadOptions.EnvNames).
func (o LoadOptions) envNames() []string {
	if o.EnvNames != nil || o.LookupEnv != nil {
		return o.EnvNames
	}
	var names []string
	for _, kv := range os.Environ() {
		if name, _, ok := strings.Cut(kv, "="); ok {
			names = append(names, name)
		}
	}
	return names
}

// checkEnvNames refuses a set OMPSYNC_ variable that names no setting: with
// a typo (OMPSYNC_REMOT) the user's value would be ignored and the backup
// go where they did not mean, as with a typo in the config file.
func checkEnvNames(names []string, e *environ) error {
	for _, name := range names {
		setting := slices.ContainsFunc(keys, func(k key) bool { return EnvVar(k.name) == name })
		if !strings.HasPrefix(name, "OMPSYNC_") || setting || toolVariable(name) {
			continue
		}
		if _, set := e.get(name); !set {
			continue // empty counts as unset, as for the settings' own
		}
		msg := fmt.Sprintf("environment variable %s is set, but no setting has that name", name)
		if s := suggest(strings.ToLower(strings.TrimPrefix(name, "OMPSYNC_"))); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", EnvVar(s))
		}
		return fmt.Errorf("%s; correct or unset it (docs/CONFIG.md lists every setting and its variable)", msg)
	}
	return nil
}

// toolVariable reports whether an OMPSYNC_ variable is one that is no
// setting: the config file's path, and those of ompsync's own tests,
// benchmarks and CI.
func toolVariable(name string) bool {
	return slices.Contains([]string{"OMPSYNC_CONFIG", "OMPSYNC_OMP_CACHE", "OMPSYNC_CLIENT_CACHE", "OMPSYNC_CORPUS"}, name) ||
		slices.ContainsFunc([]string{"OMPSYNC_TEST_", "OMPSYNC_BENCH_", "OMPSYNC_REMOTETEST_"}, func(p string) bool { return strings.HasPrefix(name, p) })
}

func (o LoadOptions) environ() *environ {
	e := &environ{lookup: o.LookupEnv, hostname: o.Hostname}
	if e.lookup == nil {
		e.lookup = os.LookupEnv
	}
	if e.hostname == nil {
		e.hostname = os.Hostname
	}
	return e
}
