package agent

import (
	"errors"
	"log/slog"
	"strings"
	"sync"

	"github.com/ompsync/ompsync/repo"
)

// refusal is the repository's refusal of this machine's uploads
// (repo.ErrEncryptionMismatch: the repository was encrypted, or its
// recipients changed, since this agent started). Every upload is refused
// alike until the configuration matches, so it is said once, at WARN,
// with what to configure, and again only when it changes; the files stay
// dirty and their state as it was, so a restart with the key uploads them.
type refusal struct {
	mu   sync.Mutex
	msg  string
	file string // its note in the state dir (refusedName)
}

// report says err once if it is a refusal, and reports whether it was.
func (r *refusal) report(log *slog.Logger, err error) bool {
	if !errors.Is(err, repo.ErrEncryptionMismatch) {
		return false
	}
	if msg := r.record(err); msg != "" {
		log.Warn("uploads stopped: " + msg + "; local state kept, nothing uploaded in the meantime")
	}
	return true
}

// record notes err if it is a refusal (the caller says it): the refusal
// when it is new, else "".
func (r *refusal) record(err error) string {
	if !errors.Is(err, repo.ErrEncryptionMismatch) {
		return ""
	}
	// The same for every file: the refusal without the upload it stopped.
	msg := err.Error()
	if i := strings.Index(msg, repo.ErrEncryptionMismatch.Error()); i >= 0 {
		msg = msg[i:]
	}
	if !r.set(msg) {
		return ""
	}
	return msg
}

// set makes msg the refusal ("": none), in its note too, and reports
// whether it changed.
func (r *refusal) set(msg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if msg == r.msg {
		return false
	}
	r.msg = msg
	writeNote(r.file, msg)
	return true
}

// active reports whether a refusal is recorded.
func (r *refusal) active() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msg != ""
}

// ok ends a refusal: a pass uploaded again.
func (r *refusal) ok(log *slog.Logger) {
	if r.set("") {
		log.Info("the repository accepts this machine's uploads again")
	}
}
