package agent

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/ompsync/ompsync/store"
)

// addTree watches dir and the folders below it that can hold backed-up files.
func (a *Agent) addTree(dir string) {
	add := a.fsw.Add
	if a.addWatch != nil {
		add = a.addWatch
	}
	a.walkWatchable(dir, func(p, _ string, d fs.DirEntry) {
		if d.IsDir() {
			if err := add(p); err != nil {
				a.unwatchable(p, err)
			}
		}
	})
}

// walkWatchable calls visit for dir, each folder below it that can hold
// backed-up files, and the files in them, with their paths under the
// agent dir (p) and relative to it (rel, "" outside). A root that is a
// symlink is followed, as the scan follows it, and named by its path
// under the agent dir, as events are.
func (a *Agent) walkWatchable(dir string, visit func(p, rel string, d fs.DirEntry)) {
	target, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return // gone: the reconcile scan notices when it is back
	}
	_ = filepath.WalkDir(target, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		p = dir + p[len(target):]
		rel, ok := a.relOf(p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			if ok && onRootPath(a.opts.Store, rel) {
				a.walkWatchable(p, visit)
			}
			return nil
		case d.IsDir() && (p != a.opts.AgentDir && strings.HasPrefix(d.Name(), ".") || ok && !watchable(a.opts.Store, rel)):
			return filepath.SkipDir
		}
		visit(p, rel, d)
		return nil
	})
}

// watchFix is what raises the limit most watch failures hit.
const watchFix = "raise the inotify limit: sudo sysctl fs.inotify.max_user_watches=524288 (and add it to /etc/sysctl.d/ to keep it)"

// unwatchable records a folder that could not be watched: its changes are
// then found by polling it every interval (pollUnwatched). The first such
// folder is a WARN with the fix; the others are counted in it at debug.
func (a *Agent) unwatchable(dir string, err error) {
	a.mu.Lock()
	made(&a.unwatched)[dir] = true
	a.mu.Unlock()
	first := !a.watchGaps.Swap(true)
	iv := time.Duration(a.interval.Load())
	if !first {
		a.log.Debug("cannot watch folder either; polling it", "path", dir, "err", err)
		return
	}
	fix := "check the folder's permissions"
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EMFILE) {
		fix = watchFix
	}
	a.log.Warn("cannot watch a folder for changes; polling it every interval instead, which costs a stat per file", "path", dir, "interval", iv, "err", err, "fix", fix)
}

// pollUnwatched marks dirty every file in the folders that could not be
// watched, and the folders below them, so that each pass looks at them as
// if an event had come: uploads from such a folder lag by an interval, as
// from a watched one, not by the reconcile interval. It reports whether
// there were any.
func (a *Agent) pollUnwatched() bool {
	a.mu.Lock()
	dirs := slices.Collect(maps.Keys(a.unwatched))
	a.mu.Unlock()
	for _, dir := range dirs {
		if _, err := os.Stat(dir); isNotExist(err) {
			a.mu.Lock()
			delete(a.unwatched, dir) // gone; a new one gets its own watch (handle)
			a.mu.Unlock()
			continue
		}
		a.walkWatchable(dir, func(_, rel string, d fs.DirEntry) {
			if rel != "" && d.Type().IsRegular() && a.opts.Store.Classify(rel) != store.KindIgnored {
				a.markDirty(rel)
			}
		})
	}
	return len(dirs) > 0
}

// watchable says whether a folder (relative to the agent dir) can hold
// anything that is backed up: one of the store's roots, a folder in one, or
// a folder on the way to one.
func watchable(s *store.Store, rel string) bool {
	return onRootPath(s, rel) || slices.ContainsFunc(s.Roots(), func(root string) bool { return strings.HasPrefix(rel, root+"/") })
}

// onRootPath says whether rel is one of the store's roots or a folder on
// the way to one: the only places a symlink is followed.
func onRootPath(s *store.Store, rel string) bool {
	return slices.ContainsFunc(s.Roots(), func(root string) bool { return rel == root || strings.HasPrefix(root, rel+"/") })
}

// watchEvents turns fsnotify events into dirty paths, until ctx ends. They
// are only a hint: the reconcile scan catches anything they miss (queue
// overflow, a folder created before its watch was added).
func (a *Agent) watchEvents(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case err, ok := <-a.fsw.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				a.log.Warn("file events overflowed; a full scan catches up")
			}
			a.fullScan.Store(true)
		case ev, ok := <-a.fsw.Events:
			if !ok {
				return
			}
			a.handle(ev)
		}
	}
}

func (a *Agent) handle(ev fsnotify.Event) {
	rel, ok := a.relOf(ev.Name)
	if !ok {
		return
	}
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		a.fullScan.Store(true)
		return
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(ev.Name); err == nil && (fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 && onRootPath(a.opts.Store, rel)) {
			if watchable(a.opts.Store, rel) {
				a.addTree(ev.Name)
				// Files may have landed before the watch: a scan finds them.
				a.fullScan.Store(true)
			}
			return
		}
	}
	if a.opts.Store.Classify(rel) != store.KindIgnored {
		a.markDirty(rel)
	}
}
