package openfiles

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// scan walks /proc/<pid>/fd: a readlink per descriptor names the file, and
// a stat through the descriptor gives its device and inode.
func scan(self int, suffixes []string) (*Snapshot, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	s := &Snapshot{holders: map[fileID][]int{}, command: procCommand, Supported: true}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		dir := "/proc/" + p.Name() + "/fd/"
		fds, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				s.Unreadable++
			}
			continue
		}
		seen := map[fileID]bool{}
		for _, fd := range fds {
			link, err := os.Readlink(dir + fd.Name())
			if err != nil || !strings.HasPrefix(link, "/") || !matches(link, suffixes) {
				continue
			}
			var st syscall.Stat_t
			if syscall.Stat(dir+fd.Name(), &st) != nil {
				continue
			}
			id := fileID{uint64(st.Dev), st.Ino}
			if !seen[id] {
				seen[id] = true
				s.holders[id] = append(s.holders[id], pid)
			}
		}
	}
	return s, nil
}

func statID(path string) (fileID, bool) {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), st.Ino}, true
}

func procCommand(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return "(command unknown)"
	}
	return shortCommand(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"))
}
