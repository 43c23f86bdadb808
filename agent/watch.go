package agent

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
	"github.com/ompsync/ompsync/store"
)

// watcher turns fsnotify events into dirty paths. It is only a hint: the
// reconcile scan catches anything it misses (queue overflow, a folder
// created before its watch was added).
type watcher struct {
	a *Agent
	w *fsnotify.Watcher
}

func (a *Agent) newWatcher() (*watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	w := &watcher{a: a, w: fw}
	w.addTree(a.opts.AgentDir)
	return w, nil
}

func (w *watcher) close() { w.w.Close() }

// addTree watches dir and the folders below it that can hold backed-up files.
// A root that is a symlink is followed, as the scan follows it; the watches
// are added by the path under the agent dir, so events are named by it.
func (w *watcher) addTree(dir string) {
	target, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return // gone: the reconcile scan notices when it is back
	}
	_ = filepath.WalkDir(target, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		p = dir + p[len(target):]
		if d.Type()&fs.ModeSymlink != 0 {
			if rel, ok := w.a.relOf(p); ok && onRootPath(w.a.opts.Store, rel) {
				w.addTree(p)
			}
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		if p != w.a.opts.AgentDir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if rel, ok := w.a.relOf(p); ok && !watchable(w.a.opts.Store, rel) {
			return filepath.SkipDir
		}
		if err := w.w.Add(p); err != nil {
			w.a.log.Debug("cannot watch folder; the reconcile scan covers it", "path", p, "err", err)
			w.a.watchGaps.Store(true)
		}
		return nil
	})
}

// watchable says whether a folder (relative to the agent dir) can hold
// anything that is backed up: one of the store's roots, a folder in one, or
// a folder on the way to one.
func watchable(s store.Store, rel string) bool {
	for _, root := range s.Roots() {
		if rel == root || strings.HasPrefix(rel, root+"/") || strings.HasPrefix(root, rel+"/") {
			return true
		}
	}
	return false
}

// onRootPath says whether rel is one of the store's roots or a folder on
// the way to one: the only places a symlink is followed.
func onRootPath(s store.Store, rel string) bool {
	for _, root := range s.Roots() {
		if rel == root || strings.HasPrefix(root, rel+"/") {
			return true
		}
	}
	return false
}

func (w *watcher) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.a.log.Warn("file events overflowed; a full scan catches up")
			}
			w.a.markFullScan()
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			w.handle(ev)
		}
	}
}

func (w *watcher) handle(ev fsnotify.Event) {
	rel, ok := w.a.relOf(ev.Name)
	if !ok {
		return
	}
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		w.a.markFullScan()
		return
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(ev.Name); err == nil && (fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 && onRootPath(w.a.opts.Store, rel)) {
			if watchable(w.a.opts.Store, rel) {
				w.addTree(ev.Name)
				// Files may have landed before the watch: a scan finds them.
				w.a.markFullScan()
			}
			return
		}
	}
	if w.a.opts.Store.Classify(rel) != store.KindIgnored {
		w.a.markDirty(rel)
	}
}
