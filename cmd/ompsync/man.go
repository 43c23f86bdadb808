package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
)

// newManCmd writes the man pages, generated from the commands' own help so
// that they say what --help says. Hidden: deploy/release.sh runs it for the
// packages; users read the pages with man(1).
func newManCmd(a *app) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:    "man --dir DIR",
		Short:  "Write the man pages (ompsync.1 and one per command) into a folder",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usagef("--dir is required: the folder to write the man pages into")
			}
			date, err := a.manDate()
			if err != nil {
				return err
			}
			return writeMan(cmd.Root(), dir, date)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the folder to write the pages into (created if missing)")
	return cmd
}

// manDate is the date on each page: the release's commit time when the
// release script sets SOURCE_DATE_EPOCH (reproducible packages), else
// today.
func (a *app) manDate() (time.Time, error) {
	s, ok := a.env("SOURCE_DATE_EPOCH")
	if !ok || s == "" {
		return time.Now(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, usagef("SOURCE_DATE_EPOCH=%q is not a number of seconds", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// writeMan writes the pages of root and its commands into dir.
func writeMan(root *cobra.Command, dir string, date time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	root.DisableAutoGenTag = true
	asWritten(root, map[*pflag.Flag]bool{})
	header := &doc.GenManHeader{Title: "OMPSYNC", Section: "1", Source: "ompsync " + readBuildInfo().Version, Manual: "ompsync manual", Date: &date}
	if err := doc.GenManTree(root, header, dir); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	return nil
}

// asWritten makes the help of c and its subcommands come out in the man
// pages as --help prints it. The generator reads the texts as Markdown,
// which would reflow the indented lists and drop <placeholders>: the long
// description becomes a preformatted block, and the one-line texts are
// escaped. It changes the command tree, which is this process's alone and
// ends with it. done holds the flags already escaped: a persistent flag is
// one *pflag.Flag in every command's set.
func asWritten(c *cobra.Command, done map[*pflag.Flag]bool) {
	if c.Long != "" {
		c.Long = "```\n" + c.Long + "\n```"
	}
	c.Short = escapeMarkdown(c.Short)
	for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.InheritedFlags()} {
		fs.VisitAll(func(f *pflag.Flag) {
			if !done[f] {
				done[f] = true
				f.Usage = escapeMarkdown(f.Usage)
			}
		})
	}
	for _, sub := range c.Commands() {
		asWritten(sub, done)
	}
}

// escapeMarkdown backslash-escapes the characters Markdown would take as
// markup, so that the text is printed as it is.
func escapeMarkdown(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_{}[]()<>#+-.!|~", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
