package service

import (
	"fmt"

	"github.com/coreos/go-systemd/v22/daemon"
)

// The agent calls these at its state changes. Under systemd (Type=notify)
// they tell the manager what the agent is doing; anywhere else NOTIFY_SOCKET
// is unset and they do nothing and return nil.

// NotifyReady reports that the agent has started watching and uploading, or
// has finished a reload. Under Type=notify systemd treats the service as
// starting until this is sent, and fails it after TimeoutStartSec.
func NotifyReady() error {
	return notify(daemon.SdNotifyReady)
}

// NotifyReloading reports that the agent is reloading its config (on
// SIGHUP). Call NotifyReady when the reload is done.
func NotifyReloading() error {
	// MONOTONIC_USEC lets systemd ≥ 253 tell this reload from an earlier one.
	return notify(daemon.SdNotifyReloading + "\n" + daemon.SdNotifyMonotonicUsec())
}

// NotifyStopping reports that the agent has begun to shut down.
func NotifyStopping() error {
	return notify(daemon.SdNotifyStopping)
}

func notify(state string) error {
	// unsetEnvironment is false: the agent notifies more than once.
	if _, err := daemon.SdNotify(false, state); err != nil {
		return fmt.Errorf("notify systemd: %w", err)
	}
	return nil
}
