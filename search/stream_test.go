package search

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// A session's bytes written to an Indexer in pieces of any size index into
// exactly the records Index makes of them whole, a line spanning pieces
// included, and the last line without its newline too.
func TestIndexerPieces(t *testing.T) {
	var data []byte
	for i := range 300 {
		data = append(data, msg("e"+strings.Repeat("x", i%5), "user", "2026-10-07T01:00:00Z", strings.Repeat("word ", i)+"\nnext")...)
	}
	data = append([]byte(sample), data...)
	data = append(data, []byte(`{"type":"message","id":"z","timestamp":"2026-10-07T01:00:00Z","message":{"role":"user","content":"no newline"}}`)...)
	want := Index(nil, data, nil)
	for _, size := range []int{1, 7, 100, 4096, len(data)} {
		var got bytes.Buffer
		x := NewIndexer(&got, 0, nil, 0)
		for p := data; len(p) > 0; {
			n := min(size, len(p))
			if _, err := x.Write(p[:n]); err != nil {
				t.Fatal(err)
			}
			p = p[n:]
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("in pieces of %d: %d bytes of records, want %d", size, got.Len(), len(want))
		}
		if len(x.LeftOut()) != 0 {
			t.Errorf("in pieces of %d: left out %v", size, x.LeftOut())
		}
	}
}

// A line longer than the bound (MaxLine unless told) is left out and
// named by its offset and size, not held: the lines around it are indexed.
func TestIndexerLongLine(t *testing.T) {
	before := msg("b1", "user", "2026-10-07T01:00:00Z", "before the long one")
	after := msg("a1", "user", "2026-10-07T01:00:00Z", "after the long one")
	long := msg("l1", "user", "2026-10-07T01:00:00Z", strings.Repeat("y", 2<<20))
	var got bytes.Buffer
	x := NewIndexer(&got, 1000, nil, 1<<20)
	for _, part := range []string{before, long[:10], long[10 : 64<<10], long[64<<10:], after} {
		for p := []byte(part); len(p) > 0; {
			n := min(100<<10, len(p))
			x.Write(p[:n])
			p = p[n:]
		}
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	want := Index(nil, []byte(before+after), nil)
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("records %.200q, want %q", got.Bytes(), want)
	}
	left := x.LeftOut()
	if len(left) != 1 || left[0].At != 1000+int64(len(before)) || left[0].Size != int64(len(long)-1) {
		t.Errorf("left out %+v, want the line at %d of %d bytes", left, 1000+len(before), len(long)-1)
	}

	// A line just within the bound is indexed, and neither it nor its
	// records are held after.
	got.Reset()
	x = NewIndexer(&got, 0, nil, 1<<20)
	within := msg("w1", "user", "2026-10-07T01:00:00Z", "WITHIN "+strings.Repeat("y", 1<<20-200))
	for p := []byte(within + after); len(p) > 0; {
		n := min(100<<10, len(p))
		x.Write(p[:n])
		p = p[n:]
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if want := Index(nil, []byte(within+after), nil); !bytes.Equal(got.Bytes(), want) || len(x.LeftOut()) != 0 {
		t.Errorf("a line within the bound: %d bytes of records, want %d; left out %v", got.Len(), len(want), x.LeftOut())
	}
	if cap(x.out) > 4*flushRecords {
		t.Errorf("the indexer keeps a buffer of %d KiB after the line", cap(x.out)>>10)
	}
}

// Records read a buffer at a time, in reads of any size, match as the
// same records in memory do, a record longer than the buffer included.
func TestScanFrom(t *testing.T) {
	data := []byte(sample)
	for i := range 5000 {
		data = append(data, msg("n", "user", "2026-10-07T01:00:00Z", strings.Repeat("filler text ", i%20))...)
	}
	data = append(data, msg("big", "user", "2026-10-07T01:00:00Z", strings.Repeat("z", 1500<<10)+" Login at the end")...)
	recs := Index(nil, data, nil)
	if len(recs) < 2*scanBuffer {
		t.Fatalf("only %d bytes of records", len(recs))
	}
	var bufs Buffers
	for _, p := range []Pattern{{Text: "Login"}, {Text: "login", IgnoreCase: true}, {Text: `^login`, Regexp: true}, {Text: `Lo[g]in\b`, Regexp: true}, {Text: "filler text filler"}} {
		m, err := Compile(p)
		if err != nil {
			t.Fatal(err)
		}
		var want, got []string
		var scratch []byte
		m.Scan(recs, 0, &scratch, func(r Record) { want = append(want, r.Entry+":"+r.Text) })
		for _, r := range []io.Reader{bytes.NewReader(recs), iotest.HalfReader(bytes.NewReader(recs))} {
			got = got[:0]
			if err := m.ScanFrom(r, 0, &bufs, func(r Record) { got = append(got, r.Entry+":"+r.Text) }); err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("%+v: %d matches, want %d", p, len(got), len(want))
			}
		}
	}
	if cap(bufs.buf) > scanBuffer {
		t.Errorf("ScanFrom keeps a buffer of %d MiB", cap(bufs.buf)>>20)
	}
}

