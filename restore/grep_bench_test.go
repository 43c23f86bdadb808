package restore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/search"
	"github.com/ompsync/ompsync/session"
)

// grepBenchBytes is how much session text the grep benchmark backs up:
// 500 MB by default, OMPSYNC_BENCH_GREP_MB to change it.
func grepBenchBytes(b *testing.B) int {
	if s := os.Getenv("OMPSYNC_BENCH_GREP_MB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		return n << 20
	}
	return 500 << 20
}

// BenchmarkGrep searches 500 MB of real sessions (the corpus, each copy
// given its own id) backed up to each remote: the first run, which fetches
// and indexes everything, and a repeated run of the unchanged remote,
// which reads only the catalogs and the cache.
//
//	go test -run '^$' -bench Grep -benchtime 3x ./restore/
func BenchmarkGrep(b *testing.B) {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*.jsonl"))
	var corpus [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		corpus = append(corpus, data)
	}
	want := grepBenchBytes(b)
	for _, name := range []string{"file", "s3"} {
		b.Run(name, func(b *testing.B) {
			var c remote.Client
			var err error
			if name == "file" {
				c, err = file.New(b.TempDir())
			} else {
				if os.Getenv(remotetest.EnvEndpoint) == "" {
					b.Skip("no S3 server (install versitygw)")
				}
				srv := remotetest.SharedServer(b)
				c, err = backend.Open(b.Context(), "s3://"+srv.NewBucket(b), backend.S3Options{Endpoint: srv.Endpoint,
					Region: "us-east-1", PathStyle: true, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey})
			}
			if err != nil {
				b.Fatal(err)
			}
			r := repo.New(c, repo.NewZstd())
			dir, state := b.TempDir(), b.TempDir()
			total := 0
			for i := 0; total < want; i++ {
				src := corpus[i%len(corpus)]
				h, _, err := session.ReadHeader(src)
				if err != nil {
					b.Fatal(err)
				}
				id := fmt.Sprintf("019b%04x-0000-7000-8000-%012d", i, i)
				data := bytes.Replace(src, []byte(h.ID), []byte(id), 1)
				if i == 7 {
					data = append(data, []byte(`{"type":"message","id":"bench001","parentId":null,"timestamp":"2026-10-07T02:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":"NEEDLE-4c1d"}]}}`+"\n")...)
				}
				p := filepath.Join(dir, "sessions", "-w", fmt.Sprintf("2026-10-07T00-45-40-000Z_%s.jsonl", id))
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(p, data, 0o600); err != nil {
					b.Fatal(err)
				}
				total += len(data)
			}
			a, err := agent.New(r, agent.Options{AgentDir: dir, StateDir: state, Machine: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			if err := a.Once(context.Background()); err != nil {
				b.Fatal(err)
			}
			a.Close()
			// What a first run downloads: the stored (compressed) chunks.
			var stored int64
			for obj, err := range c.List(b.Context(), repo.SessionsPrefix(), remote.ListOptions{}) {
				if err != nil {
					b.Fatal(err)
				}
				stored += obj.Size
			}
			m, _ := search.Compile(search.Pattern{Text: "NEEDLE-4c1d"})
			run := func(b *testing.B, cache *search.Cache) {
				n := 0
				rep, err := Grep(context.Background(), r, nil, GrepOptions{Options: Options{Parallel: 16}, Pattern: m, Cache: cache}, func(GrepMatch) error { n++; return nil })
				if err != nil || n != 1 || len(rep.Problems) > 0 {
					b.Fatalf("grep: %v, %d matches, %v", err, n, rep.Problems)
				}
			}
			b.Run("first", func(b *testing.B) {
				b.SetBytes(int64(total))
				for range b.N {
					b.StopTimer()
					cache, err := search.OpenCache(b.TempDir(), 4<<30)
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					run(b, cache)
					cache.Close()
				}
				b.ReportMetric(float64(stored)/1e6, "MB-down/op")
			})
			b.Run("repeated", func(b *testing.B) {
				cache, err := search.OpenCache(b.TempDir(), 4<<30)
				if err != nil {
					b.Fatal(err)
				}
				defer cache.Close()
				run(b, cache)
				b.SetBytes(int64(total))
				b.ResetTimer()
				for range b.N {
					run(b, cache)
				}
			})
		})
	}
}
