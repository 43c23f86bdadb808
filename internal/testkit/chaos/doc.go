// Package chaos is ompsync's chaos suite; it holds only tests, built with
// the "chaos" tag:
//
//	go test -tags chaos -v ./internal/testkit/chaos/...                       # 60 s per scenario
//	CHAOS_DURATION=10m CHAOS_SEED=7 go test -tags chaos -v -timeout 1h ./internal/testkit/chaos/...
//
// A simulated omp writes sessions the way omp does while real ompsync agent
// processes are killed with SIGKILL and restarted, a fault proxy breaks the
// S3 traffic, and the state dir's disk fills up; then every session must
// restore byte for byte (or, for sessions synced between machines, hold
// every line any machine wrote), and no local file may have shrunk. See
// docs/RELIABILITY.md.
package chaos
