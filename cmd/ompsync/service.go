package main

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/service"
)

func newServiceCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "service",
		Short: "Run the agent as a user service (systemd on Linux, launchd on macOS)",
		Long: `Run "ompsync agent" as a user service: started at login, restarted when it
fails, logging to the journal (systemd) or ~/Library/Logs/ompsync.log (launchd).

The service runs this ompsync binary with the config file in use now. It does
not see your shell's environment or the flags you give here: put every setting
the agent needs in the config file ('ompsync config init' writes one).
See docs/SERVICE.md for logs, restarts and reloading the config.`,
	}
	c.AddCommand(newServiceUnitCmd(a), newServiceInstallCmd(a), newServiceUninstallCmd(a), newServiceStatusCmd(a))
	return c
}

func newServiceUnitCmd(a *app) *cobra.Command {
	var systemd, launchd bool
	c := &cobra.Command{
		Use:   "unit --systemd | --launchd",
		Short: "Print the systemd unit or launchd plist that install would write",
		Long: `Print the systemd user unit or the launchd agent plist, filled in for this
binary and the config file in use, to standard output. Use it to review the
file, or to install it by hand or with your own tooling.`,
		Example: `  ompsync service unit --systemd > ~/.config/systemd/user/ompsync.service
  ompsync service unit --launchd`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if systemd == launchd {
				return usagef("give one of --systemd or --launchd")
			}
			o, err := serviceOptionsWithConfig(a)
			if err != nil {
				return err
			}
			if msg := temporaryBinaryProblem(o.Binary); msg != "" {
				fmt.Fprintf(a.stderr, "ompsync: warning: %s\n", msg)
			}
			render := service.Unit
			if launchd {
				render = service.Plist
			}
			b, err := render(o)
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(b)
			return err
		},
	}
	c.Flags().BoolVar(&systemd, "systemd", false, "print the systemd user unit ("+service.UnitName+")")
	c.Flags().BoolVar(&launchd, "launchd", false, "print the launchd agent ("+service.Label+".plist)")
	return c
}

const serviceInstallLong = `Install the agent as a user service and start it now and at every login.

Linux: writes ~/.config/systemd/user/ompsync.service, then runs
  systemctl --user daemon-reload
  systemctl --user enable --now ompsync.service
macOS: writes ~/Library/LaunchAgents/io.github.ompsync.agent.plist, then runs
  launchctl bootout, enable and bootstrap for gui/<uid>

Running it again is safe: a changed file is replaced and the agent restarted,
an identical one is left alone. Run it again after moving the binary.`

