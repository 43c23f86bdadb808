package main

import (
	"os"
	"testing"

	"github.com/ompsync/ompsync/remote/remotetest"
)

// TestMain lets the test binary stand in for the ompsync binary: tests that
// need a real process (SIGKILL, SIGTERM, SIGHUP) run os.Args[0] with
// OMPSYNC_TEST_MAIN=1 set. Otherwise it runs the tests with an S3 server.
func TestMain(m *testing.M) {
	if os.Getenv("OMPSYNC_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
	}
	remotetest.Main(m)
}
