package compact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"

	"github.com/ompsync/ompsync/repo"
)

// Lines is how prune reads a session's lines: the agent's title slot and
// the key its merge knows an entry by (a store.Store).
type Lines interface {
	SlotLen(b []byte) int
	EntryKey(line []byte) (key string, ok bool)
}

// bounds are the local bounds of a comparison, whatever the remote holds.
type bounds struct {
	// size is the largest generation read.
	size int64
	// lines bounds the keys of the current generation held (16 bytes
	// each).
	lines int
	// line bounds the line buffer: a longer line is known by its bytes
	// alone, its id unread, in every generation alike.
	line int
}

// defaultBounds: restore's bound on any stream, 32 MiB of keys, a 16 MiB
// line buffer.
func defaultBounds() bounds { return bounds{size: 1 << 30, lines: 2 << 20, line: 16 << 20} }

// lineKey is a line's merge key, hashed: an entry's id and time, or any
// other line's bytes. 128 bits make a collision, which could let a line
// pass for kept, as unlikely as a failing disk's silent bit flip.
type lineKey [16]byte

// lineSplitter cuts a stream into lines and hands each one's key to
// each, skipping the title slot. A line longer than max is hashed as it
// streams instead of held.
type lineSplitter struct {
	lines Lines
	max   int
	each  func(k lineKey, n int) error // n: the line's number, from 1
	buf   []byte
	long  hash.Hash // the line so far, once it outgrew max
	n     int
	h     hash.Hash // reused for each line's key
	sum   [sha256.Size]byte
}

func (s *lineSplitter) Write(p []byte) (int, error) {
	for rest := p; ; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			s.add(rest)
			return len(p), nil
		}
		s.add(rest[:i])
		if err := s.line(s.buf); err != nil {
			return len(p), err
		}
		rest = rest[i+1:]
	}
}

// add takes the next bytes of a line: held while the line fits the
// buffer, hashed from the first byte once it outgrows it.
func (s *lineSplitter) add(part []byte) {
	if s.long == nil && len(s.buf)+len(part) > s.max {
		s.long = sha256.New()
		s.long.Write([]byte{'o'})
		s.long.Write(s.buf)
		s.buf = s.buf[:0]
	}
	if s.long != nil {
		s.long.Write(part)
	} else {
		s.buf = append(s.buf, part...)
	}
}

// flush ends a last line without a newline.
func (s *lineSplitter) flush() error {
	if len(s.buf) > 0 || s.long != nil {
		return s.line(s.buf)
	}
	return nil
}

// line keys line b (without its newline; ignored once the line outgrew
// the buffer and is hashed).
func (s *lineSplitter) line(b []byte) error {
	s.n++
	s.buf = s.buf[:0]
	var k lineKey
	switch {
	case s.long != nil:
		copy(k[:], s.long.Sum(nil))
		s.long = nil
	case s.n == 1 && s.lines.SlotLen(append(b[:len(b):len(b)], '\n')) == len(b)+1: // a copy, once
		// The title slot is rewritten in place; it is not an entry.
		return nil
	default:
		if s.h == nil {
			s.h = sha256.New()
		}
		s.h.Reset()
		if key, ok := s.lines.EntryKey(b); ok {
			s.h.Write([]byte{'e'})
			s.h.Write([]byte(key))
		} else {
			s.h.Write([]byte{'o'})
			s.h.Write(b)
		}
		copy(k[:], s.h.Sum(s.sum[:0]))
	}
	return s.each(k, s.n)
}

// errLacks stops a stream at the first line the other generation lacks.
var errLacks = errors.New("holds a line the other lacks")

// streamKeys streams generation g of s through each, a line at a time.
func streamKeys(ctx context.Context, r *repo.Repo, s repo.Stream, g *repo.Generation, lines Lines, b bounds, each func(k lineKey, n int) error) error {
	sp := &lineSplitter{lines: lines, max: b.line, each: each}
	// The head object is a newer title slot, which no comparison reads.
	rg := *g
	rg.HasHead = false
	if _, err := r.StreamGeneration(ctx, s, &rg, b.size, sp, false); err != nil {
		return err
	}
	return sp.flush()
}

// FirstLacking is the number (from 1) of the first line of generation old
// of stream s that generation cur lacks, and local too when not nil (the
// file on this machine, which may hold them), by lines' merge key (an
// entry's id and time, another line's bytes; the title slot aside), or 0
// when they hold every line of old. It streams each, holding their line
// keys (16 bytes a line, at most 2 Mi of them), and stops reading old at
// that line. A generation past the bounds is an error.
func FirstLacking(ctx context.Context, r *repo.Repo, lines Lines, s repo.Stream, cur, old *repo.Generation, local io.Reader) (int, error) {
	b := defaultBounds()
	set, err := readLineSet(ctx, r, s, cur, lines, b, local)
	if err != nil {
		return 0, err
	}
	return firstLacking(ctx, r, s, old, lines, set, b)
}

// lineSet is the sorted keys of one generation's lines.
type lineSet []lineKey

// readLineSet is the keys of g's lines and, when not nil, local's.
func readLineSet(ctx context.Context, r *repo.Repo, s repo.Stream, g *repo.Generation, lines Lines, b bounds, local io.Reader) (lineSet, error) {
	var set lineSet
	add := func(k lineKey, _ int) error {
		if len(set) == b.lines {
			return fmt.Errorf("more than %d lines to compare", b.lines)
		}
		set = append(set, k)
		return nil
	}
	err := streamKeys(ctx, r, s, g, lines, b, add)
	if err == nil && local != nil {
		sp := &lineSplitter{lines: lines, max: b.line, each: add}
		if _, err = io.Copy(sp, io.LimitReader(local, b.size)); err == nil {
			err = sp.flush()
		}
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(set, func(a, b lineKey) int { return bytes.Compare(a[:], b[:]) })
	return slices.Compact(set), nil
}

func (ls lineSet) has(k lineKey) bool {
	_, ok := slices.BinarySearchFunc(ls, k, func(a, b lineKey) int { return bytes.Compare(a[:], b[:]) })
	return ok
}

// firstLacking is the number of g's first line that set lacks, or 0 when
// set has every line of g. It stops reading at that line.
func firstLacking(ctx context.Context, r *repo.Repo, s repo.Stream, g *repo.Generation, lines Lines, set lineSet, b bounds) (int, error) {
	first := 0
	err := streamKeys(ctx, r, s, g, lines, b, func(k lineKey, n int) error {
		if !set.has(k) {
			first = n
			return errLacks
		}
		return nil
	})
	if errors.Is(err, errLacks) {
		return first, nil
	}
	return 0, err
}
