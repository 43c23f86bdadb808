package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/internal/testkit/repotest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
)

const encSecret = "MARKER-5be1-only-the-session-knows"

// keygen runs 'ompsync keygen --out' and returns the file and recipient.
func keygen(t *testing.T, env testEnv, out string) (string, string) {
	t.Helper()
	r := runWith(t, env, "keygen", "--out", out)
	if r.code != 0 {
		t.Fatalf("keygen: exit %d: %s", r.code, r.stderr)
	}
	return out, strings.TrimSpace(r.stdout)
}

func fp(t *testing.T, recipient string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(recipient)) // an age recipient is its canonical form
	return hex.EncodeToString(sum[:8])
}

func TestKeygen(t *testing.T) {
	env, home := newEnv(t)
	out := filepath.Join(home, "keys", "age.key")
	_, recipient := keygen(t, env, out)
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("identity file mode %04o, want 0600", fi.Mode().Perm())
	}
	keys, err := crypt.ReadIdentityFile(out)
	if err != nil || len(keys) != 1 {
		t.Fatalf("identity file: %v", err)
	}
	if keys[0].Fingerprint != fp(t, recipient) || !strings.HasPrefix(recipient, "age1") {
		t.Errorf("printed recipient %q is not the file's key", recipient)
	}
	before, _ := os.ReadFile(out)

	// never overwritten
	r := runWith(t, env, "keygen", "--out", out)
	if r.code != exitFailure || !strings.Contains(oneErrorLine(t, r), "already exists") || r.stdout != "" {
		t.Errorf("keygen over an existing file: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if after, _ := os.ReadFile(out); !bytes.Equal(before, after) {
		t.Error("keygen changed an existing identity file")
	}

	// Without --out: the configured identity_file, else beside the config file.
	env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = filepath.Join(home, "configured.key")
	if r := runWith(t, env, "keygen"); r.code != 0 {
		t.Fatalf("keygen to identity_file: %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(home, "configured.key")); err != nil {
		t.Error(err)
	}
	delete(env, "OMPSYNC_ENCRYPTION_IDENTITY_FILE")
	if r := runWith(t, env, "keygen"); r.code != 0 {
		t.Fatalf("keygen by default: %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(home, ".config", "ompsync", "age.key")); err != nil {
		t.Error(err)
	}
}

// Encryption end to end through the commands a user runs: back up, find a
// remote that shows nothing of what was said, list and restore without the
// key (refused, nothing written) and with it (every byte back).
func TestEncryptedCommands(t *testing.T) {
	t.Parallel()
	forEachRemote(t, func(t *testing.T, url string, s3 backend.S3Options) {
		e := newRestoreEnv(t, url, s3, "laptop")
		key, recipient := keygen(t, e.env, filepath.Join(t.TempDir(), "age.key"))
		files := corpusSessions(t)
		for i, f := range files {
			data := bytes.Clone(f.data)
			data = append(data, fmt.Sprintf(`{"type":"message","id":"enc%05d","parentId":null,"timestamp":"2026-11-30T00:00:00Z","text":%q}`+"\n", i, encSecret)...)
			files[i].data = data
			e.write(f.rel, data, mtime0)
		}
		e.env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = key
		if r := e.run("agent", "--once"); r.code != 0 {
			t.Fatalf("agent --once: %d %s", r.code, r.stderr)
		}
		client := openClient(t, url, s3)
		for k, v := range objects(t, client) {
			if bytes.Contains(v, []byte(encSecret)) {
				t.Errorf("%s holds the secret", k)
			}
			if k != repo.MarkerKey && !bytes.HasPrefix(v, []byte(repo.AgeHeader)) {
				t.Errorf("%s is not encrypted", k)
			}
		}

		// Another machine without the key: refused, with the key's name.
		other := newRestoreEnv(t, url, s3, "desktop")
		for _, args := range [][]string{{"ls"}, {"restore", "--all"}, {"verify"}} {
			r := other.run(args...)
			msg := oneErrorLine(t, r)
			if r.code != exitFailure || !strings.Contains(msg, fp(t, recipient)) || !strings.Contains(msg, "encryption.identity_file") {
				t.Errorf("%v without the key: exit %d, %q", args, r.code, msg)
			}
		}
		if entries, _ := os.ReadDir(filepath.Join(other.agentDir, "sessions")); len(entries) != 0 {
			t.Errorf("restore without the key wrote %d entries", len(entries))
		}

		// With the key, every byte comes back.
		other.env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = key
		if r := other.run("restore", "--all"); r.code != 0 {
			t.Fatalf("restore with the key: %d %s %s", r.code, r.stdout, r.stderr)
		}
		for _, f := range files {
			got, err := os.ReadFile(other.path(f.rel))
			if err != nil || !bytes.Equal(got, f.data) {
				t.Errorf("restored %s: %v", f.rel, err)
			}
		}
	})
}

// Mixed remotes through the commands: each refusal says what to do, and
// rekey is the way from plaintext to encrypted.
func TestMixedRemoteCommands(t *testing.T) {
	t.Parallel()
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	e := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	files := corpusSessions(t)
	for _, f := range files {
		e.write(f.rel, f.data, mtime0)
	}
	if r := e.run("agent", "--once"); r.code != 0 {
		t.Fatalf("plaintext agent --once: %d %s", r.code, r.stderr)
	}
	key, recipient := keygen(t, e.env, filepath.Join(t.TempDir(), "age.key"))
	enc := newRestoreEnv(t, url, backend.S3Options{}, "desktop")
	enc.env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = key
	r := enc.run("agent", "--once")
	if msg := lastLine(r.stderr); r.code != exitFailure || !strings.Contains(msg, "unencrypted") || !strings.Contains(msg, "ompsync rekey") {
		t.Errorf("encrypted agent into a plaintext remote: exit %d, %q", r.code, msg)
	}

	if r := enc.run("rekey", "--settle=0"); r.code != 0 || !strings.Contains(r.stdout, "re-encrypted") {
		t.Fatalf("rekey of a plaintext remote: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := enc.run("rekey"); r.code != 0 || !strings.Contains(r.stdout, "nothing to rekey") {
		t.Errorf("second rekey: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// The settle wait is said, but with -q.
	if r := enc.run("rekey", "--force", "--settle=1ms"); r.code != 0 || !strings.Contains(r.stdout, "re-encrypted") ||
		r.stderr != "ompsync: waiting 1ms for other machines' writes to settle (see 'Changing keys' in docs/SECURITY.md)\n" {
		t.Errorf("rekey --force: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := enc.run("-q", "rekey", "--force", "--settle=1ms"); r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("-q rekey --force prints errors only: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for k, v := range objects(t, openClient(t, url, backend.S3Options{})) {
		if k != repo.MarkerKey && !bytes.HasPrefix(v, []byte(repo.AgeHeader)) {
			t.Errorf("%s not encrypted after rekey", k)
		}
	}
	r = e.run("agent", "--once") // the plaintext machine again
	if msg := lastLine(r.stderr); r.code != exitFailure || !strings.Contains(msg, fp(t, recipient)) || !strings.Contains(msg, "encryption.identity_file") {
		t.Errorf("plaintext agent into an encrypted remote: exit %d, %q", r.code, msg)
	}
	if r := enc.run("restore", "--all"); r.code != 0 {
		t.Fatalf("restore after rekey: %d %s", r.code, r.stderr)
	}
	for _, f := range files {
		if got, err := os.ReadFile(enc.path(f.rel)); err != nil || !bytes.Equal(got, f.data) {
			t.Errorf("restored %s: %v", f.rel, err)
		}
	}
	if r := newRestoreEnv(t, url, backend.S3Options{}, "x").run("rekey"); r.code != exitFailure || !strings.Contains(r.stderr, "encryption.recipients") {
		t.Errorf("rekey without encryption configured: %d %q", r.code, r.stderr)
	}
}

// rekey is killed with SIGKILL again and again while it re-encrypts from
// key A to key B, and resumed; afterwards key B alone opens every object and
// every session reassembles byte for byte.
func TestRekeySurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	forEachRemote(t, func(t *testing.T, url string, s3 backend.S3Options) {
		ctx := context.Background()
		m := newMachineEnv(t, url, s3, "laptop")
		env, _ := newEnv(t)
		keyA, _ := keygen(t, env, filepath.Join(m.home, "a.key"))
		keyB, recipientB := keygen(t, env, filepath.Join(m.home, "b.key"))

		// Back up with key A, in small chunks: a few hundred objects.
		w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 9, 5)
		if err != nil {
			t.Fatal(err)
		}
		client := openClient(t, url, s3)
		codecA, err := crypt.New(crypt.Options{IdentityFile: keyA})
		if err != nil {
			t.Fatal(err)
		}
		ag, err := agent.New(repo.New(client, codecA), agent.Options{AgentDir: m.agentDir, StateDir: filepath.Join(m.home, "state"), Machine: "laptop", ChunkSize: 4 << 10})
		if err != nil {
			t.Fatal(err)
		}
		for range 60 {
			for range 5 {
				if err := w.step(); err != nil {
					t.Fatal(err)
				}
			}
			if err := ag.Once(ctx); err != nil {
				t.Fatal(err)
			}
		}
		ag.Close()
		total := len(objects(t, client)) - 1
		if total < 3*64 {
			t.Fatalf("only %d objects: too few for rekey to be interrupted", total)
		}

		// Both identities while rekey runs; B is the recipient.
		both := filepath.Join(m.home, "both.key")
		a, _ := os.ReadFile(keyA)
		b, _ := os.ReadFile(keyB)
		if err := os.WriteFile(both, append(b, a...), 0o600); err != nil {
			t.Fatal(err)
		}
		extra := []string{"OMPSYNC_ENCRYPTION_RECIPIENTS=" + recipientB, "OMPSYNC_ENCRYPTION_IDENTITY_FILE=" + both}
		journal := filepath.Join(m.home, "state", "rekey.json")
		kills := 0
		var out string
		for round := 0; ; round++ {
			if round > 20 {
				t.Fatalf("rekey did not finish after %d rounds:\n%s", round, out)
			}
			before := journalAfter(journal)
			cmd, buf := m.startWith(extra, "rekey", "--settle=0")
			// Kill as soon as this run has recorded progress of its own.
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			var err error
			killed := false
		wait:
			for {
				select {
				case err = <-exited:
					break wait
				case <-time.After(time.Millisecond):
					if after := journalAfter(journal); after != "" && after != before && !killed {
						cmd.Process.Signal(syscall.SIGKILL)
						killed = true
					}
				}
			}
			out = buf.String()
			if strings.Contains(out, "panic") {
				t.Fatalf("rekey panicked:\n%s", out)
			}
			if err == nil {
				break
			}
			if !killed {
				t.Fatalf("rekey failed on its own: %v\n%s", err, out)
			}
			kills++
			// Between kills, readers with both keys still read everything.
			if msg := readAll(t, client, both, w.files); msg != "" {
				t.Fatalf("after kill %d: %s", kills, msg)
			}
		}
		if kills < 2 {
			t.Errorf("rekey was killed %d times; the test wants it interrupted at least twice", kills)
		}
		// The last run finishes the job, or finds it finished by a run
		// killed just before it could say so.
		if !strings.Contains(out, "re-encrypted") && !strings.Contains(out, "nothing to rekey") {
			t.Errorf("last rekey said %q", out)
		}
		if _, err := os.Stat(journal); !os.IsNotExist(err) {
			t.Errorf("journal left after rekey: %v", err)
		}
		// Key B alone opens everything, key A nothing.
		if msg := readAll(t, client, keyB, w.files); msg != "" {
			t.Fatal(msg)
		}
		codecB, _ := crypt.New(crypt.Options{IdentityFile: keyB})
		for k, v := range objects(t, client) {
			if k == repo.MarkerKey {
				var mk repo.Marker
				json.Unmarshal(v, &mk)
				if mk.Encryption == nil || !slices.Equal(mk.Encryption.Recipients, []string{fp(t, recipientB)}) || len(mk.Encryption.Pending) > 0 {
					t.Errorf("marker after rekey: %s", v)
				}
				continue
			}
			if _, err := codecB.Open(v, 1<<30); err != nil {
				t.Errorf("%s does not open with key B: %v", k, err)
			}
			if _, err := codecA.Open(v, 1<<30); err == nil {
				t.Errorf("%s still opens with key A", k)
			}
		}
		t.Logf("%d objects, rekey killed %d times", total, kills)
	})
}

// startWith starts `ompsync args...` of machine m with extra environment.
func (m *machineEnv) startWith(extra []string, args ...string) (*exec.Cmd, *syncBuffer) {
	m.t.Helper()
	cmd := exec.Command(ompsyncBin, args...)
	cmd.Env = append(m.environ(), extra...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	return cmd, out
}

// lastLine is the last line of a command's stderr: its error, after any log.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func journalAfter(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var j rekeyJournal
	json.Unmarshal(b, &j)
	return j.After
}

// readAll reassembles every session with the identities in keyFile and
// compares it with the local file; it returns what went wrong.
func readAll(t *testing.T, client remote.Client, keyFile string, files []string) string {
	t.Helper()
	c, err := crypt.New(crypt.Options{IdentityFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	r := repo.New(client, c)
	ctx := context.Background()
	for _, p := range files {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSuffix(filepath.Base(p), ".jsonl")[len("2026-11-30T00-00-00-000Z_"):]
		invs, err := r.Inventory(ctx, id, "laptop")
		if err != nil || len(invs) != 1 {
			return fmt.Sprintf("session %s: %d streams, %v", id, len(invs), err)
		}
		as, err := repotest.ReadGeneration(ctx, r, invs[0].Stream, invs[0].Newest(), 1<<30)
		if err != nil {
			return fmt.Sprintf("session %s: %v", id, err)
		}
		if !bytes.Equal(as.Data, want) {
			return fmt.Sprintf("session %s: %d bytes reassembled, %d local", id, len(as.Data), len(want))
		}
	}
	if _, err := r.GetCatalog(ctx, "laptop"); err != nil {
		return err.Error()
	}
	return ""
}

func openClient(t *testing.T, url string, s3 backend.S3Options) remote.Client {
	t.Helper()
	c, err := backend.Open(context.Background(), url, s3)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// objects is every object on the remote, key -> bytes.
func objects(t *testing.T, c remote.Client) map[string][]byte { return remotetest.Objects(t, c) }

// Converting a remote two machines share, through the commands, after an
// older ompsync on the desk left its catalog in plaintext in the encrypted
// remote: the desk without the key is refused with what to set, given the
// key it backs up (its plaintext catalog replaced, no delete by hand), rekey
// finds the plaintext the marker does not list, --force does not fail, and
// verify and ls exit 0 with every object encrypted.
func TestSharedConversionCommands(t *testing.T) {
	t.Parallel()
	url := "file://" + filepath.Join(t.TempDir(), "remote")
	laptop := newRestoreEnv(t, url, backend.S3Options{}, "laptop")
	desk := newRestoreEnv(t, url, backend.S3Options{}, "desk")
	files := corpusSessions(t)
	for _, f := range files[:len(files)/2] {
		laptop.write(f.rel, f.data, mtime0)
	}
	for _, f := range files[len(files)/2:] {
		desk.write(f.rel, f.data, mtime0)
	}
	for _, e := range []*restoreEnv{laptop, desk} {
		if r := e.run("agent", "--once"); r.code != 0 {
			t.Fatalf("plaintext agent --once: %d %s", r.code, r.stderr)
		}
	}
	c := openClient(t, url, backend.S3Options{})
	plain := objects(t, c)
	key, recipient := keygen(t, laptop.env, filepath.Join(t.TempDir(), "age.key"))
	laptop.env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = key
	if r := laptop.run("rekey", "--settle=0"); r.code != 0 || !strings.Contains(r.stdout, "re-encrypted") {
		t.Fatalf("rekey: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r := desk.run("agent", "--once")
	if msg := lastLine(r.stderr); r.code != exitFailure || !strings.Contains(msg, fp(t, recipient)) || !strings.Contains(msg, "encryption.identity_file") {
		t.Errorf("the desk without the key: exit %d, %q", r.code, msg)
	}
	// What an older desk did: its catalog, in plaintext, over the encrypted one.
	for k, v := range plain {
		if strings.HasPrefix(k, "v1/machines/desk/") {
			if err := c.Put(context.Background(), k, v, remote.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	desk.env["OMPSYNC_ENCRYPTION_IDENTITY_FILE"] = key
	if r := desk.run("agent", "--once"); r.code != 0 {
		t.Fatalf("the desk with the key: %d %s", r.code, r.stderr)
	}
	for k, v := range plain {
		if strings.HasPrefix(k, "v1/machines/desk/") {
			if err := c.Put(context.Background(), k, v, remote.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r := laptop.run("rekey", "--settle=0"); r.code != 0 || !strings.Contains(r.stdout, "re-encrypted") {
		t.Errorf("rekey over plaintext the marker does not list: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := laptop.run("rekey", "--force", "--settle=0"); r.code != 0 {
		t.Errorf("rekey --force: %d %q", r.code, r.stderr)
	}
	for k, v := range objects(t, c) {
		if k != repo.MarkerKey && len(v) > 0 && !bytes.HasPrefix(v, []byte(repo.AgeHeader)) {
			t.Errorf("%s not encrypted", k)
		}
	}
	for _, args := range [][]string{{"verify"}, {"ls"}} {
		if r := laptop.run(args...); r.code != 0 {
			t.Errorf("%s: exit %d %s", args[0], r.code, r.stderr)
		}
	}
	if r := desk.run("rekey"); r.code != 0 || !strings.Contains(r.stdout, "nothing to rekey") {
		t.Errorf("rekey at the end: %d %q %q", r.code, r.stdout, r.stderr)
	}
}
