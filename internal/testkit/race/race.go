//go:build race

// Package race tells tests whether the race detector is on, as the
// standard library's internal/race does: a test that checks logic over
// many random cases runs fewer of them under the detector, whose 5-20x
// slowdown buys nothing there (CI runs every test under it).
package race

// Enabled is true when built with -race.
const Enabled = true
