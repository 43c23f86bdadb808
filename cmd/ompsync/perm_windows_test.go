package main

import (
	"os/exec"
	"testing"
)

// credential stands for the Unix user a test runs a process as.
type credential struct{}

// unprivileged: the tests of unreadable files are about Unix permissions.
func unprivileged(t *testing.T) (dir, bin string, cred *credential) {
	t.Skip("unreadable files are tested with Unix permissions")
	return "", "", nil
}

func chownAll(*testing.T, string, *credential) {}

func runAs(*exec.Cmd, *credential) {}
