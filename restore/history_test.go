package restore

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// backupAt runs one agent pass on m with its clock at now: the generation
// names and upload times it writes are now.
func (m *machine) backupAt(now time.Time, confirmDeletions bool) {
	m.t.Helper()
	a, err := agent.New(m.r, agent.Options{AgentDir: m.agentDir, StateDir: m.stateDir, Machine: m.name,
		ConfirmDeletions: confirmDeletions, Now: func() time.Time { return now }})
	if err != nil {
		m.t.Fatal(err)
	}
	defer a.Close()
	if err := a.Once(context.Background()); err != nil {
		m.t.Fatalf("agent pass on %s: %v", m.name, err)
	}
}

// replace rewrites a file whole through a temp file and a rename, as omp
// does: a new inode.
func (m *machine) replace(rel string, data []byte, mtime time.Time) {
	m.t.Helper()
	tmp := m.path(rel) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Chtimes(tmp, mtime, mtime); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Rename(tmp, m.path(rel)); err != nil {
		m.t.Fatal(err)
	}
}

// scenarioStep is what the backup held once a step was uploaded: the
// session as restore brings it back (every machine's copy merged), and
// each machine's copy.
type scenarioStep struct {
	at     time.Time // the step's upload
	merged []byte
	copies map[string][]byte // by machine; absent: no copy yet
}

// rewriteScenario is a session rewritten twice (omp's pruning: it shrank,
// then changed), continued on a second machine, and deleted on the first,
// each step uploaded an hour after the last by agents whose clocks say so.
func rewriteScenario(t *testing.T, r *repo.Repo) (id, rel string, steps []scenarioStep) {
	id = "019a0002-0000-7000-8000-00000000beef"
	rel = sessionPath("-w", id, 1)
	desk, laptop := newMachine(t, r, "desk"), newMachine(t, r, "laptop")
	// A second session keeps desk's folder from looking unmounted when
	// the first is deleted.
	desk.write(sessionPath("-w", "019a0003-0000-7000-8000-00000000cafe", 2), synthSession("019a0003-0000-7000-8000-00000000cafe", "/home/u/w", "bystander", 2), base)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Hour) }
	var deskCopy, laptopCopy []byte
	record := func(i int) {
		s := scenarioStep{at: at(i), copies: map[string][]byte{}}
		if deskCopy != nil {
			s.copies["desk"] = bytes.Clone(deskCopy)
		}
		if laptopCopy != nil {
			s.copies["laptop"] = bytes.Clone(laptopCopy)
		}
		s.merged = s.copies["desk"]
		if laptopCopy != nil {
			s.merged = s.copies["laptop"] // it extends desk's
		}
		steps = append(steps, s)
	}
	line := func(n int, text string) string {
		parent := ""
		if n > 1 {
			parent = "0000" + itoa(1000+n-1)
		}
		return messageLine("0000"+itoa(1000+n), parent, []string{"assistant", "user"}[n%2], "2026-10-07T0"+itoa(n)+":00:00.000Z", text)
	}
	v1 := slotLine("pruned twice") + headerLine(id, "/home/u/w") + line(1, "run the tests") + line(2, strings.Repeat("tool output ", 40))
	deskCopy = []byte(v1)
	desk.write(rel, deskCopy, at(1))
	desk.backupAt(at(1), false)
	record(1)

	// Appends longer than what came before, so compaction has chunks to
	// merge.
	long := strings.Repeat("and more ", 200)
	deskCopy = append(deskCopy, line(3, "step two "+long)+line(4, "done two")...)
	desk.appendTo(rel, string(deskCopy[len(v1):]), at(2))
	desk.backupAt(at(2), false)
	record(2)

	// omp prunes the old tool output: the file shrinks.
	deskCopy = []byte(strings.Replace(string(deskCopy), strings.Repeat("tool output ", 40), "[pruned]", 1))
	desk.replace(rel, deskCopy, at(3))
	desk.backupAt(at(3), false)
	record(3)

	n := len(deskCopy)
	deskCopy = append(deskCopy, line(5, "step four "+long)+line(6, "done four")...)
	desk.appendTo(rel, string(deskCopy[n:]), at(4))
	desk.backupAt(at(4), false)
	record(4)

	// Rewritten again, no shorter: an entry changed.
	deskCopy = []byte(strings.Replace(string(deskCopy), "done four", "DONE FOUR, retried", 1))
	desk.replace(rel, deskCopy, at(5))
	desk.backupAt(at(5), false)
	record(5)

	// The laptop restores it and goes on.
	laptop.restoreOK([]string{id}, Options{Now: func() time.Time { return at(6) }})
	laptopCopy = append(bytes.Clone(deskCopy), line(7, "on the laptop")+line(8, "done there")...)
	laptop.appendTo(rel, string(laptopCopy[len(deskCopy):]), at(6))
	laptop.backupAt(at(6), false)
	record(6)

	// Deleted on the desk.
	if err := os.Remove(desk.path(rel)); err != nil {
		t.Fatal(err)
	}
	desk.backupAt(at(7), true)
	record(7)
	return id, rel, steps
}

