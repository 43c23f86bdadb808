package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/bintest"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
)

// ompsyncBin is the ompsync binary the tests run as a process, built once
// by TestMain.
var ompsyncBin string

// TestMain builds the real binary the tests run as a process (the exit
// codes, signals, terminals and lines a user sees), then runs the tests
// with an S3 server. It is built without the race detector: the code it
// runs is raced in process by the agent, restore and repo packages' tests,
// and an instrumented process is several times slower, which was most of
// this package's time. With OMPSYNC_TEST_MAIN=1 the test binary stands in
// for it, as it did before.
func TestMain(m *testing.M) {
	if os.Getenv("OMPSYNC_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Environ()))
	}
	os.Exit(mainWithBinary(m))
}

func mainWithBinary(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ompsync-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cmd test:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if ompsyncBin, err = bintest.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "cmd test:", err)
		return 1
	}
	return remotetest.MainCode(m)
}
