package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ompsync/ompsync/remote/file"
)

func TestWholeUploadsChangedFilesAgain(t *testing.T) {
	ctx := context.Background()
	root, store := t.TempDir(), t.TempDir()
	c, err := file.New(store)
	if err != nil {
		t.Fatal(err)
	}
	g := NewGen(loadCorpus(t), 5)
	a, err := g.NewSession(root, "-p", time.Unix(1e9, 0), 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.NewSession(root, "-q", time.Unix(1e9+1, 0), 5); err != nil {
		t.Fatal(err)
	}
	w := &Whole{Client: c, Root: root, Parallel: 2}
	for i, want := range []int{2, 0} {
		n, err := w.Sync(ctx)
		if err != nil || n != want {
			t.Fatalf("sync %d: %d files, %v; want %d", i, n, err, want)
		}
	}
	if _, err := g.Append(a, time.Unix(1e9+2, 0), 1); err != nil {
		t.Fatal(err)
	}
	if n, err := w.Sync(ctx); err != nil || n != 1 {
		t.Fatalf("after an append: %d files, %v; want 1", n, err)
	}
	got, err := os.ReadFile(filepath.Join(store, filepath.FromSlash(a.Rel)))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(a.Abs)
	if string(got) != string(want) {
		t.Fatal("the uploaded copy is not the whole file")
	}
}

func TestProcReadsThisProcess(t *testing.T) {
	m, err := ProcMem(os.Getpid())
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if m.RSS <= 0 || m.Peak < m.RSS || m.Anon <= 0 {
		t.Fatalf("memory %+v", m)
	}
	if _, err := ProcCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}
