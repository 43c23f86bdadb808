package restore

import (
	"os"
	"testing"
	"time"

	"github.com/ompsync/ompsync/store"
)

// Runs that share one local index (a pull's, one scan for all its
// sessions) see the files the earlier ones created: a session two machines
// hold at different paths is merged into the one file the first created,
// not written twice.
func TestRunsShareTheLocalIndex(t *testing.T) {
	r := fileRemote(t)
	c := corpus(t)[0]
	at := time.Date(2026, 10, 7, 1, 0, 0, 0, time.UTC)
	desk, tower := newMachine(t, r, "desk"), newMachine(t, r, "tower")
	deskRel, towerRel := sessionPath("-a", c.id, 1), sessionPath("-b", c.id, 1)
	desk.write(deskRel, c.data, at)
	tower.write(towerRel, c.data, at.Add(time.Minute))
	desk.backup()
	tower.backup()

	laptop := newMachine(t, r, "laptop")
	local, err := store.ScanLocal(store.OMP(), laptop.agentDir)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour) // the files it writes are not "changed in the last seconds"
	now := func() time.Time { return old.Add(2 * time.Hour) }
	rep := laptop.restoreOK([]string{c.id}, Options{Machine: "desk", Local: local, Now: now})
	if got := rep.Results[0]; got.Action != Created || got.Path != deskRel {
		t.Fatalf("first copy: %s at %s, want created at %s", got.Action, got.Path, deskRel)
	}
	rep = laptop.restoreOK([]string{c.id}, Options{Machine: "tower", Local: local, Now: now})
	if got := rep.Results[0]; got.Path != deskRel {
		t.Fatalf("second copy: %s at %s, want it merged into %s", got.Action, got.Path, deskRel)
	}
	if _, err := os.Stat(laptop.path(towerRel)); err == nil {
		t.Errorf("the second copy was written again at %s", towerRel)
	}
}
