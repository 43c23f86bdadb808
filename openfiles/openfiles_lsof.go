//go:build linux || darwin

package openfiles

import (
	"bufio"
	"bytes"
	"os/exec"
	"strconv"
	"strings"
)

// scanLsof asks lsof, which every macOS has, for every process's open
// files: -F pfn prints "p<pid>", "f<fd>" and "n<name>" lines (fd "cwd"
// names the working folder). It is macOS's scan; Linux has it too, so the
// tests run it there against the /proc scan.
func scanLsof(self int, suffixes []string) (*Snapshot, error) {
	out, err := exec.Command("lsof", "-w", "-n", "-P", "-F", "pfn").Output()
	// lsof exits 1 when some process could not be read; what it printed
	// is still right.
	if err != nil && len(out) == 0 {
		return nil, err
	}
	cwds := map[int]string{}
	s := newSnapshot(psCommand, func(pid int) string { return cwds[pid] })
	pid, fd := 0, ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20) // a name may be long
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "p"):
			pid, _ = strconv.Atoi(line[1:])
		case strings.HasPrefix(line, "f"):
			fd = line[1:]
		case strings.HasPrefix(line, "n") && pid != self && pid > 0:
			if fd == "cwd" {
				cwds[pid] = line[1:]
			} else {
				s.record(pid, line[1:], line[1:], suffixes)
			}
		}
	}
	return s, sc.Err()
}

func psCommand(pid int) string {
	out, err := exec.Command("ps", "-o", "command=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return "(command unknown)"
	}
	return shortCommand(strings.Fields(string(out)))
}
