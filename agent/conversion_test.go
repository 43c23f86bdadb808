package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"log/slog"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
)

// convSecret is what every session of the conversion tests says: it must
// never be found in an object on the remote once the repository is
// encrypted.
const convSecret = "CONV-SECRET-5e1d-the-session-said-this"

// logLines is a logger that keeps its lines, for waiting on one.
type logLines struct {
	mu    sync.Mutex
	lines []string
	t     *testing.T
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, string(p))
	l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *logLines) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}

// running starts e's agent as a service does; stop returns what Run did.
func (e *env) running() (stop func() error) {
	e.t.Helper()
	a, err := New(e.repo, e.opts)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
			a.Close()
		})
		return runErr
	}
	e.t.Cleanup(func() { stop() })
	return stop
}

// assertNoPlaintext checks every object on the remote but the marker: it
// starts with the age header, and what does not is decompressed and
// searched for the secret, so that a failure says what leaked.
func assertNoPlaintext(t *testing.T, c remote.Client, when string) {
	t.Helper()
	for k, v := range remotetest.Objects(t, c) {
		if k == repo.MarkerKey || len(v) == 0 { // the marker; a blob link
			continue
		}
		if bytes.HasPrefix(v, []byte(repo.AgeHeader)) {
			continue
		}
		plain, err := repo.NewZstd().Open(v, 64<<20)
		leaked := err == nil && bytes.Contains(plain, []byte(convSecret)) || bytes.Contains(v, []byte(convSecret))
		t.Errorf("%s: object %s is not encrypted (%d bytes; the session's words in it: %v)", when, k, len(v), leaked)
	}
}

