// Command ompsync backs up omp coding-agent sessions to S3 or a folder,
// restores them, and keeps machines in sync.
package main

import "os"

// Set at link time, e.g.
//
//	go build -ldflags "-X main.version=v1.2.0 -X main.commit=$(git rev-parse HEAD)" ./cmd/ompsync
//
// -X can only set package variables, so these are the package's one piece of
// global state; nothing assigns them at run time. Empty means: use the
// module's build information.
var (
	version string
	commit  string
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Environ()))
}
