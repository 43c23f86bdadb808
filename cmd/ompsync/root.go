package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/remote"
)

// Exit codes, the same for every command (README, "Exit status").
const (
	exitOK          = 0   // all done, and what was asked for is safe
	exitFailure     = 1   // something failed or is not safe
	exitUsage       = 2   // unknown command or flag, wrong arguments, bad flag value
	exitInterrupted = 130 // SIGINT or SIGTERM stopped the work (128 + SIGINT)
)

// app carries what every command needs. The configuration is loaded lazily,
// by a.config(), so commands that need none (version, config init) work even
// when the configuration is broken.
type app struct {
	stdout, stderr io.Writer
	env            func(string) (string, bool)
	envNames       []string // the variables set, for config.LoadOptions.EnvNames
	// stdin is read only to ask which session an ambiguous prefix means,
	// and only when interactive (a terminal someone answers at).
	stdin       io.Reader
	interactive bool
	hostname    func() (string, error) // nil means os.Hostname

	quiet      bool           // -q: errors only
	meter      *meter         // what this run asked of the remote (meters())
	configFile string         // --config
	cmd        *cobra.Command // the command running; its flags override the configuration
	cfg        *config.Config
	cfgErr     error
}

// loadOptions are the inputs of config.Load for the running command.
func (a *app) loadOptions() config.LoadOptions {
	var flags *pflag.FlagSet
	if a.cmd != nil {
		flags = a.cmd.Flags() // includes the inherited global flags
	}
	return config.LoadOptions{ConfigFile: a.configFile, Flags: flags, LookupEnv: a.env, EnvNames: a.envNames, Hostname: a.hostname}
}

// config loads the configuration once. A bad value given as a flag is a
// usage error; other configuration errors are failures.
func (a *app) config() (*config.Config, error) {
	if a.cfg != nil || a.cfgErr != nil {
		return a.cfg, a.cfgErr
	}
	cfg, err := config.Load(a.loadOptions())
	if err != nil {
		var ke *config.KeyError
		if errors.As(err, &ke) && ke.Source.Kind == config.FromFlag {
			err = &usageError{cmd: a.cmd, err: err}
		}
		a.cfgErr = err
		return nil, err
	}
	under(a.stderr, "ompsync: warning: ", cfg.Warnings())
	a.cfg = cfg
	return cfg, nil
}

// usageError is a mistake in how ompsync was called: exit code 2, and the
// message points at the command's help.
type usageError struct {
	cmd *cobra.Command // whose --help to point at; nil means the root
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usage error of the running command: execute points at
// its help.
func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

const rootLong = `ompsync backs up the session files of coding agents (omp, pi, Claude Code and
Codex: JSON Lines under ~/.omp/agent/sessions, ~/.pi/agent/sessions,
~/.claude/projects and ~/.codex/sessions) to an S3 bucket or a local folder. A
session file almost only grows, so ompsync uploads just the new lines;
rewrites, moves and deletes are kept as well, never silently lost. It
restores a session on any machine, merging with the local copy without losing
a line, can pull the sessions of other machines (sync), and installs itself as
a user service.

Configuration comes from these sources, strongest first:
  flags        --remote s3://bucket/prefix (the global flags below; they work
               before or after the command name)
  environment  OMPSYNC_ + the key upper-cased, dots as underscores:
               OMPSYNC_REMOTE, OMPSYNC_S3_ENDPOINT, OMPSYNC_LOG_LEVEL;
               list keys take a comma-separated list
  config file  --config, else $OMPSYNC_CONFIG, else
               $XDG_CONFIG_HOME/ompsync/config.yaml (~/.config/ompsync/config.yaml)
  defaults     back up every agent whose folder exists (the agents key
               chooses) to ~/.local/share/ompsync/remote

'ompsync config show' prints every key, its value and where it came from;
'ompsync config init' writes a commented config file to start from.`

const rootExample = `  # write a starter config file, edit it, then check what is in effect
  ompsync config init
  ompsync config show

  # back up to S3; the keys come from the environment
  export AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=...
  ompsync --remote s3://my-bucket/omp agent

  # the same settings, with a debug log, as environment variables
  OMPSYNC_REMOTE=s3://my-bucket/omp OMPSYNC_LOG_LEVEL=debug ompsync agent`

// newRootCmd builds the command tree. To add a command, write
// newXxxCmd(a *app) *cobra.Command in its own file and add it to the list
// below. Its RunE calls a.config() for the configuration and returns an
// error (usagef for a usage mistake); commands that take arguments must set
// Args, as the default here is none, and name them in Use, which says what
// the command takes when they are wrong.
func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "ompsync",
		Short:         "Back up, restore and sync omp coding-agent sessions",
		Long:          rootLong,
		Example:       rootExample,
		Version:       versionLine(readBuildInfo()),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("ompsync {{.Version}}\n")
	root.SetFlagErrorFunc(verboseHint)

	pf := root.PersistentFlags()
	pf.StringVar(&a.configFile, "config", "", "config file (default $OMPSYNC_CONFIG, else ~/.config/ompsync/config.yaml)")
	pf.BoolVarP(&a.quiet, "quiet", "q", false, "print errors only: no progress, summaries or logs below level error (-v is --version)")
	// the configuration keys every command takes as a flag
	config.AddFlags(pf, "agent_dir", "remote", "state_dir", "machine", "log.level", "log.format")

	root.AddCommand(
		newConfigCmd(a),
		newVersionCmd(a),
		newServiceCmd(a),
		newAgentCmd(a),
		newStatusCmd(a),
		newLsCmd(a), newRestoreCmd(a), newVerifyCmd(a),
		newHistoryCmd(a), newCatCmd(a), newGrepCmd(a), newMCPCmd(a),
		newKeygenCmd(a),
		newRekeyCmd(a),
		newCompactCmd(a), newPruneCmd(a),
		newManCmd(a),
	)
	builtins(root)
	prepare(a, root)
	return root
}