// assertRestores restores every machine's sessions through a fresh
// repository holding key, and compares them with what each machine has.
func assertRestores(t *testing.T, c remote.Client, key string, machines ...*env) {
	t.Helper()
	ctx := context.Background()
	cd, err := crypt.New(crypt.Options{IdentityFile: key})
	if err != nil {
		t.Fatal(err)
	}
	r := repo.New(c, cd)
	if _, _, err := listOMP(ctx, r); err != nil {
		t.Fatalf("ls: %v", err)
	}
	for _, m := range machines {
		to := filepath.Join(t.TempDir(), "restored")
		rep, err := restore.Run(ctx, r, nil, restore.Options{AgentDir: to, All: true, Machine: m.machine})
		if err != nil || !restoredAll(rep) {
			t.Fatalf("restore %s: %v %+v", m.machine, err, rep)
		}
		err = filepath.WalkDir(m.path("sessions"), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(m.agentDir, p)
			want, _ := os.ReadFile(p)
			got, err := os.ReadFile(filepath.Join(to, rel))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: restored %s: %v (%d bytes, want %d)", m.machine, rel, err, len(got), len(want))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// conversionSetup is two machines backing up into one plaintext remote,
// and a key for it.
func conversionSetup(t *testing.T, c remote.Client) (laptop, desk *env, key string, codec func() *crypt.Codec) {
	idFile, _, _, err := crypt.NewIdentityFile(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key = filepath.Join(t.TempDir(), "key.txt")
	if err := os.WriteFile(key, idFile, 0o600); err != nil {
		t.Fatal(err)
	}
	codec = func() *crypt.Codec {
		cd, err := crypt.New(crypt.Options{IdentityFile: key})
		if err != nil {
			t.Fatal(err)
		}
		return cd
	}
	laptop, desk = newEnv(t, c), newEnv(t, c)
	desk.machine, desk.opts.Machine = "desk", "desk"
	for i, e := range []*env{laptop, desk} {
		id := fmt.Sprintf("0190cccc-0000-7000-8000-%012d", i)
		e.write(fmt.Sprintf("sessions/-w/2026-10-07T00-45-40-000Z_%s.jsonl", id),
			[]byte(fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-10-07T00:45:40.000Z","cwd":"/w"}`+"\n", id)))
		e.appendTo(fmt.Sprintf("sessions/-w/2026-10-07T00-45-40-000Z_%s.jsonl", id), entryLine("00000001", "", convSecret+" before"))
		e.once()
	}
	return laptop, desk, key, codec
}

func deskSession(desk *env) string {
	return "sessions/-w/2026-10-07T00-45-40-000Z_0190cccc-0000-7000-8000-000000000001.jsonl"
}

// rekeyAll is 'ompsync rekey' on the laptop; nothing reports whether it
// had nothing to do.
func rekeyAll(t *testing.T, c remote.Client, codec *crypt.Codec, force bool) repo.RekeyProgress {
	t.Helper()
	prog, err := repo.New(c, codec).Rekey(context.Background(), repo.RekeyOptions{Force: force, Settle: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("rekey: %v", err)
	}
	return prog
}

// Encrypting a remote two machines share, laptop first, while the desk's
// agent runs without a key: the desk uploads nothing from then on, says
// once what to configure, and, restarted with the key, uploads what it
// held back. No object but the marker is ever plaintext after the rekey,
// and rekey is honest before and after.
func TestConversionDeskRunsPlaintext(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		laptop, desk, key, codec := conversionSetup(t, c)
		log := &logLines{t: t}
		desk.opts.Logger = slog.New(slog.NewTextHandler(log, nil))
		desk.opts.Interval = 20 * time.Millisecond
		stop := desk.running()

		if prog := rekeyAll(t, c, codec(), false); prog.Nothing || prog.Objects == 0 {
			t.Fatalf("rekey of a plaintext remote: %+v", prog)
		}
		assertNoPlaintext(t, c, "after rekey")

		// The desk, still without a key, gets new work.
		desk.appendTo(deskSession(desk), entryLine("00000002", "", convSecret+" while the desk has no key"))
		waitFor(t, "the desk to say its uploads stopped", func() bool { return log.count("uploads stopped") > 0 })
		desk.appendTo(deskSession(desk), entryLine("00000003", "", convSecret+" still no key"))
		waitFor(t, "the desk to try again", func() bool { return log.count("pass incomplete") > 0 || log.count("level=WARN") > 1 })
		if err := stop(); !errors.Is(err, repo.ErrEncryptionMismatch) {
			t.Errorf("desk stopped with %v, want the refusal", err)
		}
		if n := log.count("uploads stopped"); n != 1 {
			t.Errorf("the desk said %d times that its uploads stopped, want once", n)
		}
		if log.count("encryption.identity_file") == 0 {
			t.Error("the desk's warning does not name encryption.identity_file")
		}
		assertNoPlaintext(t, c, "while the desk ran without a key")
		if prog := rekeyAll(t, c, codec(), false); !prog.Nothing {
			t.Errorf("rekey with nothing plaintext: %+v", prog)
		}

		// Given the key, the desk goes on from its own state.
		desk.repo = repo.New(desk.client, codec())
		desk.once()
		laptop.repo = repo.New(laptop.client, codec())
		laptop.once()
		assertNoPlaintext(t, c, "after both machines have the key")
		assertRestores(t, c, key, laptop, desk)
		if prog := rekeyAll(t, c, codec(), false); !prog.Nothing {
			t.Errorf("rekey at the end: %+v", prog)
		}
	})
}

// The desk is given the key before anyone ran rekey: it refuses to start
// (the remote holds plaintext) and writes nothing; after the laptop's
// rekey it starts and uploads.
func TestConversionDeskKeyFirst(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		laptop, desk, key, codec := conversionSetup(t, c)
		desk.repo = repo.New(desk.client, codec())
		desk.appendTo(deskSession(desk), entryLine("00000002", "", convSecret+" with the key, before rekey"))
		before := remotetest.Objects(t, c)
		err := desk.tryOnce()
		if !errors.Is(err, repo.ErrEncryptionMismatch) || !strings.Contains(err.Error(), "ompsync rekey") {
			t.Fatalf("desk with a key on a plaintext remote: %v", err)
		}
		if after := remotetest.Objects(t, c); len(after) != len(before) {
			t.Errorf("the refused desk changed the remote: %d objects, were %d", len(after), len(before))
		}
		if prog := rekeyAll(t, c, codec(), false); prog.Nothing {
			t.Fatal("rekey of a plaintext remote had nothing to do")
		}
		desk.once()
		laptop.repo = repo.New(laptop.client, codec())
		laptop.once()
		assertNoPlaintext(t, c, "at the end")
		assertRestores(t, c, key, laptop, desk)
		if prog := rekeyAll(t, c, codec(), false); !prog.Nothing {
			t.Errorf("rekey at the end: %+v", prog)
		}
	})
}

// After an episode of an older ompsync (a machine without the key put its
// catalog and a chunk in plaintext into the encrypted remote), the machine
// given the key recovers without a manual delete, and rekey finds the
// plaintext objects by looking at them, though the marker lists nothing
// pending; rekey --force does not fail on them.
func TestConversionEpisodeRecovers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c remote.Client) {
		laptop, desk, key, codec := conversionSetup(t, c)
		ctx := context.Background()
		plain := remotetest.Objects(t, c)
		rekeyAll(t, c, codec(), false)
		// Put back, as the old desk did, its plaintext catalog and chunks.
		put := 0
		for k, v := range plain {
			if strings.Contains(k, "desk") || (strings.Contains(k, "0190cccc-0000-7000-8000-000000000001") && !strings.HasSuffix(k, "/meta")) {
				if err := c.Put(ctx, k, v, remote.PutOptions{}); err != nil {
					t.Fatal(err)
				}
				put++
			}
		}
		if put < 2 {
			t.Fatalf("only %d plaintext objects put back", put)
		}
		if prog := rekeyAll(t, c, codec(), false); prog.Nothing || prog.Objects < put {
			t.Errorf("rekey over %d plaintext objects: %+v", put, prog)
		}
		assertNoPlaintext(t, c, "after rekey")
		for k, v := range plain {
			if strings.Contains(k, "desk") {
				if err := c.Put(ctx, k, v, remote.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		desk.repo = repo.New(desk.client, codec())
		desk.appendTo(deskSession(desk), entryLine("00000002", "", convSecret+" after the episode"))
		desk.once() // its plaintext catalog is replaced, not fatal
		if prog := rekeyAll(t, c, codec(), true); prog.Objects == 0 {
			t.Errorf("rekey --force: %+v", prog)
		}
		assertNoPlaintext(t, c, "at the end")
		laptop.repo = repo.New(laptop.client, codec())
		laptop.once()
		assertRestores(t, c, key, laptop, desk)
		if prog := rekeyAll(t, c, codec(), false); !prog.Nothing {
			t.Errorf("rekey at the end: %+v", prog)
		}
	})
}
