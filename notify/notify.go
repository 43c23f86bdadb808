// Package notify tells the user when the backup stops and when it is back,
// without a log to watch: a health-check URL pinged the way healthchecks.io,
// Uptime Kuma and Cronitor expect, and a shell command run on each event.
//
// A notifier is bounded: it never blocks the backup that feeds it (one
// goroutine delivers, with a timeout, and only the latest event waits), and
// its own failure is said once.
package notify

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Event is what happened, as OMPSYNC_EVENT names it.
type Event string

const (
	// Failing: the backup has failed (the remote unreachable, a file
	// unreadable, uploads refused) for longer than the grace period.
	Failing Event = "failing"
	// Lagging: the backup works, but bytes have waited for longer than
	// the grace period to be uploaded.
	Lagging Event = "lagging"
	// Recovered: after failing or lagging, everything is uploaded again.
	Recovered Event = "recovered"
	// Damaged: an object of the backup is damaged or missing and could not
	// be put back.
	Damaged Event = "damaged"
	// ping: a good pass, for notify.url only.
	ping Event = "ping"
)

// Defaults of Options.
const (
	DefaultGrace        = 15 * time.Minute
	DefaultPingInterval = time.Hour
	DefaultTimeout      = 10 * time.Second
)

// Options configure a Notifier.
type Options struct {
	// URL is pinged (POST <url>) after a good pass, at most every
	// PingInterval and on recovery, and POST <url>/fail with a one-line
	// body on a failing, lagging or damaged event. Empty: off.
	URL string
	// Command is run through the shell on every event but the pings, with
	// OMPSYNC_EVENT, OMPSYNC_MESSAGE and OMPSYNC_MACHINE set. Empty: off.
	Command string
	// Machine names this machine (OMPSYNC_MACHINE), Source what is backed
	// up when one machine runs several agents (said in messages).
	Machine, Source string
	// Grace is how long the backup may fail or lag before it is said.
	Grace        time.Duration
	PingInterval time.Duration
	// Timeout bounds one delivery (the request, the command).
	Timeout time.Duration
	Logger  *slog.Logger
}

// Health is how the backup is, as the agent sees it after a pass or a
// tick that waited for the remote.
type Health struct {
	// Good: the last pass ended without error.
	Good bool
	// Failing is the cause of the current failure, in one line, and
	// FailingSince when it began; empty when nothing fails.
	Failing      string
	FailingSince time.Time
	// Pending bytes have waited since PendingSince (zero: nothing waits).
	Pending      int64
	PendingSince time.Time
}

// Notifier turns Health into events and delivers them.
type Notifier struct {
	opts Options

	// Observe's state (one caller at a time).
	alerted  Event // Failing or Lagging once said, until Recovered
	lastPing time.Time

	mu     sync.Mutex      // one send at a time; guards failed, busy, idle
	next   chan delivery   // the latest event not yet delivered
	failed map[string]bool // a channel whose failure was said
	// busy counts deliveries queued or under way; idle, made by a waiting
	// Flush, is closed when busy drops to zero. Not a WaitGroup: events
	// may arrive while Flush waits, and a Flush that gives up must not
	// leave a goroutine waiting.
	busy int
	idle chan struct{}
}

type delivery struct {
	ev  Event
	msg string
}

// New makes a Notifier; nil when neither URL nor Command is set. Run
// delivers its events.
func New(opts Options) *Notifier {
	if opts.URL == "" && opts.Command == "" {
		return nil
	}
	// config refuses a duration below zero: zero is the only unset one.
	opts.Grace = cmp.Or(opts.Grace, DefaultGrace)
	opts.PingInterval = cmp.Or(opts.PingInterval, DefaultPingInterval)
	opts.Timeout = cmp.Or(opts.Timeout, DefaultTimeout)
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.URL = strings.TrimSuffix(opts.URL, "/")
	return &Notifier{opts: opts, next: make(chan delivery, 1), failed: map[string]bool{}}
}

