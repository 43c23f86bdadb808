package agent

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A path that stays unreadable is one ERROR line, then one reminder with
// the count of failures per problemRelog, however often the passes come.
func TestProblemReminder(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var p problems
	err := &fs.PathError{Op: "open", Path: "/a/s.jsonl", Err: errors.New("permission denied")}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	for now.Before(t0.Add(2*problemRelog + problemRelog/2)) { // every 200 ms for 12.5 minutes
		p.report(log, now, "/a/s.jsonl", err)
		now = now.Add(200 * time.Millisecond)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want the first failure and two reminders:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], `msg="cannot read`) {
		t.Errorf("first line: %s", lines[0])
	}
	perRelog := int(problemRelog / (200 * time.Millisecond))
	for _, l := range lines[1:] {
		if !strings.Contains(l, `msg="still cannot read`) || !strings.Contains(l, "failures="+strconv.Itoa(perRelog)) || !strings.Contains(l, "since=2026-12-01T00:00:00Z") {
			t.Errorf("reminder %q lacks the count %d of failures and since when", l, perRelog)
		}
	}
}