// prepare fits every command in the tree to the app: RunE records the
// running command (for a.config; an error once it is set is the command's
// own, not a usage error cobra found); a command with subcommands but no
// code of its own prints its help, and refuses an unknown subcommand
// instead of ignoring it. Commands use RunE alone: no other hook is
// wrapped.
func prepare(a *app, c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		c.Args = unknownSubcommand
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	} else {
		check := c.Args
		if check == nil {
			check = cobra.NoArgs
		}
		c.Args = func(cmd *cobra.Command, args []string) error {
			return argsError(cmd, args, check(cmd, args))
		}
	}
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			a.cmd = cmd
			return run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		prepare(a, sub)
	}
}

// argsError says what cmd takes, from its Use line, when err is cobra's
// own account of wrong arguments ("accepts 1 arg(s), received 0" names
// neither). A command's usage error already says it.
func argsError(cmd *cobra.Command, args []string, err error) error {
	var ue *usageError
	if err == nil || errors.As(err, &ue) {
		return err
	}
	var takes, gloss []string
	for _, w := range strings.Fields(cmd.Use)[1:] {
		if strings.HasPrefix(w, "-") || w == "|" {
			break // the flags it takes instead
		}
		takes = append(takes, w)
		switch strings.Trim(w, "[].") {
		case "ID-PREFIX":
			gloss = append(gloss, "ID-PREFIX: the first characters of a session id, as 'ompsync ls' shows them")
		case "PATTERN":
			gloss = append(gloss, "PATTERN: the text to search for")
		}
	}
	got := "none"
	if len(args) > 0 {
		got = fmt.Sprintf("%q", args)
	}
	msg := fmt.Sprintf("%s takes %s, got %s", cmd.CommandPath(), cmp.Or(strings.Join(takes, " "), "no arguments"), got)
	if len(gloss) > 0 {
		msg += " (" + strings.Join(gloss, "; ") + ")"
	}
	return &usageError{cmd: cmd, err: errors.New(msg)}
}

// verboseHint points a -v or --verbose, which other tools have for more
// output, at the log level, which is ompsync's.
func verboseHint(_ *cobra.Command, err error) error {
	if msg := err.Error(); strings.HasPrefix(msg, "unknown shorthand flag: 'v'") || msg == "unknown flag: --verbose" {
		return fmt.Errorf("%w; for more output use --log-level debug", err)
	}
	return err
}

// builtins adds cobra's help and completion commands now, not as it runs,
// so that prepare fits them too (an unknown shell or help topic is a usage
// error, not help and exit 0) and unknownBeforeHelp finds them.
func builtins(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	if help, _, err := root.Find([]string{"help"}); err == nil {
		help.Args = func(cmd *cobra.Command, args []string) error {
			c, rest, _ := cmd.Root().Find(args)
			if len(rest) == 0 {
				return nil
			}
			return &usageError{cmd: c, err: unknownSubcommand(c, rest)}
		}
	}
}

func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default, set only on its legacy path
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return errors.New(msg)
}

// run is main without the process: tests call it in-process. environ is
// the environment as os.Environ gives it.
func run(args []string, stdout, stderr io.Writer, environ []string) int {
	vars := make(map[string]string, len(environ))
	names := make([]string, 0, len(environ))
	for _, kv := range environ {
		if name, value, ok := strings.Cut(kv, "="); ok {
			if _, dup := vars[name]; dup {
				continue // the first counts, as for os.Getenv
			}
			vars[name] = value
			names = append(names, name)
		}
	}
	env := func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A prompt needs someone to read it (stderr) and answer (stdin).
	errTTY, _ := stderr.(*os.File)
	interactive := errTTY != nil && term.IsTerminal(int(errTTY.Fd())) && term.IsTerminal(int(os.Stdin.Fd()))
	a := &app{stdout: stdout, stderr: stderr, env: env, envNames: names, stdin: os.Stdin, interactive: interactive}
	return a.execute(ctx, newRootCmd(a), args)
}

