package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/session"
)

// syncCluster is several machines sharing one bucket, each running a real
// `ompsync agent --pull` process.
type syncCluster struct {
	t        *testing.T
	machines []*machineEnv
	procs    map[*machineEnv]*exec.Cmd
	outs     map[*machineEnv]*syncBuffer
}

func newSyncCluster(t *testing.T, b remotetest.Backend, names ...string) *syncCluster {
	c := &syncCluster{t: t, procs: map[*machineEnv]*exec.Cmd{}, outs: map[*machineEnv]*syncBuffer{}}
	for _, n := range names {
		c.machines = append(c.machines, newMachineEnv(t, b.URL, b.S3, n))
	}
	t.Cleanup(func() {
		for _, m := range c.machines {
			c.stop(m)
		}
	})
	return c
}

func (c *syncCluster) start(m *machineEnv) {
	cmd, out := m.start("agent", "--pull", "--interval", "100ms", "--sync-pull-interval", "300ms")
	c.procs[m], c.outs[m] = cmd, out
}

func (c *syncCluster) startAll() {
	for _, m := range c.machines {
		c.start(m)
	}
}

func (c *syncCluster) stop(m *machineEnv) {
	if cmd := c.procs[m]; cmd != nil {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		delete(c.procs, m)
	}
}

func (c *syncCluster) kill(m *machineEnv) {
	if cmd := c.procs[m]; cmd != nil {
		cmd.Process.Kill()
		cmd.Wait()
		delete(c.procs, m)
	}
}

func (c *syncCluster) logs() string {
	var b strings.Builder
	for m, out := range c.outs {
		fmt.Fprintf(&b, "=== %s\n%s\n", m.machine, out)
	}
	return b.String()
}

// sessionFile finds the file of session id under m's sessions folder.
func (m *machineEnv) sessionFile(id string) string {
	matches, _ := filepath.Glob(filepath.Join(m.agentDir, "sessions", "*", "*_"+id+".jsonl"))
	if len(matches) == 0 {
		return ""
	}
	return matches[0]
}

func (m *machineEnv) readSession(id string) []byte {
	p := m.sessionFile(id)
	if p == "" {
		return nil
	}
	b, _ := os.ReadFile(p)
	return b
}

// newSession writes a session as omp does (whole, by rename) on m.
func (m *machineEnv) newSession(id string, lines ...string) string {
	m.t.Helper()
	p := filepath.Join(m.agentDir, "sessions", "-work", "2026-11-30T00-00-00-000Z_"+id+".jsonl")
	body := titleSlotLine("") + fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-11-30T00:00:00Z","cwd":"/home/u/work"}`+"\n", id)
	body += strings.Join(lines, "")
	os.MkdirAll(filepath.Dir(p), 0o700)
	if err := os.WriteFile(p+".tmp", []byte(body), 0o600); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		m.t.Fatal(err)
	}
	return p
}

func (m *machineEnv) appendSession(id string, lines ...string) {
	m.t.Helper()
	f, err := os.OpenFile(m.sessionFile(id), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		m.t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.WriteString(l); err != nil {
			m.t.Fatal(err)
		}
	}
}

func entry(id, parent, text string) string {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	return fmt.Sprintf(`{"type":"message","id":%q,"parentId":%s,"timestamp":"2026-11-30T00:00:01Z","message":{"role":"user","content":%q}}`+"\n", id, p, text)
}

