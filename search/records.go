package search

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Pending is a copy's records being written as its bytes are read, and
// kept only once they are all verified: into the cache after the records
// it holds (appending), or into a temp file beside them (a copy indexed
// anew), or, without a cache, into an unlinked temp file. Keep keeps them
// in the cache, or moves them to the search's Spool to be searched once,
// the cache forgetting the copy (they are more than it may hold); Abort
// drops them, leaving the cache as it was.
type Pending struct {
	c        *Cache
	id, mach string
	f        *os.File
	// tmp is the temp file's name, "" when appending or unlinked.
	tmp string
	// base is where the new records begin in f, n how many there are.
	base, n int64
}

// tmpSuffix ends the name of a temp file in the cache: Evict removes one
// a cut-off run left, since a search holds the cache's lock.
const tmpSuffix = ".tmp"

// Begin starts writing a copy's records: after those from holds (nil:
// anew). It returns nil, with no error, when from's records are gone: the
// copy is to be indexed anew. Without a cache (c nil) the records go to a
// tempFile, to be searched once (Keep moves them to the Spool).
func (c *Cache) Begin(id, machine string, from *CopyState) (*Pending, error) {
	if c == nil {
		f, err := tempFile()
		if err != nil {
			return nil, err
		}
		return &Pending{f: f}, nil
	}
	sp, rp, err := c.paths(id, machine)
	if err != nil {
		return nil, err
	}
	p := &Pending{c: c, id: id, mach: machine}
	if from != nil {
		f, err := os.OpenFile(rp, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("search cache: %w", err)
		}
		if fi, err := f.Stat(); err != nil || fi.Size() < from.Records {
			f.Close()
			return nil, nil
		}
		p.f, p.base = f, from.Records
		return p, nil
	}
	dir := filepath.Dir(sp)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("search cache: %w", err)
	}
	f, err := os.CreateTemp(dir, machine+".*"+tmpSuffix)
	if err != nil {
		return nil, fmt.Errorf("search cache: %w", err)
	}
	p.f, p.tmp = f, f.Name()
	return p, nil
}

// tempFile is a file in the system's temp folder, unlinked at once:
// nothing of the records it holds is left behind, whatever ends the run.
func tempFile() (*os.File, error) {
	f, err := os.CreateTemp("", ".ompsync-grep-*")
	if err == nil {
		if err = os.Remove(f.Name()); err != nil {
			f.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	return f, nil
}

// Write appends records.
func (p *Pending) Write(b []byte) (int, error) {
	n, err := p.f.WriteAt(b, p.base+p.n)
	p.n += int64(n)
	if err != nil {
		return n, fmt.Errorf("search cache: %w", err)
	}
	return n, nil
}

// size is the bytes of all the copy's records: those appended to and the
// new.
func (p *Pending) size() int64 { return p.base + p.n }

// Keep keeps the records in the cache as st's and returns nil; records
// more than the cache holds (Evict would remove them), or without a cache
// any, it moves to sp instead (spool), and returns where they are there.
func (p *Pending) Keep(st *CopyState, sp *Spool) (*io.SectionReader, error) {
	if p.c == nil || p.size() > p.c.max {
		return p.spool(sp)
	}
	return nil, p.commit(st)
}

// commit keeps the records in the cache as st's (st.Records is set).
func (p *Pending) commit(st *CopyState) error {
	sp, rp, err := p.c.paths(st.Session, st.Machine)
	if err != nil {
		p.Abort()
		return err
	}
	err = p.f.Truncate(p.size()) // drop what a cut-off run left
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && p.tmp != "" {
		err = os.Rename(p.tmp, rp)
	}
	if err != nil {
		if p.tmp != "" {
			os.Remove(p.tmp)
		}
		return fmt.Errorf("search cache: %w", err)
	}
	st.Records = p.size()
	st.Version = recordsVersion
	p.c.use(rp)
	return p.c.saveState(sp, st)
}

// Spool is one unlinked temp file that holds, one after the other, the
// records of the copies not kept in the cache, until they are searched: a
// search of thousands of sessions without a cache holds one file open, not
// one a copy, nor their records in memory. The zero Spool is empty.
type Spool struct {
	mu   sync.Mutex
	f    *os.File
	size int64
}

// Close drops what the spool holds.
func (sp *Spool) Close() {
	if sp.f != nil {
		sp.f.Close()
	}
}

// spool moves the records to sp, to be searched once from there, and makes
// the cache forget the copy.
func (p *Pending) spool(sp *Spool) (*io.SectionReader, error) {
	defer p.f.Close()
	var err error
	if p.tmp != "" {
		err = os.Remove(p.tmp)
	}
	if err == nil {
		err = p.c.Remove(p.id, p.mach) // the open file stays readable
	}
	if err != nil {
		return nil, fmt.Errorf("search cache: %w", err)
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.f == nil {
		if sp.f, err = tempFile(); err != nil {
			return nil, err
		}
	}
	n, err := io.Copy(io.NewOffsetWriter(sp.f, sp.size), io.NewSectionReader(p.f, 0, p.size()))
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	recs := io.NewSectionReader(sp.f, sp.size, n)
	sp.size += n
	return recs, nil
}

// Abort drops the new records: the cache holds what it held before.
func (p *Pending) Abort() {
	if p.tmp == "" && p.c != nil {
		_ = p.f.Truncate(p.base)
	}
	p.f.Close()
	if p.tmp != "" {
		os.Remove(p.tmp)
		_ = os.Remove(filepath.Dir(p.tmp)) // when the copy was the session's first
	}
}

// Open opens a copy's records to be read, a buffer at a time, and marks
// it used; a copy whose records are gone is nil.
func (c *Cache) Open(st *CopyState) (io.ReadCloser, error) {
	_, rp, err := c.paths(st.Session, st.Machine)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(rp)
	if err != nil {
		return nil, nil
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() < st.Records {
		f.Close()
		return nil, nil
	}
	if c.now().Sub(fi.ModTime()) >= usedGranularity {
		c.use(rp)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(f, st.Records), f}, nil
}

// use marks a copy's records used now, for Evict: a copy that cannot be
// marked is only evicted sooner.
func (c *Cache) use(records string) {
	now := c.now()
	_ = os.Chtimes(records, now, now)
}
