package restore

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/writetest"
	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// A session from another machine, whose folder is not here, is placed in
// this machine's folder for it (by path_map here), its header's cwd
// rewritten for it; what this machine adds goes back to the first as an
// append, its own bytes kept: the two copies stay one session, with no
// merge, no pre-merge file and no new generation on either side.
func TestPlacedElsewhereStaysOneSession(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	info, _ := store.OMP().Describe(f.data)
	const aCwd = "/Users/ana/src/api"
	aData := writetest.Through(f.data, project.Mapping{From: info.Cwd, To: aCwd}.Writer)
	if !bytes.Contains(aData, []byte(`"cwd":"`+aCwd+`"`)) {
		t.Fatalf("the fixture's header cwd %q was not rewritten", info.Cwd)
	}
	a := newMachine(t, r, "mac")
	aRel := sessionPath("--Users-ana-src-api--", f.id, 1)
	a.write(aRel, aData, base)
	a.backup()

	bHome := t.TempDir()
	bCwd := filepath.Join(bHome, "src", "api")
	if err := os.MkdirAll(bCwd, 0o755); err != nil {
		t.Fatal(err)
	}
	b := newMachine(t, r, "linux")
	pl := &project.Placer{Home: bHome, Maps: []project.Mapping{{From: "/Users/ana", To: bHome}}}
	dry := b.restoreOK([]string{f.id}, Options{Placer: pl, DryRun: true})
	if res := dry.Results[0]; res.Cwd != bCwd || res.Placed != project.PathMap {
		t.Fatalf("dry run places it in %q (%s), want %s by path_map", res.Cwd, res.Placed, bCwd)
	}
	rep := b.restoreOK([]string{f.id}, Options{Placer: pl})
	res := rep.Results[0]
	bRel := sessionPath("-src-api", f.id, 1)
	if res.Path != bRel || res.Action != Created || res.Cwd != bCwd {
		t.Fatalf("placed at %s (%s, cwd %s), want %s", res.Path, res.Action, res.Cwd, bRel)
	}
	if len(res.Sources) != 0 {
		t.Errorf("a rewritten copy was recorded as coming from %v: the uploader would reference bytes no stream holds", res.Sources)
	}
	bData := b.read(bRel)
	if want := writetest.Through(aData, project.Mapping{From: aCwd, To: bCwd}.Writer); !bytes.Equal(bData, want) {
		t.Fatalf("B's file is not A's with B's folder:\n%.400s", bData)
	}
	b.backup()
	gen := catalogEntry(t, r, "linux", f.id).Generation
	// verify on B compares A's copy in B's form: the same file, not diverged.
	checks, _, err := Verify(t.Context(), r, []string{f.id}, Options{AgentDir: b.agentDir})
	if err != nil || len(checks) != 1 || !checks[0].OK() {
		t.Fatalf("verify on B: %v %+v", err, checks)
	}
	for _, cc := range checks[0].Copies {
		if cc.Newest && cc.Stream == repo.SessionStream && cc.Local != LocalSame {
			t.Errorf("verify on B: machine %s's copy compares %q with B's placed file, want %q", cc.Machine, cc.Local, LocalSame)
		}
	}

	// B goes on with the session; its new line goes back to A as an append.
	line := `{"type":"message","id":"b0b0b0b0","parentId":"e4bb7a2c","timestamp":"2026-10-08T10:00:00.000Z","message":{"role":"user","content":"more from linux"}}` + "\n"
	b.appendTo(bRel, line, base.Add(3600e9))
	b.backup()
	if g := catalogEntry(t, r, "linux", f.id).Generation; g != gen {
		t.Errorf("B's append started generation %s after %s", g, gen)
	}
	rep = a.restoreOK([]string{f.id}, Options{Placer: &project.Placer{}, Machine: "linux"})
	if res := rep.Results[0]; res.Action != Appended || res.Backup != "" || res.Path != aRel {
		t.Fatalf("A took B's work as %s at %s (backup %q), want an append at %s", res.Action, res.Path, res.Backup, aRel)
	}
	if got, want := a.read(aRel), append(append([]byte(nil), aData...), line...); !bytes.Equal(got, want) {
		t.Fatalf("A's file is not its own bytes and B's line:\n%.400s", got)
	}
	a.backup()
	if e := catalogEntry(t, r, "mac", f.id); e.Project == nil || e.Project.Home != "" && strings.HasPrefix(e.Project.Home, "..") {
		t.Logf("A's project: %+v", e.Project)
	}
	// Restoring on A what A has: nothing to do.
	rep = a.restoreOK([]string{f.id}, Options{Placer: &project.Placer{}})
	if res := rep.Results[0]; res.Action != Unchanged {
		t.Errorf("A's own copy and B's came back as %s", res.Action)
	}
}

