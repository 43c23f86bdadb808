package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote/backend"
)

// When the repository refuses a machine's uploads (it was encrypted after
// the machine's agent started, or the machine's key is not one of it),
// status names that and what to set, not "is the agent running", nor "has
// the agent run", and exits 1 until an agent with the key uploads again.
func TestStatusNamesEncryptionRefusal(t *testing.T) {
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	files := corpusSessions(t)
	desk := newRestoreEnv(t, url, backend.S3Options{}, "desk")
	desk.write(files[0].rel, files[0].data, mtime0)
	if r := desk.run("agent", "--once"); r.code != 0 {
		t.Fatalf("desk agent --once: %d %s", r.code, r.stderr)
	}
	laptop := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	key, _ := keygen(t, laptop.env, filepath.Join(t.TempDir(), "age.key"))
	laptop.env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = key
	if r := laptop.run("rekey", "--settle=0"); r.code != 0 {
		t.Fatalf("rekey: %d %s", r.code, r.stderr)
	}

	// The desk, without the key, is refused its new line.
	desk.write(files[0].rel, append(files[0].data, entry("refused1", "", "after the rekey")...), mtime0)
	if r := desk.run("agent", "--once", "-q"); r.code != exitFailure {
		t.Fatalf("desk agent --once into the encrypted repository: %d %s", r.code, r.stderr)
	}
	r := desk.run("status")
	if msg := oneErrorLine(t, r); r.code != exitFailure || !strings.Contains(msg, "the repository refuses this machine's uploads") ||
		!strings.Contains(msg, "encryption.identity_file") {
		t.Errorf("status of a refused machine: exit %d, %q", r.code, msg)
	}

	// A machine with a key of its own, refused at start by a repository
	// encrypted from the first: no state, but status knows why.
	url2 := "file://" + filepath.Join(t.TempDir(), "remote")
	first := newRestoreEnv(t, url2, backend.S3Options{}, "first")
	first.env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = key
	first.write(files[0].rel, files[0].data, mtime0)
	if r := first.run("agent", "--once"); r.code != 0 {
		t.Fatalf("encrypted agent --once: %d %s", r.code, r.stderr)
	}
	// A process of its own: the lock of an agent run in this one would
	// name a process alive.
	other := newMachineEnv(t, url2, backend.S3Options{}, "other")
	own, _ := keygen(t, first.env, filepath.Join(t.TempDir(), "own.key"))
	other.env = []string{"OMPSYNC_ENCRYPTION_IDENTITY_FILE=" + own}
	other.newSession("01a1b2c3-0000-7000-8000-000000000001", entry("0000f201", "", "hello"))
	other.mustRun(exitFailure, "agent", "--once", "-q")
	if msg := lastLine(other.mustRun(exitFailure, "status")); !strings.Contains(msg, "the agent ran, but the repository refused it") ||
		!strings.Contains(msg, "encryption.recipients") {
		t.Errorf("status of a machine refused at start: %q", msg)
	}

	// With the key, the desk uploads, and status is good again.
	desk.env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = key
	if r := desk.run("agent", "--once", "-q"); r.code != 0 {
		t.Fatalf("desk agent --once with the key: %d %s", r.code, r.stderr)
	}
	if r := desk.run("status"); r.code != 0 || r.stderr != "" {
		t.Errorf("status once uploads are accepted again: exit %d, %q", r.code, r.stderr)
	}
}
