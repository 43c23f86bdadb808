// Package omptest runs the real omp coding agent against a fake model, so
// tests can watch omp write its own session files: print mode (Home.Print),
// any other command line (Home.Run) and a long-lived RPC process
// (Home.StartRPC). It is meant for tests only.
//
// omp is found through OMPSYNC_TEST_OMP_PREFIX, an npm prefix holding omp
// and Bun (.ci/run installs one); without it tests skip, or fail under CI=true.
package omptest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// EnvPrefix names the npm prefix omp and Bun are installed under.
const EnvPrefix = "OMPSYNC_TEST_OMP_PREFIX"

// Version is the omp release the harness is written against.
const Version = "18.2.3"

// howToInstall is the message when omp cannot be found.
const howToInstall = "omp " + Version + " not installed: run `bash .ci/run`, or " +
	"`npm install --prefix /tmp/omp-install --ignore-scripts @oh-my-pi/pi-coding-agent@" + Version +
	" @oven/bun-linux-x64` (@oven/bun-linux-x64-baseline on CPUs without AVX2) and set " +
	EnvPrefix + "=/tmp/omp-install"

// skipOrFail skips the test, except in CI (CI=true), which must never pass
// by skipping.
func skipOrFail(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", msg)
	}
	t.Skip(msg)
}

// OMP is an installed omp: the Bun binary and omp's cli.js it runs.
type OMP struct {
	Bun string
	CLI string
}

// Find returns the omp under $OMPSYNC_TEST_OMP_PREFIX. Without it the test
// is skipped (failed under CI=true) with a message saying how to install.
func Find(t testing.TB) *OMP {
	t.Helper()
	o, err := Locate(os.Getenv(EnvPrefix))
	if err != nil {
		skipOrFail(t, err.Error())
	}
	return o
}

// Locate returns the omp installed under the npm prefix dir.
func Locate(prefix string) (*OMP, error) {
	if prefix == "" {
		return nil, errors.New(howToInstall)
	}
	nm := filepath.Join(prefix, "node_modules")
	o := &OMP{CLI: filepath.Join(nm, "@oh-my-pi", "pi-coding-agent", "dist", "cli.js")}
	if _, err := os.Stat(o.CLI); err != nil {
		return nil, fmt.Errorf("%s=%s: %w; %s", EnvPrefix, prefix, err, howToInstall)
	}
	for _, pkg := range []string{"bun-linux-x64", "bun-linux-x64-baseline", "bun-linux-aarch64", "bun-darwin-aarch64", "bun-darwin-x64"} {
		p := filepath.Join(nm, "@oven", pkg, "bin", "bun")
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			o.Bun = p
			return o, nil
		}
	}
	return nil, fmt.Errorf("%s=%s: no Bun binary under %s; %s", EnvPrefix, prefix, filepath.Join(nm, "@oven"), howToInstall)
}
