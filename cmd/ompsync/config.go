package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ompsync/ompsync/atomicfile"
	"github.com/ompsync/ompsync/config"
)

func newConfigCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "config",
		Short: "Show the configuration in effect, or write a starter config file",
		Long: `Show the configuration in effect, or write a starter config file.

Every key can be set in the config file, in the environment (OMPSYNC_ + the key
upper-cased with dots as underscores) and, for the global flags, on the command
line; flags win over the environment, which wins over the file.`,
	}
	c.AddCommand(newConfigShowCmd(a), newConfigInitCmd(a), newConfigDocCmd(a))
	return c
}

func newConfigShowCmd(a *app) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "show",
		Short: "Print every key with its value and where the value came from",
		Long: `Print every configuration key with its value and its source: a flag, an
environment variable, the config file (with the line), or the default.
Secrets are printed as <redacted>.`,
		Example: `  ompsync config show
  ompsync --remote s3://bucket/omp config show --json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			if asJSON {
				return showJSON(a, cfg)
			}
			return showText(a, cfg)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON: {file, settings: [{key, env, value, source, from}]}")
	return c
}

func showText(a *app, cfg *config.Config) error {
	if cfg.File != "" {
		fmt.Fprintf(a.stdout, "# config file: %s\n", cfg.File)
	} else if p, _, err := config.FilePath(a.loadOptions()); err == nil {
		fmt.Fprintf(a.stdout, "# config file: none (%s does not exist)\n", p)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
	for _, s := range cfg.Settings() {
		v := cmp.Or(config.FormatValue(s.Value), `""`)
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Key, v, s.Source)
	}
	return tw.Flush()
}

type jsonSetting struct {
	Key    string `json:"key"`
	Env    string `json:"env"`
	Value  any    `json:"value"`
	Source string `json:"source"`         // default, file, env or flag
	From   string `json:"from,omitempty"` // the flag, variable, or file:line
}

func showJSON(a *app, cfg *config.Config) error {
	out := struct {
		File     string        `json:"file"`
		Settings []jsonSetting `json:"settings"`
	}{File: cfg.File}
	for _, s := range cfg.Settings() {
		v := s.Value
		if _, ok := v.(time.Duration); ok {
			v = config.FormatValue(v)
		}
		out.Settings = append(out.Settings, jsonSetting{
			Key: s.Key, Env: s.Env, Value: v, Source: s.Source.KindName(), From: s.Source.Where(),
		})
	}
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // print <redacted>, not \u003credacted\u003e
	return enc.Encode(out)
}

func newConfigInitCmd(a *app) *cobra.Command {
	var force bool
	var path string
	c := &cobra.Command{
		Use:   "init",
		Short: "Write a commented starter config file",
		Long: `Write a config file that sets every key to its default, each with a one-line