func newServiceInstallCmd(a *app) *cobra.Command {
	var dryRun bool
	c := &cobra.Command{
		Use:   "install",
		Short: "Install the agent as a user service and start it",
		Long:  serviceInstallLong,
		Example: `  ompsync service install --dry-run
  ompsync --config ~/ompsync.yaml service install`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := serviceOptionsWithConfig(a)
			if err != nil {
				return err
			}
			problem := temporaryBinaryProblem(o.Binary)
			if problem != "" && !dryRun {
				return fmt.Errorf("service install: %s", problem)
			}
			m, err := service.NewManager(runtime.GOOS, o, service.ExecRunner{}, a.stdout)
			if err != nil {
				return err
			}
			if err := m.Install(cmd.Context(), dryRun); err != nil {
				return err
			}
			if problem != "" {
				// The plan is printed, but a dry run answers whether the
				// install would work: it would not.
				return fmt.Errorf("service install would refuse: %s", problem)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the file and the commands, change nothing")
	return c
}

func newServiceUninstallCmd(a *app) *cobra.Command {
	var dryRun bool
	c := &cobra.Command{
		Use:   "uninstall",
		Short: "Stop the agent's service and remove it",
		Long: `Stop the agent's service, disable it and remove its unit or plist. Your
config, the agent's state and your backups are untouched. Nothing installed is
not an error.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// No config: uninstalling must work while the config is broken.
			o, err := serviceOptions(a)
			if err != nil {
				return err
			}
			m, err := service.NewManager(runtime.GOOS, o, service.ExecRunner{}, a.stdout)
			if err != nil {
				return err
			}
			return m.Uninstall(cmd.Context(), dryRun)
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the commands, change nothing")
	return c
}

func newServiceStatusCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show whether the service is installed, enabled and running, and its last log lines",
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := serviceOptions(a)
			if err != nil {
				return err
			}
			// Status is what one runs when the agent fails, often because of
			// its config: report that, then carry on.
			if err := addConfig(a, &o, false); err != nil {
				fmt.Fprintf(a.stderr, "ompsync: warning: the agent cannot start with this configuration: %s\n", oneLine(err.Error()))
			}
			m, err := service.NewManager(runtime.GOOS, o, service.ExecRunner{}, a.stdout)
			if err != nil {
				return err
			}
			return m.Status(cmd.Context())
		},
	}
}

// serviceOptions describes the agent the service runs: this binary, for
// this user.
func serviceOptions(a *app) (service.Options, error) {
	var o service.Options
	exe, err := os.Executable()
	if err != nil {
		return o, fmt.Errorf("find the ompsync binary: %w", err)
	}
	if o.Binary, err = filepath.EvalSymlinks(exe); err != nil {
		return o, fmt.Errorf("find the ompsync binary: %w", err)
	}
	if o.Home, err = homeDir(a); err != nil {
		return o, err
	}
	o.UID = os.Getuid()
	if u, ok := a.env("USER"); ok && u != "" {
		o.User = u
	} else if u, err := user.Current(); err == nil {
		o.User = u.Username
	}
	return o, nil
}

// addConfig loads the configuration and has the service use its file. With
// warn, it names the settings that come from the environment or flags, which
// the service will not have.
func addConfig(a *app, o *service.Options, warn bool) error {
	cfg, err := a.config()
	if err != nil {
		return err
	}
	o.ConfigFile = cfg.File
	if !warn {
		return nil
	}
	for _, s := range cfg.Settings() {
		switch s.Source.Kind {
		case config.FromEnv, config.FromFlag:
			fmt.Fprintf(a.stderr, "ompsync: warning: %s is set by %s, which the service will not see; put it in the config file\n",
				s.Key, s.Source.Name)
		}
	}
	for _, name := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"} {
		if v, ok := a.env(name); ok && v != "" {
			fmt.Fprintf(a.stderr, "ompsync: warning: %s is set in this shell, but the service will not see it; "+
				"use ~/.aws/credentials or the config file\n", name)
		}
	}
	return nil
}

// serviceOptionsWithConfig is serviceOptions with the config file, warning
// about settings the service will not see.
func serviceOptionsWithConfig(a *app) (service.Options, error) {
	o, err := serviceOptions(a)
	if err != nil {
		return o, err
	}
	return o, addConfig(a, &o, true)
}

// homeDir is $HOME, else the account database's home.
func homeDir(a *app) (string, error) {
	if h, ok := a.env("HOME"); ok && filepath.IsAbs(h) {
		return h, nil
	}
	u, err := user.Current()
	if err != nil || u.HomeDir == "" {
		return "", fmt.Errorf("cannot find the home folder: set HOME")
	}
	return u.HomeDir, nil
}

// temporaryBinaryProblem explains why a service must not run path, or
// returns "".
func temporaryBinaryProblem(path string) string {
	if !temporaryBinary(path) {
		return ""
	}
	return fmt.Sprintf("%s is a temporary build (go run, or a file in %s) that will disappear; "+
		"install ompsync (go install, or copy it to a permanent place) and run that one", path, os.TempDir())
}

// temporaryBinary reports whether path is a build that will not outlive the
// session: `go run` builds in a go-build folder under the temp dir.
func temporaryBinary(path string) bool {
	if slices.ContainsFunc(strings.Split(filepath.ToSlash(path), "/"), func(e string) bool {
		return strings.HasPrefix(e, "go-build")
	}) {
		return true
	}
	return within(path, os.TempDir())
}
