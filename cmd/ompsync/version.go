package main

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildInfo is what ompsync knows about its own build.
type buildInfo struct {
	Version  string // -X main.version, else the module version ("(devel)" for a local build)
	Commit   string // -X main.commit, else the VCS revision Go embedded; may be empty
	Modified bool   // the tree had uncommitted changes
	Time     string // commit time, if Go embedded it
	Go       string
	OS, Arch string
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: "(devel)", Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		b.Version = cmp.Or(bi.Main.Version, b.Version)
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			case "vcs.time":
				b.Time = s.Value
			}
		}
	}
	b.Version = cmp.Or(version, b.Version) // -X main.version
	if commit != "" {
		b.Commit, b.Modified = commit, false
	}
	return b
}

// versionLine is the short form, for --version.
func versionLine(b buildInfo) string {
	if b.Commit == "" {
		return b.Version
	}
	c := b.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	if b.Modified {
		c += "-dirty"
	}
	return fmt.Sprintf("%s (%s)", b.Version, c)
}

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, Go version and platform",
		Long: `Print ompsync's version, the commit it was built from, the Go version and the
OS/architecture. Release builds set the version with
-ldflags "-X main.version=v1.2.0 -X main.commit=<sha>"; other builds report the
Go module version and the revision Go recorded.`,
		RunE: func(*cobra.Command, []string) error {
			b := readBuildInfo()
			commit := b.Commit
			switch {
			case commit == "":
				commit = "unknown"
			case b.Modified:
				commit += " (modified)"
			}
			fmt.Fprintf(a.stdout, "ompsync %s\n", b.Version)
			fmt.Fprintf(a.stdout, "commit:  %s\n", commit)
			if b.Time != "" {
				fmt.Fprintf(a.stdout, "date:    %s\n", b.Time)
			}
			fmt.Fprintf(a.stdout, "go:      %s\n", b.Go)
			fmt.Fprintf(a.stdout, "os/arch: %s/%s\n", b.OS, b.Arch)
			return nil
		},
	}
}