comment; a key whose default follows the machine (agent_dir and the other
agents' folders, remote, state_dir, machine, s3.ca_file) is shown commented
out, so that the file does not pin it. It goes to the config file in use (--config, else $OMPSYNC_CONFIG, else
~/.config/ompsync/config.yaml) or to --path. The file is private (mode 0600,
its folder 0700). An existing file is kept unless --force is given.`,
		Example: `  ompsync config init
  ompsync config init --path ./ompsync.yaml --force`,
		RunE: func(*cobra.Command, []string) error {
			return a.runConfigInit(path, force)
		},
	}
	c.Flags().BoolVar(&force, "force", false, "replace an existing file")
	c.Flags().StringVar(&path, "path", "", "write here instead of the config file in use")
	return c
}

// runConfigInit writes the starter config to path (or the file in use)
// and checks that it loads.
func (a *app) runConfigInit(path string, force bool) error {
	opts := a.loadOptions()
	opts.ConfigFile = cmp.Or(path, opts.ConfigFile)
	target, _, err := config.FilePath(opts)
	if err != nil {
		return err
	}
	data, err := config.Starter(opts)
	if err != nil {
		return fmt.Errorf("config init: %w", err)
	}
	if fi, err := os.Stat(target); err == nil && fi.IsDir() && force {
		return fmt.Errorf("%s is a folder; give a file path", target)
	}
	err = writePrivate(target, data, force)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists; keep it, or replace it with: %s", target, initForce(path, a.configFile))
	}
	if err != nil {
		return fmt.Errorf("write config file: %w", err)
	}
	if err := checkStarter(opts, target); err != nil {
		return err
	}
	fmt.Fprintf(a.report(), "wrote %s; edit it, then check it with 'ompsync config show'\n", target)
	return nil
}

// initForce is the command that replaces the file init refused: it names
// that file as the user did, else the hint replaces the default one.
func initForce(path, configFile string) string {
	switch {
	case path != "":
		return "ompsync config init --path " + shellQuote(path) + " --force"
	case configFile != "":
		return "ompsync --config " + shellQuote(configFile) + " config init --force"
	}
	return "ompsync config init --force"
}

// checkStarter loads the starter as written before the user is told it is
// ready, without the OMPSYNC_ variables, which are not in it.
func checkStarter(opts config.LoadOptions, target string) error {
	check := config.LoadOptions{ConfigFile: target, Hostname: opts.Hostname,
		LookupEnv: func(k string) (string, bool) {
			if strings.HasPrefix(k, "OMPSYNC_") {
				return "", false
			}
			return opts.LookupEnv(k) // the app's environment: always set
		}}
	if _, err := config.Load(check); err != nil {
		var ke *config.KeyError
		if errors.As(err, &ke) && ke.Source.Kind == config.FromDefault {
			// no default here (an odd host name): the user must fill it in
			return fmt.Errorf("wrote %s, but set %s in it first: %w", target, ke.Key, err)
		}
		return fmt.Errorf("wrote %s but it does not load (please report this): %w", target, err)
	}
	return nil
}

// writePrivate writes data to path with mode 0600, whole or not at all,
// creating its folder with mode 0700. Without replace an existing file is
// refused (fs.ErrExist); with it the file is replaced whole, so a failed
// write leaves the old one.
func writePrivate(path string, data []byte, replace bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create folder: %w", err)
	}
	return atomicfile.Write(path, data, atomicfile.Options{Exclusive: !replace})
}

// newConfigDocCmd writes the key table of docs/CONFIG.md from the key table in
// package config and the flags the commands define, so the document never
// drifts from the code (TestConfigDocUpToDate checks it).
func newConfigDocCmd(a *app) *cobra.Command {
	var write string
	c := &cobra.Command{
		Use:    "doc",
		Short:  "Print the configuration key table of docs/CONFIG.md",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			table := config.Doc(keyFlags(cmd.Root()))
			if write == "" {
				_, err := fmt.Fprint(a.stdout, table)
				return err
			}
			old, err := os.ReadFile(write)
			if err != nil {
				return fmt.Errorf("config doc: %w", err)
			}
			updated, err := config.ReplaceDoc(string(old), table)
			if err != nil {
				return fmt.Errorf("config doc: %s: %w", write, err)
			}
			return os.WriteFile(write, []byte(updated), 0o644)
		},
	}
	c.Flags().StringVar(&write, "write", "", "replace the generated table in this file (docs/CONFIG.md) instead of printing it")
	return c
}

// keyFlags returns, for a configuration key, the flag that sets it and the
// commands that take it, as the flag column of docs/CONFIG.md.
func keyFlags(root *cobra.Command) func(key string) string {
	return func(key string) string {
		name := config.FlagName(key)
		if root.PersistentFlags().Lookup(name) != nil {
			return "`--" + name + "` (every command)"
		}
		var cmds []string
		shown := name // as --help lists it: agent's --pull for --sync-pull
		var walk func(c *cobra.Command)
		walk = func(c *cobra.Command) {
			for _, sub := range c.Commands() {
				if f := sub.Flags().Lookup(name); f != nil {
					cmds, shown = append(cmds, strings.TrimPrefix(sub.CommandPath(), root.Name()+" ")), f.Name
				}
				walk(sub)
			}
		}
		walk(root)
		if len(cmds) == 0 {
			return ""
		}
		return "`--" + shown + "` (" + strings.Join(cmds, ", ") + ")"
	}
}
