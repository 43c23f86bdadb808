//go:build unix

package bench

import (
	"os"
	"syscall"
)

// peakRSS is the process's peak resident memory in bytes, 0 if unknown.
func peakRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10 // KiB on Linux
	}
	return 0
}