func catalogEntry(t *testing.T, r *repo.Repo, machine, id string) repo.CatalogEntry {
	t.Helper()
	c, err := r.GetCatalog(t.Context(), machine)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range c.Sessions {
		if e.ID == id {
			return e
		}
	}
	t.Fatalf("machine %s's catalog has no session %s", machine, id)
	return repo.CatalogEntry{}
}

// A session recorded on Windows (C:\Users\ana\app) is placed by a
// path_map pair in this machine's folder, its header rewritten; without
// one it keeps the folder it was recorded in.
func TestPlacedFromWindows(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	info, _ := store.OMP().Describe(f.data)
	const win = `C:\Users\ana\app`
	data := writetest.Through(f.data, project.Mapping{From: info.Cwd, To: win}.Writer)
	if !bytes.Contains(data, []byte(`"cwd":"C:\\Users\\ana\\app"`)) {
		t.Fatalf("the header was not rewritten: %.300s", data)
	}
	a := newMachine(t, r, "win")
	rel := sessionPath("--C--Users-ana-app--", f.id, 1)
	a.write(rel, data, base)
	a.backup()

	home := t.TempDir()
	m, err := project.ParseMap(`C:\Users\ana=` + home)
	if err != nil {
		t.Fatal(err)
	}
	b := newMachine(t, r, "linux")
	rep := b.restoreOK([]string{f.id}, Options{Placer: &project.Placer{Home: home, Maps: []project.Mapping{m}}})
	res := rep.Results[0]
	want := filepath.Join(home, "app")
	if res.Cwd != want || res.Placed != project.PathMap || res.Path != sessionPath("-app", f.id, 1) {
		t.Fatalf("placed at %s in %s (%s), want %s", res.Path, res.Cwd, res.Placed, want)
	}
	if got := b.read(res.Path); !bytes.Contains(got, []byte(`"cwd":"`+want+`"`)) {
		t.Errorf("the header's cwd was not rewritten for this machine: %.300s", got)
	}
	c := newMachine(t, r, "other")
	rep = c.restoreOK([]string{f.id}, Options{Placer: &project.Placer{Home: home}})
	if res := rep.Results[0]; res.Path != rel || res.Placed != project.Recorded || len(res.Notes) == 0 || !bytes.Equal(c.read(rel), data) {
		t.Errorf("with nowhere to go: placed at %s (%s), notes %q", res.Path, res.Placed, res.Notes)
	}
}

// A catalog entry whose project climbs out of the folder it is joined to
// is refused, named: never a folder outside the checkout.
func TestHostileProjectRefused(t *testing.T) {
	for _, id := range []project.ID{{Path: "../../etc"}, {Home: "/etc"}, {Origin: strings.Repeat("x", 5000)}, {Path: `a\..\..\b`}, {Origin: "a\nb"}} {
		c := repo.Catalog{Machine: "m", Sessions: []repo.CatalogEntry{{ID: "01a113d2-be76-73c7-986b-d3ac6e3fbb83", Path: "sessions/-w/x_01a113d2-be76-73c7-986b-d3ac6e3fbb83.jsonl",
			Generation: "18ee395f0cb3b929", State: repo.StatePresent, Project: &id}}}
		got, err := repo.DecodeCatalog(repo.EncodeCatalog(c))
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Sessions) != 0 || len(got.Refused) != 1 || !strings.Contains(got.Refused[0], "project") {
			t.Errorf("project %+v: %d sessions, refused %q", id, len(got.Sessions), got.Refused)
		}
	}
}

