package main

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
)

// maxCandidates is how many sessions an ambiguous prefix lists: enough to
// find one by its title, short enough to read.
const maxCandidates = 20

// addLatestFlag adds --latest, which every command that takes an id prefix
// has.
func addLatestFlag(fl *pflag.FlagSet, latest *bool) {
	fl.BoolVar(latest, "latest", false, "when an id prefix matches several sessions, take the newest (as omp's --resume does)")
}

// addAtFlag adds --at, for the commands that read the backup as it was.
func addAtFlag(fl *pflag.FlagSet, at *string) {
	fl.StringVar(at, "at", "", "the session as the backup held it at TIME: RFC 3339 (2026-10-07T14:00:00Z) or a duration back from now (3h, 2d)")
}

// pickCopy checks --generation and reads --at into opts (At left zero
// when the flag is empty).
func pickCopy(opts *restore.Options, generation, at string) error {
	if generation != "" && !repo.ValidGeneration(generation) {
		return usagef("--generation %q: want 16 hex digits", generation)
	}
	opts.Generation = generation
	if at == "" {
		return nil
	}
	t, err := restore.ParseAt(at, time.Now())
	if err != nil {
		return usagef("--at: %v", err)
	}
	opts.At = t
	return nil
}

// chooser is restore.Options.Choose for this run: on a terminal it lists
// the sessions an ambiguous prefix matches and asks which one; elsewhere
// (a script, a pipe into stdin) it is nil, and the ambiguity is an error
// that lists them.
func (a *app) chooser() func(*restore.AmbiguousError) (string, error) {
	if !a.interactive || a.stdin == nil {
		return nil
	}
	in := bufio.NewReader(a.stdin) // one reader: several prefixes may ask
	return func(amb *restore.AmbiguousError) (string, error) {
		n := printCandidates(a.stderr, amb, true)
		fmt.Fprintf(a.stderr, "which one? 1-%d (Enter: none): ", n)
		line, err := in.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read the choice: %w", err)
		}
		line = strings.TrimSpace(line)
		if line == "" {
			return "", fmt.Errorf("session id prefix %q is ambiguous and no session was chosen", amb.Prefix)
		}
		i, err := strconv.Atoi(line)
		if err != nil || i < 1 || i > n {
			return "", fmt.Errorf("%q is not one of 1-%d", line, n)
		}
		return amb.Candidates[i-1].ID, nil
	}
}

// printCandidates writes the sessions an ambiguous prefix matches as a
// short table, newest first (numbered for a prompt), and returns how many
// it listed.
func printCandidates(w io.Writer, amb *restore.AmbiguousError, numbered bool) int {
	n := min(len(amb.Candidates), maxCandidates)
	fmt.Fprintf(w, "session id prefix %q matches %d sessions, newest first:\n", amb.Prefix, len(amb.Candidates))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "ID\tLAST CHANGE\tMACHINES\tTITLE\tCWD"
	if numbered {
		head = "#\t" + head
	}
	fmt.Fprintln(tw, "  "+head)
	for i, c := range amb.Candidates[:n] {
		title := cmp.Or(oneLine(c.Title), "-")
		if len(title) > 60 {
			title = title[:57] + "..."
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", c.ID, c.Mtime.Local().Format(time.DateTime), strings.Join(c.Machines, ","), title, c.Cwd)
		if c.State != "" && c.State != "present" {
			row += " (" + c.State + ")"
		}
		if numbered {
			row = strconv.Itoa(i+1) + "\t" + row
		}
		fmt.Fprintln(tw, "  "+row)
	}
	tw.Flush()
	if more := len(amb.Candidates) - n; more > 0 {
		fmt.Fprintf(w, "  ... and %d more\n", more)
	}
	return n
}

// eachError calls f for every error err joins (errors.Join), or for err.
func eachError(err error, f func(error)) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			eachError(e, f)
		}
		return
	}
	f(err)
}

// explainAmbiguous lists, on w, the candidates of every ambiguous prefix in
// err, and returns the one line that ends the message (the tables say the
// rest), or false when err holds no ambiguity.
func explainAmbiguous(w io.Writer, err error) (string, bool) {
	var parts []string
	found := false
	eachError(err, func(e error) {
		var amb *restore.AmbiguousError
		if !errors.As(e, &amb) {
			parts = append(parts, e.Error())
			return
		}
		found = true
		printCandidates(w, amb, false)
		parts = append(parts, fmt.Sprintf("session id prefix %q is ambiguous: it matches %d sessions (above); give more characters, or --latest for the newest", amb.Prefix, len(amb.Candidates)))
	})
	return strings.Join(parts, "; "), found
}
