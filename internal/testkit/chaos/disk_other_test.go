//go:build chaos && !linux

package chaos

import "testing"

func smallDisk(t *testing.T, dir string) bool {
	t.Logf("state dir %s on the ordinary disk: small tmpfs mounts are a Linux feature; the disk-full part is skipped", dir)
	return false
}

func fillDisk(dir string, rng *lockedRand, st *stats, stop <-chan struct{}) {}
