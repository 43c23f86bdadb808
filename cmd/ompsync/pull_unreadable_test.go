package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote/backend"
)

// A machine whose key is not one of the encrypted repository's cannot
// read another machine's catalog: agent --once --pull exits 1 naming that
// machine and the key to set, not 0 with nothing pulled; its own sessions
// are backed up all the same.
func TestAgentOncePullUnreadableCatalogFails(t *testing.T) {
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	m1 := newRestoreEnv(t, url, backend.S3Options{}, "m1")
	key1, rec1 := keygen(t, m1.env, filepath.Join(t.TempDir(), "m1.key"))
	m1.env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = key1
	files := corpusSessions(t)
	m1.write(files[0].rel, files[0].data, mtime0)
	if r := m1.run("agent", "--once"); r.code != 0 {
		t.Fatalf("m1 agent --once: %d %s", r.code, r.stderr)
	}

	m2 := newRestoreEnv(t, url, backend.S3Options{}, "m2")
	own, _ := keygen(t, m2.env, filepath.Join(t.TempDir(), "m2.key"))
	m2.env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = own
	m2.env["OMPSYNC_ENCRYPTION_RECIPIENTS"] = rec1
	m2.write(files[1].rel, files[1].data, mtime0)
	r := m2.run("agent", "--once", "--pull", "-q")
	msg := oneErrorLine(t, r)
	if r.code != exitFailure || !strings.Contains(msg, "the sessions of m1 were not pulled") || !strings.Contains(msg, "encryption.identity_file") {
		t.Errorf("agent --once --pull that cannot read m1's catalog: exit %d, %q", r.code, msg)
	}
	if _, err := os.Stat(m2.path(files[0].rel)); err == nil {
		t.Errorf("m1's session was pulled without its catalog")
	}
	// status says so too (the running agent goes on, and status is
	// where a user looks), until a pull reads m1's catalog.
	if r := m2.run("status"); r.code != 0 || !strings.HasPrefix(r.stderr, "ompsync: warning: pull: the sessions of m1 were not pulled") ||
		strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("status while m1's catalog cannot be read: exit %d, %q", r.code, r.stderr)
	}
	// m2's own session is backed up: m1 (with the key) lists it.
	if r := m1.run("ls", "--machine", "m2"); r.code != 0 || !strings.Contains(r.stdout, files[1].id) {
		t.Errorf("m2's session is not on the remote: ls: %d %s %s", r.code, r.stdout, r.stderr)
	}
	m2.env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = key1
	if r := m2.run("agent", "--once", "--pull", "-q"); r.code != 0 {
		t.Fatalf("agent --once --pull with m1's key: %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(m2.path(files[0].rel)); err != nil {
		t.Errorf("m1's session was not pulled with the key: %v", err)
	}
	if r := m2.run("status"); r.code != 0 || r.stderr != "" {
		t.Errorf("status once m1's catalog is read: exit %d, %q", r.code, r.stderr)
	}
}
