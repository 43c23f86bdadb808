package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// tempPrefix and tempSuffix mark ompsync's own temp files, so that a sweep
// never takes an agent's (omp rewrites a session through
// ".<name>.<n>.tmp", the shape this package's used to have).
const (
	tempPrefix = ".ompsync-"
	tempSuffix = ".tmp"
)

// StaleAfter is how long a temp file must have gone unwritten before a
// sweep takes it for one a killed process left. A temp file lives for
// one file's write or one session's restore (minutes for the largest); a
// day leaves room for a clock that jumps. Removing one still in use loses
// nothing: its owner's rename or link then fails, and says so.
const StaleAfter = 24 * time.Hour

// TempPattern is the os.CreateTemp pattern of a hidden temp file of
// ompsync's holding what (a file's name, or a kind such as "session").
func TempPattern(what string) string {
	return tempPrefix + what + ".*" + tempSuffix
}

// IsTemp reports whether a file name is one TempPattern makes.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, tempPrefix) && strings.HasSuffix(name, tempSuffix) && len(name) > len(tempPrefix)+len(tempSuffix)
}

// RemoveStale removes the file at p if it is one of ompsync's temp files,
// a regular file, and was last written StaleAfter before now. It reports
// whether it removed it; a file already gone is no error.
func RemoveStale(p string, now time.Time) (bool, error) {
	if !IsTemp(filepath.Base(p)) {
		return false, nil
	}
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < StaleAfter {
		return false, nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("remove a stale temp file: %w", err)
	}
	return true, nil
}

// SweepStale removes the stale temp files (RemoveStale) directly in dir
// and returns their paths. A missing dir holds none.
func SweepStale(dir string, now time.Time) ([]string, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, de := range des {
		p := filepath.Join(dir, de.Name())
		ok, err := RemoveStale(p, now)
		if err != nil {
			return removed, err
		}
		if ok {
			removed = append(removed, p)
		}
	}
	return removed, nil
}
