package restore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// twoAgents backs up one omp session and one Claude Code transcript whose
// ids share their first 8 characters, and returns the places a reader on
// another machine builds, each with an empty folder.
func twoAgents(t *testing.T) (places []Place, ompID, claudeID string) {
	t.Helper()
	r := fileRemote(t)
	ompID, claudeID = "01a2aaaa-0000-7000-8000-000000000001", "01a2aaaa-1111-4000-8000-000000000002"
	ompDir, claudeDir := t.TempDir(), t.TempDir()
	write := func(p, data string, mtime time.Time) {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(ompDir, "sessions", "-w", "2026-10-07T00-00-00-000Z_"+ompID+".jsonl"),
		`{"type":"session","version":3,"id":"`+ompID+`","timestamp":"2026-10-07T00:00:00.000Z","cwd":"/w"}`+"\n", base)
	write(filepath.Join(claudeDir, "projects", "-w", claudeID+".jsonl"),
		`{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"`+claudeID+`","cwd":"/w","timestamp":"2026-10-07T01:00:00.000Z","message":{"role":"user","content":"hi"}}`+"\n", base.Add(time.Hour))
	cr, err := r.Agent("claude")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct {
		st  *store.Store
		r   *repo.Repo
		dir string
	}{{store.OMP(), r, ompDir}, {store.Claude(), cr, claudeDir}} {
		a, err := agent.New(b.r, agent.Options{AgentDir: b.dir, Store: b.st, StateDir: t.TempDir(), Machine: "laptop"})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Once(context.Background()); err != nil {
			t.Fatal(err)
		}
		a.Close()
	}
	dirs := map[string]string{"omp": t.TempDir(), "claude": t.TempDir(), "pi": t.TempDir(), "codex": t.TempDir()}
	places, problems, err := Places(context.Background(), r, func(name string) string { return dirs[name] })
	if err != nil || len(problems) > 0 || len(places) != 2 || places[1].Store.Name() != "claude" {
		t.Fatalf("Places = %d places, %v, %v", len(places), problems, err)
	}
	return places, ompID, claudeID
}

// A prefix two agents' sessions start with is ambiguous, listing each with
// its agent; --latest takes the newest, of whatever agent; a longer prefix
// finds one and restores it where its agent looks, and nothing else.
func TestRunAllAcrossAgents(t *testing.T) {
	places, ompID, claudeID := twoAgents(t)
	ctx := context.Background()
	_, err := RunAll(ctx, places, []string{"01a2aaaa"}, Options{})
	var amb *AmbiguousError
	if !errors.As(err, &amb) || len(amb.Candidates) != 2 || amb.Candidates[0].Agent != "claude" || amb.Candidates[1].Agent != "omp" {
		t.Fatalf("a prefix of both agents' sessions: %v", err)
	}
	if !strings.Contains(err.Error(), ompID) || !strings.Contains(err.Error(), claudeID) {
		t.Errorf("the ambiguity does not name both sessions: %v", err)
	}
	rep, err := RunAll(ctx, places, []string{"01a2aaaa"}, Options{Latest: true})
	if err != nil || len(rep.Results) != 1 || rep.Results[0].ID != claudeID || rep.Results[0].Agent != "claude" || rep.Results[0].Action != Created {
		t.Fatalf("--latest: %+v, %v", rep, err)
	}
	if _, err := os.Stat(filepath.Join(places[1].Dir, "projects", "-w", claudeID+".jsonl")); err != nil {
		t.Errorf("the Claude Code transcript is not in Claude Code's folder: %v", err)
	}
	rep, err = RunAll(ctx, places, []string{"01a2aaaa-00"}, Options{})
	if err != nil || len(rep.Results) != 1 || rep.Results[0].Agent != "omp" {
		t.Fatalf("a prefix of omp's session: %+v, %v", rep, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(places[0].Dir, "sessions", "-w")); len(entries) != 1 {
		t.Errorf("omp's folder holds %d files after restoring its one session", len(entries))
	}
	if _, err := RunAll(ctx, places, []string{"02"}, Options{}); err == nil || !strings.Contains(err.Error(), `no session id starts with "02"`) {
		t.Errorf("an unknown prefix: %v", err)
	}
	pl, id, err := Find(ctx, places, claudeID[:12], Options{})
	if err != nil || id != claudeID || pl.Store.Name() != "claude" {
		t.Errorf("Find = %s %s, %v", pl.Store.Name(), id, err)
	}
	list, _, err := ListAll(ctx, places, "")
	if err != nil || len(list) != 2 || list[0].Agent != "claude" || list[1].Agent != "omp" {
		t.Errorf("ListAll = %+v, %v", list, err)
	}
}

// A catalog the remote holds damaged is said by a restore across agents
// for the place it restores too, not only for a place it skips: the
// sessions of that machine are not found, and the restore must say so.
func TestRunAllSaysCatalogProblemsOfEveryPlace(t *testing.T) {
	places, _, claudeID := twoAgents(t)
	ctx := context.Background()
	// Another machine's Claude Code catalog, damaged.
	if err := places[1].Repo.Client().Put(ctx, repo.CatalogKey("desk"), []byte("not a catalog"), remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	said := func(rep *Report) bool {
		return rep != nil && slices.ContainsFunc(rep.Problems, func(p string) bool { return strings.Contains(p, "machine desk") })
	}
	rep, err := RunAll(ctx, places, []string{claudeID[:12]}, Options{})
	if err != nil || len(rep.Results) != 1 || rep.Results[0].ID != claudeID || !said(rep) {
		t.Fatalf("a restore of the Claude Code session: %+v, %v; want it restored and desk's damaged catalog said", rep, err)
	}
	if rep, err = RunAll(ctx, places, nil, Options{All: true}); err != nil || len(rep.Results) != 2 || !said(rep) {
		t.Fatalf("restore --all: %+v, %v; want both sessions and desk's damaged catalog said", rep, err)
	}
}
