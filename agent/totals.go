package agent

import (
	"fmt"
	"strings"
	"sync"
)

// tally counts what the passes of one run did, for the totals line that
// ends `agent --once` (Totals).
type tally struct {
	mu                sync.Mutex
	files             map[string]string // rel path -> what happened to it last
	deleted, archived int
	heldSessions      int // deletions not recorded, of the last pass: a vanished tree
	links             int // symlinks not followed, of the last full scan
}

const (
	fileUploaded  = "uploaded"
	fileUnchanged = "unchanged"
	fileFailed    = "failed"
)

// file records what a job did to rel; an upload in an earlier pass stays
// an upload, a failure gives way to a later success.
func (t *tally) file(rel string, uploaded bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	files := made(&t.files)
	switch {
	case err != nil:
		files[rel] = fileFailed
	case uploaded || files[rel] == fileUploaded:
		files[rel] = fileUploaded
	default:
		files[rel] = fileUnchanged
	}
}

// Totals is the one line that says what the run did: "12 files checked: 3
// uploaded, 9 already up to date; 1 recorded as deleted".
func (a *Agent) Totals() string {
	t := &a.tally
	t.mu.Lock()
	defer t.mu.Unlock()
	n := map[string]int{}
	for _, what := range t.files {
		n[what]++
	}
	files := "files"
	if len(t.files) == 1 {
		files = "file"
	}
	line := fmt.Sprintf("%d %s checked: %d uploaded, %d already up to date", len(t.files), files, n[fileUploaded], n[fileUnchanged])
	var more []string
	add := func(k int, what string) {
		if k > 0 {
			more = append(more, fmt.Sprintf("%d %s", k, what))
		}
	}
	add(n[fileFailed], "not uploaded (see above)")
	add(t.deleted, "recorded as deleted")
	add(t.archived, "recorded as archived")
	add(t.heldSessions, "vanished and not recorded as deleted (see above)")
	add(a.problems.count(), "could not be read (see above)")
	if a.unchecked.err() != nil {
		more = append(more, "uploads not checked against the remote, which could not be listed (see above)")
	}
	if t.links == 1 {
		more = append(more, "1 symlink not followed (see above)")
	} else {
		add(t.links, "symlinks not followed (see above)")
	}
	if len(more) > 0 {
		line += "; " + strings.Join(more, "; ")
	}
	return line
}