// Records written and then dropped leave the cache as it was: appended
// ones are cut off, a new copy's temp file is removed; spooled ones are
// read whole and the cache forgets the copy.
func TestPending(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCache(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := &CopyState{Session: "s1", Machine: "desk", Generation: "0000000000000001", Offset: 10}
	if err := store(c, st, false, "a\tuser\ttext\t0\tfirst\n"); err != nil {
		t.Fatal(err)
	}
	p, err := c.Begin("s1", "desk", st)
	if err != nil || p == nil {
		t.Fatal(err)
	}
	p.Write([]byte("b\tuser\ttext\t0\tdamaged\n"))
	p.Abort()
	p, err = c.Begin("s1", "desk", nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Write([]byte("c\tuser\ttext\t0\tanother generation\n"))
	p.Abort()
	got, _ := c.State("s1", "desk")
	if recs := records(t, c, got); recs != "a\tuser\ttext\t0\tfirst\n" || got.Offset != 10 {
		t.Errorf("after two aborts: %+v %q", got, recs)
	}
	files, _ := os.ReadDir(filepath.Join(dir, "s1"))
	if len(files) != 2 {
		t.Errorf("after two aborts the copy's folder holds %d files", len(files))
	}
	if fi, _ := os.Stat(filepath.Join(dir, "s1", "desk.txt")); fi.Size() != got.Records {
		t.Errorf("records file of %d bytes, %d valid", fi.Size(), got.Records)
	}

	// A cut-off run's temp file goes at the next eviction.
	os.WriteFile(filepath.Join(dir, "s1", "desk.123"+tmpSuffix), []byte("x"), 0o600)
	if _, err := c.Evict(); err != nil {
		t.Fatal(err)
	}
	if files, _ := os.ReadDir(filepath.Join(dir, "s1")); len(files) != 2 {
		t.Errorf("after eviction the copy's folder holds %d files", len(files))
	}

	p, err = c.Begin("s1", "desk", got)
	if err != nil || p == nil {
		t.Fatal(err)
	}
	p.Write([]byte("b\tuser\ttext\t0\tsecond\n"))
	var sp Spool
	defer sp.Close()
	recs, err := p.spool(&sp)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(recs)
	if string(b) != "a\tuser\ttext\t0\tfirst\nb\tuser\ttext\t0\tsecond\n" {
		t.Errorf("spooled records %q", b)
	}
	if st, _ := c.State("s1", "desk"); st != nil {
		t.Errorf("the cache still holds the spooled copy: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "s1")); !os.IsNotExist(err) {
		t.Errorf("the copy's folder is still there: %v", err)
	}

	// Records gone from under their state: indexed anew.
	st2 := &CopyState{Session: "s2", Machine: "desk", Generation: "0000000000000001"}
	if err := store(c, st2, false, "a\tuser\ttext\t0\tfirst\n"); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "s2", "desk.txt"))
	if p, err := c.Begin("s2", "desk", st2); p != nil || err != nil {
		t.Errorf("appending to records gone: %v %v", p, err)
	}
}
