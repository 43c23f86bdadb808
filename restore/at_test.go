package restore

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/compact"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/repo"
)

// checkAt restores and cats the session at a time between each step and
// the next: exactly the bytes the backup held then, merged and per machine.
func checkAt(t *testing.T, r *repo.Repo, id string, steps []scenarioStep) {
	t.Helper()
	ctx := context.Background()
	for i, s := range steps {
		at := s.at.Add(30 * time.Minute)
		m := newMachine(t, r, "fresh")
		rep, err := m.restore([]string{id}, Options{At: at})
		if err != nil || !rep.OK() {
			t.Fatalf("step %d: restore --at %v: %v %+v", i+1, at, err, rep)
		}
		if got := m.read(rep.Results[0].Path); !bytes.Equal(got, s.merged) {
			t.Errorf("step %d: restore --at gave %d bytes, the backup held %d", i+1, len(got), len(s.merged))
		}
		pr, _, err := catRead(ctx, r, id, Options{At: at})
		if err != nil || !bytes.Equal(pr.Data, s.merged) {
			t.Errorf("step %d: cat --at: %v, %d bytes, want %d", i+1, err, len(pr.Data), len(s.merged))
		}
		for _, machine := range []string{"desk", "laptop"} {
			pr, _, err := catRead(ctx, r, id, Options{At: at, Machine: machine})
			want, had := s.copies[machine]
			switch {
			case !had && (err == nil || !strings.Contains(err.Error(), "held no copy")):
				t.Errorf("step %d: cat --machine %s --at before its first upload: %v", i+1, machine, err)
			case had && (err != nil || !bytes.Equal(pr.Data, want)):
				t.Errorf("step %d: cat --machine %s --at: %v, want its %d bytes", i+1, machine, err, len(want))
			}
		}
	}
	before := steps[0].at.Add(-time.Minute)
	if rep, err := newMachine(t, r, "fresh").restore([]string{id}, Options{At: before}); err == nil && (rep.OK() || !strings.Contains(rep.Results[0].Error, "held no copy")) {
		t.Errorf("restore --at before the first upload: %+v", rep.Results)
	}
	if _, _, err := catRead(ctx, r, id, Options{At: before}); err == nil || !strings.Contains(err.Error(), "held no copy of it at") {
		t.Errorf("cat --at before the first upload: %v", err)
	}
}

// A session rewritten twice, continued on a second machine and deleted on
// the first: at a time between each step, restore --at and cat --at give
// exactly the bytes the backup held; and still after compaction has merged
// the chunks of every generation, keeping their upload times.
func TestRestoreAt(t *testing.T) {
	r := fileRemote(t)
	id, _, steps := rewriteScenario(t, r)
	checkAt(t, r, id, steps)

	if merged := compactAll(t, r, id); merged < 2 {
		t.Fatal("compaction merged nothing: the test proves nothing about it")
	}
	checkAt(t, r, id, steps)
}

// Chunks an older agent wrote carry no marks: the listing's modification
// times stand in, and a compaction turns them into marks.
func TestRestoreAtWithoutMarks(t *testing.T) {
	dir := t.TempDir()
	c, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := repo.New(c, repo.NewZstd())
	m := newMachine(t, r, "old")
	id := "019a0004-0000-7000-8000-000000000001"
	rel := sessionPath("-w", id, 1)
	data := synthSession(id, "/w", "old agent", 2)
	var sizes []int
	for i := range 3 {
		if i == 0 {
			m.write(rel, data, base)
		} else {
			more := messageLine("0000100"+itoa(i), "", "user", "2026-10-07T01:00:00.000Z", "more "+itoa(i))
			m.appendTo(rel, more, base)
			data = append(data, more...)
		}
		m.backupAt(base.Add(time.Duration(i)*time.Hour), false)
		sizes = append(sizes, len(data))
	}
	// Strip the marks, as an agent before them wrote its chunks, and date
	// each object an hour apart.
	ctx := context.Background()
	invs, err := r.Inventory(ctx, id, "old")
	if err != nil {
		t.Fatal(err)
	}
	s, g := invs[0].Stream, invs[0].Newest()
	if len(g.Chunks) != 3 {
		t.Fatalf("%d chunks, want one per pass", len(g.Chunks))
	}
	listed := base.Add(10 * time.Hour)
	for i, ch := range g.Chunks {
		h, body, err := r.GetChunk(ctx, s, g.Name, ch.Start, ch.End)
		if err != nil || len(h.Uploaded) != 1 {
			t.Fatalf("chunk %d: %v, marks %v", i, err, h.Uploaded)
		}
		h.Uploaded = nil
		if _, err := r.PutChunk(ctx, s, g.Name, h, body, remote.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		mt := listed.Add(time.Duration(i) * time.Hour)
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(s.ChunkKey(g.Name, ch.Start, ch.End))), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		for i, n := range sizes {
			pr, _, err := catRead(ctx, r, id, Options{At: listed.Add(time.Duration(i)*time.Hour + 30*time.Minute)})
			if err != nil || len(pr.Data) != n || !bytes.Equal(pr.Data, data[:n]) {
				t.Errorf("%s: cat --at after chunk %d: %v, %d bytes, want %d", when, i, err, len(pr.Data), n)
			}
		}
		if _, _, err := catRead(ctx, r, id, Options{At: listed.Add(-time.Minute)}); err == nil {
			t.Errorf("%s: cat --at before the first chunk was listed: no error", when)
		}
	}
	check("listing times")
	if res, err := compact.Stream(ctx, r, s, g.Name, true, compact.Policy{}); err != nil || res.Merged < 2 {
		t.Fatalf("compact: %v %+v", err, res)
	}
	check("after compaction")
}

func TestParseAt(t *testing.T) {
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2026-10-07T10:30:00Z", time.Date(2026, 10, 7, 10, 30, 0, 0, time.UTC)},
		{"2026-10-07T12:30:00+02:00", time.Date(2026, 10, 7, 10, 30, 0, 0, time.UTC)},
		{"3h", now.Add(-3 * time.Hour)},
		{"2h30m", now.Add(-150 * time.Minute)},
		{"2d", now.Add(-48 * time.Hour)},
		{"0s", now},
	} {
		got, err := ParseAt(tc.in, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("%q: %v %v, want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "-3h", "3", "d", "-2d", "2.5d", "2026-10-07", "65536d", "-384307168202282326d", "-9223372036854775807d"} {
		if _, err := ParseAt(bad, now); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
