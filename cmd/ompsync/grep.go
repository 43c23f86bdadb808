package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ompsync/ompsync/config"
	"github.com/ompsync/ompsync/progress"
	"github.com/ompsync/ompsync/restore"
	"github.com/ompsync/ompsync/search"
)

// grepFlags are grep's flags: those restore takes set its options
// directly.
type grepFlags struct {
	restore.Options
	ignoreCase, regexp, asJSON bool
	since, agent               string
}

const grepLong = `Search the text of every session the remote holds (those the prefixes name,
when given), every machine's copy, decrypting on this machine: what users and
the model wrote, the model's reasoning, tool calls and their results,
compaction summaries. PATTERN is a fixed string, or with --regexp a Go
regular expression (RE2); a match is within one line of text.

One line per match: session id, title, entry id, role, time and the matching
text. A line that several copies hold (the same session on two machines) is
printed once. Older copies the remote keeps (a session rewritten smaller, or
cut, keeps its older generation until retention removes it) are searched too,
and a line only they hold is marked [older copy] ("older": true with --json);
'ompsync history' lists them, and 'restore --generation' brings one back. Sessions recorded as deleted on every machine are searched with
--include-deleted.

What is read is kept in a cache under state_dir/search, bounded by
search.cache_size: a second search of an unchanged remote reads the catalogs
and nothing else, and a session that grew fetches only its new chunks.

A copy is read a chunk at a time and indexed a line at a time; a line longer
than 64 MiB is not searched, and is named. A copy that cannot be read or
verified (a damaged chunk) is named too, and searched as the cache last had
it, if at all: nothing of what this run read of it is searched, not even the
chunks verified before the damage, and no line is printed before every copy
was read.

Exit status 0 when a line matched, 1 when none did or a copy could not be
read (as grep does).`

func newGrepCmd(a *app) *cobra.Command {
	var f grepFlags
	cmd := &cobra.Command{
		Use:   "grep PATTERN [ID-PREFIX...]",
		Short: "Search the text of every session on the remote",
		Long:  grepLong,
		Example: `  ompsync grep 'connection refused'
  ompsync grep -i --since 7d retry 019a
  ompsync grep --regexp 'TODO\((\w+)\)' --json | jq -r .session`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runGrep(cmd.Context(), f, args[0], args[1:])
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&f.ignoreCase, "ignore-case", "i", false, "match without regard to case")
	fl.BoolVar(&f.regexp, "regexp", false, "PATTERN is a regular expression (Go's RE2 syntax), not a fixed string")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object per match")
	fl.StringVar(&f.since, "since", "", "only entries from TIME on: RFC 3339 (2026-10-07T14:00:00Z) or a duration back from now (3h, 7d)")
	fl.BoolVar(&f.IncludeDeleted, "include-deleted", false, "also search sessions recorded as deleted on every machine")
	fl.StringVar(&f.Machine, "machine", "", "search only this machine's copies")
	addAgentFlag(fl, &f.agent)
	addLatestFlag(fl, &f.Latest)
	return cmd
}

func (a *app) runGrep(ctx context.Context, f grepFlags, pattern string, prefixes []string) error {
	opts, err := grepOptions(f, pattern)
	if err != nil {
		return err
	}
	cfg, places, problems, err := a.readPlaces(ctx, f.Machine, f.agent)
	if err != nil {
		return err
	}
	a.warn(problems)
	opts.Options = f.Options
	opts.Choose, opts.Parallel = a.chooser(), cfg.Transfers
	enc := json.NewEncoder(a.stdout)
	emit := func(gm restore.GrepMatch) error {
		if f.asJSON {
			return enc.Encode(gm)
		}
		return printMatch(a.stdout, gm, opts.Pattern)
	}
	cache := func(agent string) (*search.Cache, error) { return openSearchCache(cfg, agent) }
	rep, err := restore.GrepAll(ctx, places, prefixes, opts, cache, emit)
	if rep != nil {
		a.warn(rep.LeftOut)
		a.warn(rep.Problems)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(a.notes(true), grepTotals(rep))
	switch {
	case len(rep.Problems) > 0 || len(problems) > 0:
		return fmt.Errorf("some copies could not be read (see above); their lines were searched as the cache last had them, if at all")
	case rep.Matches == 0:
		return fmt.Errorf("no line matches")
	}
	return nil
}

// grepOptions are the pattern and --since, checked.
func grepOptions(f grepFlags, pattern string) (restore.GrepOptions, error) {
	m, err := search.Compile(search.Pattern{Text: pattern, IgnoreCase: f.ignoreCase, Regexp: f.regexp})
	if err != nil {
		return restore.GrepOptions{}, usagef("%v", err)
	}
	opts := restore.GrepOptions{Pattern: m}
	if f.since != "" {
		if opts.Since, err = restore.ParseAt(f.since, time.Now()); err != nil {
			return opts, usagef("--since: %v", err)
		}
	}
	return opts, nil
}

// openSearchCache opens agent's search cache, in its state dir; nil when
// search.cache_size turns caching off.
func openSearchCache(cfg *config.Config, agent string) (*search.Cache, error) {
	n := cfg.Search.CacheSize.Bytes()
	if n <= 0 {
		return nil, nil
	}
	return search.OpenCache(filepath.Join(stateDirOf(cfg, agent), "search"), n)
}

// count is n and the noun, singular or plural.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// grepTotals says what was searched and what it cost.
func grepTotals(rep *restore.GrepReport) string {
	return fmt.Sprintf("%s; %s searched (%s; %d read from the remote, %s)", count(rep.Matches, "match", "matches"),
		count(rep.Sessions, "session", "sessions"), count(rep.Copies, "copy", "copies"), rep.Fetched, progress.Size(rep.Bytes)) +
		tally(counted{rep.DeletedLeft, "recorded as deleted not searched (add --include-deleted)"})
}

func printMatch(w io.Writer, gm restore.GrepMatch, m *search.Matcher) error {
	entry, title := cmp.Or(gm.Entry, "-"), oneLine(gm.Title)
	text := m.Excerpt(gm.Text)
	if gm.Older {
		text = "[older copy] " + text
	}
	_, err := fmt.Fprintf(w, "%s  %q  %s  %s  %s  %s\n", gm.Session, title, entry, gm.Label(), localTime(gm.Time), text)
	return err
}
