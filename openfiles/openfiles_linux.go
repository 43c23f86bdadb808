package openfiles

import (
	"os"
	"strconv"
	"strings"
)

// scan walks /proc/<pid>/fd: a readlink per descriptor names the file, and
// a stat through the descriptor gives its device and inode.
func scan(self int, suffixes []string) (*Snapshot, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	s := newSnapshot(procCommand, procCwd)
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		dir := "/proc/" + p.Name() + "/fd/"
		fds, err := os.ReadDir(dir) // fails for another user's, when not root
		if err != nil {
			continue
		}
		for _, fd := range fds {
			// Stat'ed through the descriptor: a deleted file's name is gone.
			if link, err := os.Readlink(dir + fd.Name()); err == nil {
				s.record(pid, link, dir+fd.Name(), suffixes)
			}
		}
	}
	return s, nil
}

func procCommand(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		// Empty for a moment around an exec, and for kernel threads:
		// the name the kernel keeps still says who it is.
		if comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil && len(comm) > 1 {
			return strings.TrimSpace(string(comm))
		}
		return "(command unknown)"
	}
	return shortCommand(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"))
}

func procCwd(pid int) string {
	d, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd") // "" when it cannot be read
	return d
}
