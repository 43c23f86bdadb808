package service

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listenNotify stands in for systemd: a datagram socket at NOTIFY_SOCKET.
func listenNotify(t *testing.T) *net.UnixConn {
	t.Helper()
	// A socket path must fit in 108 bytes; t.TempDir can be longer.
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return conn
}

func receive(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	// A deadline only so that a missing message fails instead of hanging.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestNotify(t *testing.T) {
	conn := listenNotify(t)
	for _, tc := range []struct {
		send func() error
		want string
	}{
		{NotifyReady, "READY=1"},
		{NotifyStopping, "STOPPING=1"},
		{func() error { return NotifyStatus("watching 3 sessions\nREADY=1") }, "STATUS=watching 3 sessions READY=1"},
	} {
		if err := tc.send(); err != nil {
			t.Fatal(err)
		}
		if got := receive(t, conn); got != tc.want {
			t.Errorf("systemd got %q, want %q", got, tc.want)
		}
	}

	if err := NotifyReloading(); err != nil {
		t.Fatal(err)
	}
	got := receive(t, conn)
	reloading, usec, _ := strings.Cut(got, "\n")
	if reloading != "RELOADING=1" || !strings.HasPrefix(usec, "MONOTONIC_USEC=") || !strings.HasSuffix(usec, "\n") {
		t.Errorf("systemd got %q, want RELOADING=1 and MONOTONIC_USEC", got)
	}
	// NOTIFY_SOCKET stays set for the next notification.
	if os.Getenv("NOTIFY_SOCKET") == "" {
		t.Error("NOTIFY_SOCKET was unset")
	}
}

func TestNotifyWithoutSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	for _, f := range []func() error{NotifyReady, NotifyReloading, NotifyStopping} {
		if err := f(); err != nil {
			t.Errorf("without NOTIFY_SOCKET: %v", err)
		}
	}
}

func TestNotifyBrokenSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone"))
	if err := NotifyReady(); err == nil || !strings.HasPrefix(err.Error(), "notify systemd: ") {
		t.Errorf("NotifyReady to a missing socket: %v", err)
	}
}

// NotifyStatus sets the one-line status that `systemctl status` shows, such
// as "watching 42 sessions".
func NotifyStatus(status string) error {
	// A newline would start another assignment in the notify message.
	return notify("STATUS=" + strings.ReplaceAll(status, "\n", " "))
}
