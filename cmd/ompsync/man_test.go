package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The man pages are the commands' own help: one page per command, each
// with the command's description line for line as --help prints it and
// every flag. A command or flag added without its page fails here.
func TestManPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man1")
	cmd := exec.Command(ompsyncBin, "man", "--dir", dir)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1764892800") // 2025-12-05
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ompsync man: %v\n%s", err, out)
	}
	a := &app{stdout: io.Discard, stderr: io.Discard, env: func(string) (string, bool) { return "", false }}
	var check func(c *cobra.Command)
	check = func(c *cobra.Command) {
		name := strings.ReplaceAll(c.CommandPath(), " ", "-") + ".1"
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("no man page for %q: %v", c.CommandPath(), err)
			return
		}
		page := roffText(string(b))
		if !strings.Contains(page, `.TH "OMPSYNC" "1" "Dec 2025"`) {
			t.Errorf("%s: no title line dated SOURCE_DATE_EPOCH:\n%.200s", name, page)
		}
		if !strings.Contains(page, c.Short) {
			t.Errorf("%s lacks the command's description %q", name, c.Short)
		}
		for _, line := range strings.Split(c.Long, "\n") {
			if !strings.Contains(page, line+"\n") {
				t.Errorf("%s lacks the line of --help %q", name, line)
			}
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden {
				return
			}
			if !strings.Contains(page, "--"+f.Name+"=") && !strings.Contains(page, "--"+f.Name+"[=") {
				t.Errorf("%s lacks the flag --%s", name, f.Name)
			}
			if !strings.Contains(page, f.Usage) {
				t.Errorf("%s lacks the help of --%s, %q", name, f.Name, f.Usage)
			}
		})
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				check(sub)
			}
		}
	}
	check(newRootCmd(a))
	if _, err := os.Stat(filepath.Join(dir, "ompsync-man.1")); err == nil {
		t.Error("the hidden man command has a page of its own")
	}
}

// roffText undoes the escapes the man page generator writes, leaving the
// text a reader sees.
func roffText(s string) string {
	return strings.NewReplacer(`\fB`, "", `\fP`, "", `\fI`, "", `\&`, "", `\\`, `\`, `\-`, "-").Replace(s)
}

func TestManNeedsDir(t *testing.T) {
	env, _ := newEnv(t)
	r := runWith(t, env, "man")
	if r.code != exitUsage || !strings.Contains(oneErrorLine(t, r), "--dir is required") {
		t.Errorf("man without --dir: exit %d, stderr %q; want exit 2 saying --dir is required", r.code, r.stderr)
	}
}

// A configuration key's flag shows the key's default in --help and its man
// page; the pages said --interval="" where docs/CONFIG.md says 2s.
func TestKeyFlagsShowDefaults(t *testing.T) {
	env, home := newEnv(t)
	dir := filepath.Join(home, "man1")
	if r := runWith(t, env, "man", "--dir", dir); r.code != 0 {
		t.Fatalf("man: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, tt := range []struct{ cmd, help, page string }{
		{"agent", `[OMPSYNC_INTERVAL] (default "2s")`, `--interval="2s"`},
		{"prune", `[OMPSYNC_RETENTION_GENERATIONS] (default "720h")`, `--retention-generations="720h"`},
		{"compact", `[OMPSYNC_COMPACTION_IDLE] (default "10m")`, `--compaction-idle="10m"`},
	} {
		if r := runWith(t, env, tt.cmd, "--help"); r.code != 0 || !strings.Contains(r.stdout, tt.help) {
			t.Errorf("%s --help: exit %d, lacks %q:\n%s", tt.cmd, r.code, tt.help, r.stdout)
		}
		b, err := os.ReadFile(filepath.Join(dir, "ompsync-"+tt.cmd+".1"))
		if page := roffText(string(b)); err != nil || !strings.Contains(page, tt.page) {
			t.Errorf("ompsync-%s.1 lacks %s (%v)", tt.cmd, tt.page, err)
		}
	}
}
