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
	mu  sync.Mutex
	msg string
}

// report says err once if it is a refusal, and reports whether it was.
func (r *refusal) report(log *slog.Logger, err error) bool {
	if !errors.Is(err, repo.ErrEncryptionMismatch) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// The same for every file: the refusal without the upload it stopped.
	msg := err.Error()
	if i := strings.Index(msg, repo.ErrEncryptionMismatch.Error()); i >= 0 {
		msg = msg[i:]
	}
	if msg != r.msg {
		r.msg = msg
		log.Warn("uploads stopped: " + msg + "; local state kept, nothing uploaded in the meantime")
	}
	return true
}

// ok ends a refusal: a pass uploaded again.
func (r *refusal) ok(log *slog.Logger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.msg != "" {
		r.msg = ""
		log.Info("the repository accepts this machine's uploads again")
	}
}
