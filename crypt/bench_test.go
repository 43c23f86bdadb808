package crypt_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/remote/file"
	"github.com/ompsync/ompsync/repo"
)

// corpusBytes is real session text: the large pi-mono fixtures.
func corpusBytes(b *testing.B) [][]byte {
	b.Helper()
	var out [][]byte
	for _, name := range []string{"pi-v1-before-compaction-branchedFrom_pi-mono-fixture.jsonl", "pi-v1-large-session_pi-mono-fixture.jsonl"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "shared", "corpus", name))
		if err != nil {
			b.Skip("corpus not found:", err)
		}
		out = append(out, data)
	}
	return out
}

func codecs(b *testing.B) []struct {
	name  string
	codec repo.Codec
} {
	k := newKey(b)
	return []struct {
		name  string
		codec repo.Codec
	}{
		{"zstd", repo.NewZstd()},
		{"zstd+age", mustNew(b, crypt.Options{IdentityFile: k.file})},
	}
}

// BenchmarkSeal measures the codec alone on session text: a live append
// (4 KiB) and a backlog chunk (1 MiB). MB/s is of plaintext.
func BenchmarkSeal(b *testing.B) {
	text := bytes.Join(corpusBytes(b), nil)
	for _, size := range []int{4 << 10, 1 << 20} {
		plain := text[:size]
		for _, c := range codecs(b) {
			b.Run(fmt.Sprintf("%s/%dKiB", c.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.codec.Seal(plain); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkOpen is the read side of BenchmarkSeal.
func BenchmarkOpen(b *testing.B) {
	text := bytes.Join(corpusBytes(b), nil)
	for _, size := range []int{4 << 10, 1 << 20} {
		plain := text[:size]
		for _, c := range codecs(b) {
			b.Run(fmt.Sprintf("%s/%dKiB", c.name, size>>10), func(b *testing.B) {
				sealed, err := c.codec.Seal(plain)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.codec.Open(sealed, int64(size)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkUpload measures upload throughput end to end: one agent pass
// backing up four sessions of real text (6.7 MB) to an empty remote, with
// and without encryption. MB/s is of session bytes.
func BenchmarkUpload(b *testing.B) {
	bodies := corpusBytes(b)
	// Four sessions: each fixture twice, under new ids of the same length.
	dir := filepath.Join(b.TempDir(), "agent")
	var total int64
	for i := range 4 {
		body := bodies[i%2]
		id := fmt.Sprintf("0190%04x-0000-7000-8000-0000000000bb", i)
		old := body[bytes.Index(body, []byte(`"id":"`))+6:][:36]
		body = bytes.Replace(body, old, []byte(id), 1)
		p := filepath.Join(dir, "sessions", "-work", "2026-11-30T00-00-00-00"+fmt.Sprint(i)+"Z_"+id+".jsonl")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o600); err != nil {
			b.Fatal(err)
		}
		total += int64(len(body))
	}

	remotes := []struct {
		name string
		open func(b *testing.B) remote.Client
	}{
		{"file", func(b *testing.B) remote.Client {
			c, err := file.New(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			return c
		}},
	}
	if os.Getenv(remotetest.EnvEndpoint) != "" {
		remotes = append(remotes, struct {
			name string
			open func(b *testing.B) remote.Client
		}{"s3-aws", func(b *testing.B) remote.Client {
			srv := remotetest.SharedServer(b)
			c, err := backend.Open(context.Background(), "s3://"+srv.NewBucket(b), backend.S3Options{
				Endpoint: srv.Endpoint, Region: "us-east-1", PathStyle: true,
				AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey,
			})
			if err != nil {
				b.Fatal(err)
			}
			return c
		}})
	}
	for _, rm := range remotes {
		for _, c := range codecs(b) {
			b.Run(rm.name+"/"+c.name, func(b *testing.B) {
				b.SetBytes(total)
				var stored int64
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					client := rm.open(b)
					ag, err := agent.New(repo.New(client, c.codec), agent.Options{AgentDir: dir, StateDir: b.TempDir(), Machine: "bench"})
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if err := ag.Once(context.Background()); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					ag.Close()
					stored = 0
					for obj, err := range client.List(context.Background(), "", remote.ListOptions{}) {
						if err != nil {
							b.Fatal(err)
						}
						stored += obj.Size
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(stored)/float64(total), "stored/plain")
			})
		}
	}
}