// The local file a merge replaced is kept beside the session for
// PreMergeKeep, then removed by the next restore or pull, which says so.
func TestPreMergeFilesExpire(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	a := newMachine(t, r, "a")
	rel := sessionPath("-w", f.id, 1)
	a.write(rel, f.data, base)
	a.backup()
	old := store.PreMergeName(rel, time.Now().Add(-PreMergeKeep-time.Hour))
	recent := store.PreMergeName(rel, time.Now().Add(-PreMergeKeep+time.Hour))
	a.write(old, []byte("old\n"), base)
	a.write(recent, []byte("recent\n"), base)
	rep := a.restoreOK([]string{f.id}, Options{})
	if _, err := os.Stat(a.path(old)); !os.IsNotExist(err) {
		t.Errorf("a pre-merge file past %s is still there: %v", PreMergeKeepText, err)
	}
	if _, err := os.Stat(a.path(recent)); err != nil {
		t.Errorf("a recent pre-merge file was removed: %v", err)
	}
	if len(rep.Cleanup) != 1 || !strings.Contains(rep.Cleanup[0], old) || !strings.Contains(rep.Cleanup[0], PreMergeKeepText) {
		t.Errorf("cleanup said %q", rep.Cleanup)
	}
}

// A home that is a symlink (/home/ana -> /data/ana): omp names a session's
// folder from the cwd and home resolved, so a session restored on its own
// machine, in the folder it recorded, goes back to the folder omp named,
// not to one named from the home as the environment gives it.
func TestPlacedUnderSymlinkedHome(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	info, _ := store.OMP().Describe(f.data)
	realHome := t.TempDir()
	cwd := filepath.Join(realHome, "src", "api")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Symlink(realHome, home); err != nil {
		t.Fatal(err)
	}
	data := writetest.Through(f.data, project.Mapping{From: info.Cwd, To: cwd}.Writer)
	a := newMachine(t, r, "box")
	rel := sessionPath("-src-api", f.id, 1) // as omp named it
	a.write(rel, data, base)
	a.backup()
	to := t.TempDir()
	rep := a.restoreOK([]string{f.id}, Options{AgentDir: to, Placer: &project.Placer{Home: home}})
	if res := rep.Results[0]; res.Path != rel || res.Placed != project.SamePath {
		t.Fatalf("restored to %s (%s), want %s, where omp looks", res.Path, res.Placed, rel)
	}
}

// A session that ran outside its machine's home, where omp names its
// folder without a home ("-tmp-x" under the temp folder), is given back in
// the folder it recorded when it is placed at the same path: the name does
// not depend on the home, and omp looks there.
func TestPlacedOutsideHomeKeepsItsFolder(t *testing.T) {
	r := fileRemote(t)
	f := corpus(t)[0]
	info, _ := store.OMP().Describe(f.data)
	cwd := filepath.Join(t.TempDir(), "x")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	data := writetest.Through(f.data, project.Mapping{From: info.Cwd, To: cwd}.Writer)
	a := newMachine(t, r, "box")
	rel := sessionPath("-tmp-"+strings.ReplaceAll(strings.TrimPrefix(cwd, os.TempDir()+"/"), "/", "-"), f.id, 1) // as omp names it
	a.write(rel, data, base)
	a.backup()
	to := t.TempDir()
	rep := a.restoreOK([]string{f.id}, Options{AgentDir: to, Placer: &project.Placer{Home: t.TempDir()}})
	if res := rep.Results[0]; res.Path != rel || res.Placed != project.SamePath {
		t.Fatalf("restored to %s (%s), want %s, where omp looks", res.Path, res.Placed, rel)
	}
}
