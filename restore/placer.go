package restore

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ompsync/ompsync/atomicfile"
)

// later takes over the last steps of creating result i's session file,
// for Run to finish off the transfers' path: the placer's.
type later struct {
	pl *placer
	i  int
}

// place takes a temp file written whole (its writeback started) to sync,
// and then link at p.
func (l *later) place(f *os.File, p string, mtime time.Time) {
	l.pl.work <- placement{i: l.i, f: f, p: p, mtime: mtime}
}

// syncDir is told the folder of a file put in place: wait syncs each
// folder once, at the end.
func (l *later) syncDir(dir string) {
	l.pl.mu.Lock()
	defer l.pl.mu.Unlock()
	l.pl.dirs[dir] = append(l.pl.dirs[dir], l.i)
}

// placer syncs the temp files of new sessions and links them under their
// names, a few at a time, while the transfers fetch the next sessions: a
// transfer that waited for its own fsync left the CPU idle (2 of 16
// transfers' worth on loopback). A file appears under a session's name only
// once its bytes are on disk, as before.
type placer struct {
	work chan placement
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs map[int]error    // by result
	dirs map[string][]int // the folders to sync, and the results in each
}

type placement struct {
	i     int
	f     *os.File
	p     string
	mtime time.Time
}

const (
	// placers is how many fsyncs run at once: enough for the disk to take
	// them together.
	placers = 4
	// placeQueue bounds the files written and not yet placed (each an open
	// descriptor and up to 1 MiB of unsynced data): past it a transfer waits.
	placeQueue = 32
)

func startPlacer() *placer {
	pl := &placer{work: make(chan placement, placeQueue), errs: map[int]error{}, dirs: map[string][]int{}}
	for range placers {
		pl.wg.Go(func() {
			for pm := range pl.work {
				if err := placeOne(pm); err != nil {
					pl.mu.Lock()
					pl.errs[pm.i] = err
					pl.mu.Unlock()
				}
			}
		})
	}
	return pl
}

// wait places what is queued, syncs the folders, and returns what
// failed, by result.
func (pl *placer) wait() map[int]error {
	close(pl.work)
	pl.wg.Wait()
	for dir, idx := range pl.dirs {
		if err := atomicfile.SyncDir(dir); err != nil {
			for _, i := range idx {
				pl.errs[i] = err
			}
		}
	}
	return pl.errs
}

func placeOne(pm placement) error {
	tmp := pm.f.Name()
	if err := syncClose(pm.f); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	return install(tmp, pm.p, nil, atomicfile.Options{Mtime: pm.mtime, NoDirSync: true})
}

// writeUnsynced writes c, held in memory, to a new hidden temp file beside
// p and starts its writeback; the file is returned open, for its fsync.
func writeUnsynced(p string, c content) (*os.File, error) {
	f, err := os.CreateTemp(filepath.Dir(p), atomicfile.TempPattern(filepath.Base(p)))
	if err != nil {
		return nil, fmt.Errorf("create temp file: %w", err)
	}
	_, err = f.Write(c.src.data)
	if err == nil && c.slot != nil {
		_, err = f.WriteAt(c.slot, 0) // another copy's newer title
	}
	if err != nil { // the error names the file
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	startWriteback(f)
	return f, nil
}
