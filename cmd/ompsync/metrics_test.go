package main

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote/backend"
)

// With metrics.addr set, the agent serves Prometheus metrics that show what
// it uploaded and what is pending.
func TestAgentMetrics(t *testing.T) {
	m := newMachineEnv(t, "file://"+t.TempDir(), backend.S3Options{}, "metered")
	if _, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 9, 2); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd, out := m.start("agent", "--interval", "100ms", "--metrics-addr", addr)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var body string
	waitUntil(t, "metrics showing the first upload", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return strings.Contains(body, "ompsync_uploaded_objects_total") && !strings.Contains(body, "ompsync_uploaded_objects_total 0\n")
	})
	for _, name := range []string{"ompsync_bytes_pending", "ompsync_oldest_pending_seconds", "ompsync_uploaded_bytes_total", "ompsync_upload_errors_total", "ompsync_catalog_updates_total", "ompsync_remote_retries_total"} {
		if !strings.Contains(body, name) {
			t.Errorf("metric %s missing:\n%s\n%s", name, body, out)
		}
	}
}
