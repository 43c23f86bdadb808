// Package openfiles finds the processes that hold a file open.
//
// omp keeps an O_APPEND descriptor on a session file for as long as the
// session is open, idle or not, and remembers the size it last wrote: a file
// changed by anyone else while omp holds it makes omp stop saving that
// session. So before ompsync changes a session file it asks who holds it.
// One Scan reads every process's open files once; lookups are then free, so
// a pull or a restore costs one scan however many sessions it touches.
package openfiles

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Process is one process holding a file open.
type Process struct {
	PID int
	// Command is the process's command line, shortened so that it names
	// the program without repeating its arguments' text (an omp prompt
	// given on the command line is session content).
	Command string
}

func (p Process) String() string { return fmt.Sprintf("pid %d: %s", p.PID, p.Command) }

// fileID identifies a file by device and inode, so a path reached through
// a symlink, a bind mount or a rename still matches.
type fileID struct{ dev, ino uint64 }

// Snapshot is what one Scan saw.
type Snapshot struct {
	holders  map[fileID][]int
	bySuffix map[string][]int
	// commands and working folders are read only for the processes a
	// lookup asks about.
	command func(pid int) string
	cwd     func(pid int) string
	// Supported is false where this system offers no way to list open
	// files; Holders then always reports none.
	Supported bool
}

// Scan lists the files every other process holds open. Only files whose
// names end in one of the given suffixes (".jsonl") are recorded, which
// keeps the scan to one readlink per descriptor and a stat for the few
// that can matter.
func Scan(suffixes ...string) (*Snapshot, error) {
	return scan(os.Getpid(), suffixes)
}

// Holders returns the processes that hold the file at path open, or none.
// A path that does not exist is held by no one.
func (s *Snapshot) Holders(path string) []Process {
	if s == nil || len(s.holders) == 0 {
		return nil
	}
	id, ok := statID(path)
	if !ok {
		return nil
	}
	pids := s.holders[id]
	out := make([]Process, 0, len(pids))
	for _, pid := range pids {
		out = append(out, Process{PID: pid, Command: s.command(pid)})
	}
	return out
}

// Cwd is the working folder of process pid, or "" when it cannot be read.
func (s *Snapshot) Cwd(pid int) string {
	if s == nil || s.cwd == nil {
		return ""
	}
	return s.cwd(pid)
}

// WithSuffix returns the processes that hold open a file whose name ends
// in suffix, one of those given to Scan: "/agent.db" finds every omp, which
// keeps that database open for as long as it runs.
func (s *Snapshot) WithSuffix(suffix string) []int {
	if s == nil {
		return nil
	}
	return s.bySuffix[suffix]
}

// record notes that pid holds open the file named name, stat'ed at stat,
// when name is absolute and ends in one of suffixes (with none, any name
// does).
func (s *Snapshot) record(pid int, name, stat string, suffixes []string) {
	name = strings.TrimSuffix(name, " (deleted)")
	if !strings.HasPrefix(name, "/") {
		return
	}
	suffix := ""
	if len(suffixes) > 0 {
		i := slices.IndexFunc(suffixes, func(x string) bool { return strings.HasSuffix(name, x) })
		if i < 0 {
			return
		}
		suffix = suffixes[i]
	}
	id, ok := statID(stat)
	if !ok {
		return
	}
	if !slices.Contains(s.holders[id], pid) {
		s.holders[id] = append(s.holders[id], pid)
	}
	if suffix != "" && !slices.Contains(s.bySuffix[suffix], pid) {
		s.bySuffix[suffix] = append(s.bySuffix[suffix], pid)
	}
}

func newSnapshot(command, cwd func(int) string) *Snapshot {
	return &Snapshot{holders: map[fileID][]int{}, bySuffix: map[string][]int{}, command: command, cwd: cwd, Supported: true}
}

// shortCommand renders argv for a message: the program's base name, flags
// as they are, paths by their base name, and any other argument (a prompt,
// a title) as "…", at most 160 bytes.
func shortCommand(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		switch {
		case i == 0 || strings.Contains(a, "/") && !strings.ContainsAny(a, " \n\t"):
			b.WriteString(filepath.Base(a))
		case strings.HasPrefix(a, "-") && !strings.ContainsAny(a, " =\n\t"):
			b.WriteString(a)
		default:
			b.WriteString("…")
		}
		if b.Len() > 160 {
			return b.String()[:160] + "…"
		}
	}
	return b.String()
}
