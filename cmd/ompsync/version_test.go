package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/bintest"
)

// A release build (deploy/release.sh) sets the version and commit with
// -ldflags -X; `ompsync version` and --version print them as given.
func TestVersionOfReleaseBuild(t *testing.T) {
	t.Parallel()
	const commit = "0123456789abcdef0123456789abcdef01234567"
	bin, err := bintest.Build(t.TempDir(), "-ldflags", "-X main.version=v9.8.7 -X main.commit="+commit)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	for _, want := range []string{"ompsync v9.8.7\n", "commit:  " + commit + "\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("version prints\n%s\nwant a line %q", out, want)
		}
	}
	out, err = exec.Command(bin, "--version").Output()
	if want := "ompsync v9.8.7 (0123456789ab)\n"; err != nil || string(out) != want {
		t.Errorf("--version: %q, %v; want %q", out, err, want)
	}
}

// A plain `go build` reports the commit Go recorded in the binary
// (debug.ReadBuildInfo's vcs.revision, as `go version -m` shows it), and
// "unknown" where Go recorded none (-buildvcs=false, no git, a git worktree).
func TestVersionOfPlainBuild(t *testing.T) {
	out, err := exec.Command(ompsyncBin, "version").Output()
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	if !strings.HasPrefix(string(out), "ompsync ") {
		t.Errorf("version prints\n%s\nwant it to start with 'ompsync <version>'", out)
	}
	meta, err := exec.Command("go", "version", "-m", ompsyncBin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	want := "commit:  unknown\n"
	for _, line := range strings.Split(string(meta), "\n") {
		if rev, ok := strings.CutPrefix(strings.TrimSpace(line), "build\tvcs.revision="); ok {
			want = "commit:  " + rev // then " (modified)" if the tree had changes
		}
	}
	if !strings.Contains(string(out), want) {
		t.Errorf("version prints\n%s\nwant %q, from the binary's build information:\n%s", out, want, meta)
	}
}