// machineBeforeCommand refuses a --machine given before the name of a
// command that has a --machine of its own, which picks a machine's copies:
// cobra hands it to the command's flag, so "ompsync --machine desk restore
// --all" restored desk's sessions alone where the user named this machine.
func machineBeforeCommand(root *cobra.Command, args []string) error {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == root || cmd.LocalNonPersistentFlags().Lookup("machine") == nil {
		return nil
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == cmd.Name() || slices.Contains(cmd.Aliases, arg) || arg == "--":
			return nil // the command's own flags follow
		case arg == "--machine" || strings.HasPrefix(arg, "--machine="):
			return &usageError{cmd: cmd, err: fmt.Errorf("--machine before %q names this machine, but %s's own --machine picks a machine's copies: "+
				"put it after %q to pick copies, or set machine (OMPSYNC_MACHINE, the config file) to name this machine",
				cmd.Name(), cmd.Name(), cmd.Name())}
		case strings.HasPrefix(arg, "--") && !strings.Contains(arg, "="):
			if f := root.PersistentFlags().Lookup(arg[2:]); f != nil && f.NoOptDefVal == "" {
				i++ // its value
			}
		}
	}
	return nil
}

// unknownBeforeHelp: cobra answers "ompsync mcp --help" with the root's
// help and exit 0, as if the command existed. An unknown command is a
// usage error whatever flags follow it.
func unknownBeforeHelp(root *cobra.Command, args []string) error {
	if !slices.Contains(args, "--help") && !slices.Contains(args, "-h") {
		return nil
	}
	c, rest, err := root.Find(args)
	if err != nil || !c.HasAvailableSubCommands() {
		return nil
	}
	fs := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.AddFlagSet(c.Flags())
	fs.AddFlagSet(c.InheritedFlags())
	fs.ParseErrorsAllowlist.UnknownFlags = true
	if fs.Lookup("help") == nil {
		fs.BoolP("help", "h", false, "") // cobra adds its own only as it runs
	}
	if fs.Parse(rest) != nil || len(fs.Args()) == 0 {
		return nil
	}
	return &usageError{cmd: c, err: unknownSubcommand(c, fs.Args())}
}

// execute runs the command line, prints any error as one line, and is the
// exit status.
func (a *app) execute(ctx context.Context, root *cobra.Command, args []string) int {
	root.SetArgs(args)
	var cmd *cobra.Command
	err := machineBeforeCommand(root, args)
	if err == nil {
		err = unknownBeforeHelp(root, args)
	}
	if err == nil {
		cmd, err = root.ExecuteContextC(ctx)
	}
	if err == nil {
		return exitOK
	}
	msg, code := a.failure(ctx, cmp.Or(cmd, root), err)
	fmt.Fprintf(a.stderr, "ompsync: %s\n", oneLine(msg))
	return code
}

// failure is what the user reads for err, which stopped cmd, and the exit
// status. A setup error says all there is to say (what to change), so the
// operations it broke off are left out.
func (a *app) failure(ctx context.Context, cmd *cobra.Command, err error) (string, int) {
	var ue *usageError
	var ie *interruptedError
	switch {
	case errors.As(err, &ue):
		cmd = cmp.Or(ue.cmd, cmd)
	case a.cmd == nil:
		// Everything cobra itself returns, before a command's code runs
		// (unknown command or flag, bad flag value, wrong arguments,
		// conflicting flags), is a usage error.
	case ctx.Err() != nil && errors.As(err, &ie):
		return ie.Error(), exitInterrupted
	case ctx.Err() != nil:
		// Stopped by a signal: what failed is the stop, whatever error
		// it broke off with.
		return "interrupted before the work was done: run the command again to finish (" + err.Error() + ")", exitInterrupted
	default:
		if msg, listed := explainAmbiguous(a.stderr, err); listed {
			return msg, exitFailure
		}
		if se, ok := remote.Setup(err); ok {
			if a.cfg != nil {
				return a.cfg.Remote + ": " + se.Error(), exitFailure
			}
			return se.Error(), exitFailure
		}
		if remote.Unanswered(err) {
			return err.Error() + "; the remote did not answer: check the network, the remote's address and that it is up, then run the command again", exitFailure
		}
		return err.Error(), exitFailure
	}
	return fmt.Sprintf("%s; see '%s --help'", oneLine(err.Error()), cmd.CommandPath()), exitUsage
}

// interruptedError is a command's account of what it did before a signal
// stopped it.
type interruptedError struct{ msg string }

func (e *interruptedError) Error() string { return "interrupted: " + e.msg }

// oneLine keeps a message on one line, as scripts and logs expect.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// idPrefixes checks the session id prefixes among args (from index from on,
// after a command's other arguments) before next: an empty one would match
// any session.
func idPrefixes(from int, next cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		for i, a := range args {
			if i >= from && strings.TrimSpace(a) == "" {
				return usagef("an empty session id prefix would match any session: give the first characters of an id (see 'ompsync ls')")
			}
		}
		return next(cmd, args)
	}
}
