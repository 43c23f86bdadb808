package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/config"
)

// docs/CONFIG.md's key table is what `ompsync config doc` prints: every key
// with its variable, flag, default and help as the binary has them, so the
// users' reference never drifts from the code.
func TestConfigDocUpToDate(t *testing.T) {
	out, err := exec.Command(ompsyncBin, "config", "doc").Output()
	if err != nil {
		t.Fatalf("ompsync config doc: %v", err)
	}
	table := string(out)
	for _, s := range (&config.Config{}).Settings() { // every key, in table order
		k := s.Key
		if !strings.Contains(table, "| `"+k+"` | `"+config.EnvVar(k)+"` |") {
			t.Errorf("ompsync config doc prints no row for %s", k)
		}
	}
	if !strings.Contains(table, "| `interval` | `OMPSYNC_INTERVAL` | `--interval` (agent) | `2s` |") {
		t.Errorf("ompsync config doc: interval's row lacks its flag or default:\n%s", table)
	}
	// the flag as --help lists it (--sync-pull is agent's other name for it)
	if !strings.Contains(table, "| `sync.pull_interval` | `OMPSYNC_SYNC_PULL_INTERVAL` | `--pull-interval` (agent) |") {
		t.Errorf("ompsync config doc: sync.pull_interval's row lacks --pull-interval:\n%s", table)
	}
	data, err := os.ReadFile("../../docs/CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := config.ReplaceDoc(string(data), table)
	if err != nil {
		t.Fatalf("docs/CONFIG.md: %v", err)
	}
	if string(data) != want {
		t.Errorf("docs/CONFIG.md's key table differs from what the code says; regenerate it: go run ./cmd/ompsync config doc --write docs/CONFIG.md")
	}
}

// config doc --write replaces the table between the markers and keeps the
// hand-written text around it.
func TestConfigDocWrite(t *testing.T) {
	path := t.TempDir() + "/CONFIG.md"
	old := "# intro\n" + config.DocBegin + "\nstale\n" + config.DocEnd + "\n## notes\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(ompsyncBin, "config", "doc", "--write", path).CombinedOutput(); err != nil {
		t.Fatalf("ompsync config doc --write: %v\n%s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if strings.Contains(got, "stale") || !strings.HasPrefix(got, "# intro\n"+config.DocBegin+"\n| Key |") ||
		!strings.HasSuffix(got, config.DocEnd+"\n## notes\n") || !strings.Contains(got, "| `remote` | `OMPSYNC_REMOTE` |") {
		t.Errorf("config doc --write wrote:\n%s", got)
	}

	// a file without the markers is left as it was, and the error says what is missing
	if err := os.WriteFile(path, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(ompsyncBin, "config", "doc", "--write", path).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "BEGIN generated") {
		t.Errorf("config doc --write on a file without markers: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(path); string(b) != "no markers\n" {
		t.Errorf("file without markers changed to %q", b)
	}
}