func (c *syncCluster) waitConverged(what, id string, want func(b []byte) bool) {
	c.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		ok := true
		var first []byte
		for i, m := range c.machines {
			b := m.readSession(id)
			if b == nil || !want(b) || i > 0 && !bytes.Equal(b, first) {
				ok = false
				break
			}
			first = b
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			for _, m := range c.machines {
				c.t.Logf("%s holds:\n%s", m.machine, m.readSession(id))
			}
			c.t.Fatalf("machines did not converge on %s\n%s", what, c.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// noise is incompressible text, so stored sizes show what was uploaded.
func noise(n int) string {
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[rng.IntN(36)]
	}
	return string(b)
}

func hasLines(lines ...string) func([]byte) bool {
	return func(b []byte) bool {
		for _, l := range lines {
			if !bytes.Contains(b, []byte(l)) {
				return false
			}
		}
		return true
	}
}

func TestSyncTwoAndThreeMachines(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		t.Parallel() // each backend is a remote of its own
		c := newSyncCluster(t, b, "laptop", "desk", "box")
		laptop, desk, box := c.machines[0], c.machines[1], c.machines[2]
		const id = "019a0000-0000-7000-8000-00000000abcd"
		e1 := entry("00000001", "", "start on the laptop "+noise(200_000))
		laptop.newSession(id, e1)
		c.startAll()

		// A new session appears everywhere, byte for byte.
		c.waitConverged("a new session", id, hasLines(e1))

		// No echo: what the desk pulled goes up as references to the
		// laptop's copy, not as the desk's own bytes.
		r := openTestRepo(t, b.URL, b.S3)
		size := int64(len(desk.readSession(id)))
		waitUntil(t, "the desk's copy on the remote", func() bool { return remoteSize(t, r, id, "desk") == size })
		invs, err := r.Inventory(t.Context(), id, "desk")
		if err != nil {
			t.Fatal(err)
		}
		var stored int64
		for _, inv := range invs {
			for _, g := range inv.Generations {
				for _, ch := range g.Chunks {
					stored += ch.Size
				}
			}
		}
		if stored > 4096 {
			t.Fatalf("the desk uploaded %d bytes of chunks for a %d-byte session it only pulled", stored, size)
		}

		// Work resumed on the desk comes back to the laptop and the box.
		e2 := entry("00000002", "00000001", "resumed on the desk")
		desk.appendSession(id, e2)
		c.waitConverged("work resumed elsewhere", id, hasLines(e1, e2))

		// Simultaneous appends on two machines converge to one merged file.
		e3 := entry("00000003", "00000002", "laptop, offline")
		e4 := entry("00000004", "00000002", "desk, at the same time")
		c.stop(laptop)
		c.stop(desk)
		laptop.appendSession(id, e3)
		desk.appendSession(id, e4)
		c.start(laptop)
		c.start(desk)
		c.waitConverged("simultaneous appends", id, hasLines(e1, e2, e3, e4))
		merged := laptop.readSession(id)
		lines := bytes.SplitAfter(merged, []byte("\n"))
		seen := map[string]bool{}
		for _, l := range lines {
			if len(l) > 0 && seen[string(l)] {
				t.Fatalf("line repeated after merge: %s", l)
			}
			seen[string(l)] = true
		}
		if _, ok := session.ParseTitleSlot(merged); !ok {
			t.Fatal("merged file lost its title slot")
		}

		// A delete stays a delete on its machine; the others keep the session.
		p := box.sessionFile(id)
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		e5 := entry("00000005", "00000003", "more work on the laptop")
		laptop.appendSession(id, e5)
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if box.sessionFile(id) != "" {
				t.Fatalf("a session deleted on the box came back\n%s", c.logs())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if desk.readSession(id) == nil || laptop.readSession(id) == nil {
			t.Fatal("a delete on one machine deleted the session elsewhere")
		}
	})
}

// An agent killed with SIGKILL in the middle of pulling leaves no damaged
// file, and the next run completes the merge.
func TestSyncSIGKILLMidPull(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		t.Parallel() // each backend is a remote of its own
		c := newSyncCluster(t, b, "laptop", "desk")
		laptop, desk := c.machines[0], c.machines[1]
		var ids []string
		for i := range 20 {
			id := fmt.Sprintf("019a0000-0000-7000-8000-%012d", i)
			ids = append(ids, id)
			laptop.newSession(id, entry("00000001", "", strings.Repeat("big ", 20000)))
		}
		if code, out := laptop.ompsync("agent", "--once"); code != 0 {
			t.Fatalf("laptop --once: %d\n%s", code, out)
		}
		for round := 0; round < 4; round++ {
			c.start(desk)
			time.Sleep(time.Duration(150+round*100) * time.Millisecond)
			c.kill(desk)
			// Every file the desk has is a prefix-complete copy: never damaged.
			for _, id := range ids {
				got := desk.readSession(id)
				if got != nil && !bytes.Equal(got, laptop.readSession(id)) {
					t.Fatalf("round %d: %s is damaged on the desk (%d bytes)", round, id, len(got))
				}
			}
		}
		c.start(desk)
		for _, id := range ids {
			want := laptop.readSession(id)
			deadline := time.Now().Add(30 * time.Second)
			for !bytes.Equal(desk.readSession(id), want) {
				if time.Now().After(deadline) {
					t.Fatalf("%s never arrived on the desk\n%s", id, c.logs())
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	})
}

// A session that a process holds open (as an idle omp does) is never
// changed by a pull: the other machine's work waits on the remote, one INFO
// line says so, and it is merged once the file is released.
func TestSyncWaitsForHeldSession(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := newSyncCluster(t, remotetest.Backend{Name: "file", URL: "file://" + filepath.Join(t.TempDir(), "remote")}, "laptop", "desk")
	laptop, desk := c.machines[0], c.machines[1]
	const id = "019a0000-0000-7000-8000-00000000beef"
	e1 := entry("00000001", "", "started on the laptop")
	laptop.newSession(id, e1)
	desk.newSession(id, e1)
	held, err := os.OpenFile(desk.sessionFile(id), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sleep", "120")
	holder.Stdout = held
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	held.Close()
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	before := desk.readSession(id)
	past := time.Now().Add(-time.Hour)
	os.Chtimes(desk.sessionFile(id), past, past) // not "changed just now"
	c.startAll()

	e2 := entry("00000002", "00000001", "more on the laptop")
	laptop.appendSession(id, e2)
	waitUntil(t, "the desk's pull to notice the held file", func() bool {
		return strings.Contains(c.outs[desk].String(), "waiting for the session to be released")
	})
	time.Sleep(1500 * time.Millisecond) // several more pulls
	if got := desk.readSession(id); !bytes.Equal(got, before) {
		t.Fatalf("a pull changed a file another process holds open:\n%s", got)
	}
	logs := c.outs[desk].String()
	if n := strings.Count(logs, `level=INFO msg="pull: waiting for the session to be released`); n != 1 {
		t.Errorf("%d INFO lines say the pull waits, want 1 (then debug):\n%s", n, logs)
	}
	if !strings.Contains(logs, fmt.Sprintf("pid %d: sleep", holder.Process.Pid)) {
		t.Errorf("the waiting line does not name the holding process:\n%s", logs)
	}
	if strings.Contains(logs, "level=WARN") {
		t.Errorf("a held session gave a WARN:\n%s", logs)
	}

	_ = holder.Process.Kill()
	_ = holder.Wait()
	c.waitConverged("the work that waited", id, hasLines(e1, e2))
}