// history shows every copy: each machine's generations, when and why each
// began, its size, title and path, and which is current and deleted.
func TestHistory(t *testing.T) {
	r := fileRemote(t)
	id, rel, steps := rewriteScenario(t, r)
	h, problems, err := History(context.Background(), r, id[:13], Options{})
	if err != nil || len(problems) > 0 {
		t.Fatalf("history: %v %v", err, problems)
	}
	if h.ID != id || len(h.Problems) > 0 {
		t.Fatalf("history of %s: %+v", h.ID, h)
	}
	want := []struct {
		machine string
		step    int // its start
		reason  string
		size    int
		current bool
		state   string
	}{
		{"desk", 1, "new", len(steps[1].copies["desk"]), false, ""},
		{"desk", 3, "shrank", len(steps[3].copies["desk"]), false, ""},
		{"desk", 5, "rewritten", len(steps[4].copies["desk"]), true, repo.StateDeleted},
		{"laptop", 6, "new", len(steps[5].copies["laptop"]), true, repo.StatePresent},
	}
	if len(h.Copies) != len(want) {
		t.Fatalf("%d copies, want %d: %+v", len(h.Copies), len(want), h.Copies)
	}
	for i, w := range want {
		c := h.Copies[i]
		started := steps[w.step-1].at
		if c.Machine != w.machine || !c.Started.Equal(started) || c.Reason != w.reason || c.Bytes != int64(w.size) ||
			c.Current != w.current || c.State != w.state || c.Title != "pruned twice" || c.Path != rel || c.Cwd != "/home/u/w" ||
			c.Incomplete || c.LastUpload.IsZero() || c.Generation != repo.NewGeneration(started.UnixNano()) {
			t.Errorf("copy %d: %+v\nwant %s from step %d (%v), %s, %d bytes, current %v, state %q", i, c, w.machine, w.step, started, w.reason, w.size, w.current, w.state)
		}
	}
	if h.Copies[1].Previous != h.Copies[0].Generation || h.Copies[2].Previous != h.Copies[1].Generation {
		t.Errorf("previous generations: %s<-%s, %s<-%s", h.Copies[0].Generation, h.Copies[1].Previous, h.Copies[1].Generation, h.Copies[2].Previous)
	}

	// A generation cut off before it was complete is listed as incomplete
	// (the agents wrote format 2, where a chunk at 0 would complete it:
	// this one has only a later chunk); an unreadable meta is a problem,
	// the copy still listed.
	s := repo.Stream{SessionID: id, Machine: "desk", Name: repo.SessionStream}
	gen := repo.NewGeneration(steps[6].at.Add(time.Minute).UnixNano())
	data := steps[4].copies["desk"][256:300]
	if _, err := r.PutChunk(context.Background(), s, gen, repo.ChunkHeader{Start: 256, End: 300, HashFrom: 256, SHA256: repo.HashHex(data), StreamSHA256: repo.HashHex(data)}, data, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Client().Put(context.Background(), s.MetaKey(h.Copies[0].Generation), []byte("not a meta"), remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	h, _, err = History(context.Background(), r, id, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Copies) != 5 || !h.Copies[3].Incomplete || h.Copies[3].Current || h.Copies[3].Generation != gen || !h.Copies[2].Current {
		t.Errorf("with a generation without meta: %+v", h.Copies)
	}
	if len(h.Problems) != 1 || !strings.Contains(h.Problems[0], h.Copies[0].Generation) || h.Copies[0].Bytes != int64(want[0].size) {
		t.Errorf("an unreadable meta: problems %q, copy %+v", h.Problems, h.Copies[0])
	}
}
