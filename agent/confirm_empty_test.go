package agent

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A session file with nothing to upload yet (empty, or a first line
// without its newline) owes the remote no object: passes over it never say
// the remote lost any.
func TestNothingUploadedIsNotLost(t *testing.T) {
	e := newEnv(t, newFileClient(t))
	var log bytes.Buffer
	e.opts.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	e.writeRename("sessions/-w/2026-10-07T00-00-00-000Z_019e19b4-0000-7000-8000-000000000001.jsonl", nil)
	e.writeRename("sessions/-w/2026-10-07T00-00-00-000Z_019e19b4-0000-7000-8000-000000000002.jsonl", []byte(`{"type":"session","id":"019e19b4-0000-7000-8000-000000000002"`))
	for range 3 {
		e.once()
	}
	if strings.Contains(log.String(), "lost") {
		t.Errorf("passes over files with nothing to upload said the remote lost objects:\n%s", log.String())
	}
}