// Observe is told the backup's health; it never blocks. Failing or lagging
// for longer than Grace is an event once, recovery another; a good pass
// pings the URL at most every PingInterval.
func (n *Notifier) Observe(now time.Time, h Health) {
	if n == nil {
		return
	}
	var ev Event
	var msg string
	switch {
	case h.Failing != "" && now.Sub(h.FailingSince) >= n.opts.Grace:
		ev = Failing
		msg = fmt.Sprintf("%sbackup failing for %s: %s", n.prefix(), now.Sub(h.FailingSince).Round(time.Second), h.Failing)
	case h.Pending > 0 && !h.PendingSince.IsZero() && now.Sub(h.PendingSince) >= n.opts.Grace:
		ev = Lagging
		msg = fmt.Sprintf("%s%d bytes have waited %s to be backed up", n.prefix(), h.Pending, now.Sub(h.PendingSince).Round(time.Second))
		if h.Failing != "" {
			msg += ": " + h.Failing
		}
	}
	switch {
	case ev != "":
		if n.alerted != ev {
			n.alerted = ev
			n.send(ev, msg)
		}
	case n.alerted != "" && h.Good && h.Failing == "":
		n.alerted = ""
		n.lastPing = now
		n.send(Recovered, n.prefix()+"backup recovered: everything is uploaded again")
	case n.alerted == "" && h.Good && h.Failing == "" && (n.lastPing.IsZero() || now.Sub(n.lastPing) >= n.opts.PingInterval):
		n.lastPing = now
		if n.opts.URL != "" {
			n.send(ping, "")
		}
	}
}

// Report sends ev with msg now (Damaged, from a check of the backup).
func (n *Notifier) Report(ev Event, msg string) {
	if n != nil {
		n.send(ev, n.prefix()+msg)
	}
}

func (n *Notifier) prefix() string {
	if n.opts.Source == "" {
		return ""
	}
	return n.opts.Source + ": "
}

// send queues d in place of any event not yet delivered: a notifier that
// cannot keep up delivers the latest state, not a backlog.
func (n *Notifier) send(ev Event, msg string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-n.next: // replaced: never delivered
	default:
		n.busy++
	}
	n.next <- delivery{ev: ev, msg: oneLine(msg)}
}

// Run delivers events until ctx ends.
func (n *Notifier) Run(ctx context.Context) {
	if n == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-n.next:
			n.deliver(ctx, d)
			n.mu.Lock()
			if n.busy--; n.busy == 0 && n.idle != nil {
				close(n.idle)
				n.idle = nil
			}
			n.mu.Unlock()
		}
	}
}

// Flush waits up to timeout for the queued event to be delivered (a
// one-shot command that reports before it exits).
func (n *Notifier) Flush(timeout time.Duration) {
	if n == nil {
		return
	}
	n.mu.Lock()
	if n.busy == 0 {
		n.mu.Unlock()
		return
	}
	if n.idle == nil {
		n.idle = make(chan struct{})
	}
	idle := n.idle
	n.mu.Unlock()
	select {
	case <-idle:
	case <-time.After(timeout):
	}
}

func (n *Notifier) deliver(ctx context.Context, d delivery) {
	if n.opts.URL != "" {
		u := n.opts.URL
		if d.ev != ping && d.ev != Recovered {
			u += "/fail"
		}
		n.outcome(ctx, "notify.url", func(ctx context.Context) error { return n.post(ctx, u, d.msg) })
	}
	if n.opts.Command != "" && d.ev != ping {
		n.outcome(ctx, "notify.command", func(ctx context.Context) error { return n.run(ctx, d) })
	}
}

// outcome delivers through one channel within the timeout, and says its
// first failure at WARN, and that it works again.
func (n *Notifier) outcome(ctx context.Context, channel string, deliver func(context.Context) error) {
	ctx, cancel := context.WithTimeout(ctx, n.opts.Timeout)
	defer cancel()
	err := deliver(ctx)
	n.mu.Lock()
	said := n.failed[channel]
	n.failed[channel] = err != nil
	n.mu.Unlock()
	switch {
	case err != nil && !said:
		n.opts.Logger.Warn(channel+" failed; alerts may not reach you (the backup goes on)", "err", err)
	case err != nil:
		n.opts.Logger.Debug(channel+" failed again", "err", err)
	case said:
		n.opts.Logger.Info(channel + " works again")
	}
}

func (n *Notifier) post(ctx context.Context, u, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return errors.New("bad URL") // never the URL itself: it is the check's credential
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := http.DefaultClient.Do(req) // ctx bounds it
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("the URL answered %s", resp.Status)
	}
	return nil
}

func (n *Notifier) run(ctx context.Context, d delivery) error {
	cmd := shellCommand(ctx, n.opts.Command)
	cmd.Env = append(os.Environ(), "OMPSYNC_EVENT="+string(d.ev), "OMPSYNC_MESSAGE="+d.msg, "OMPSYNC_MACHINE="+n.opts.Machine)
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("did not finish within %s", n.opts.Timeout)
	}
	if err != nil {
		return fmt.Errorf("%w: %s", err, oneLine(string(out.Bytes()[max(out.Len()-200, 0):])))
	}
	return nil
}

// oneLine makes msg one line of at most 300 bytes.
func oneLine(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 300 {
		msg = msg[:297] + "..."
	}
	return msg
}
