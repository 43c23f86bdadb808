package compact

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/store"
)

// benchAppends returns n appends of one line each, drawn from the real
// session corpus ($OMPSYNC_CORPUS, else ../testdata/corpus), so their
// sizes and how well they compress are those of real sessions; without a
// corpus, synthetic lines.
func benchAppends(b *testing.B, n int) [][]byte {
	dir := os.Getenv("OMPSYNC_CORPUS")
	if dir == "" {
		dir = filepath.Join("..", "testdata", "corpus")
	}
	var pool [][]byte
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			if line := sc.Bytes(); len(line) > 0 && line[0] == '{' {
				pool = append(pool, append(append([]byte{}, line...), '\n'))
			}
		}
		fh.Close()
	}
	rng := rand.New(rand.NewPCG(42, 42))
	out := make([][]byte, n)
	if len(pool) == 0 {
		b.Logf("no corpus in %s: synthetic lines", dir)
		for i := range out {
			out[i] = lines(rng, 1)
		}
		return out
	}
	for i := range out {
		out[i] = pool[rng.IntN(len(pool))]
	}
	return out
}

type benchBackend struct {
	name   string
	client remote.Client
}

// benchBackends are the file driver and versitygw through aws-sdk-go-v2
// (the shared server TestMain starts).
func benchBackends(b *testing.B) []benchBackend {
	c, err := backend.Open(b.Context(), "file://"+b.TempDir(), backend.S3Options{})
	if err != nil {
		b.Fatal(err)
	}
	out := []benchBackend{{"file", c}}
	if os.Getenv(remotetest.EnvEndpoint) == "" {
		b.Log("no S3 server: file driver only")
		return out
	}
	srv := remotetest.SharedServer(b)
	s3, err := backend.Open(context.Background(), "s3://"+srv.NewBucket(b), backend.S3Options{
		Endpoint: srv.Endpoint, Region: "us-east-1", PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey,
	})
	if err != nil {
		b.Fatal(err)
	}
	return append(out, benchBackend{"s3", s3})
}

// BenchmarkSession10k writes a session of 10,000 appends (one chunk each)
// as the agent does, once without compaction ("upload") and once with
// compaction called as the agent calls it ("upload+compact": busy after
// every MaxChunks+1 uploads, idle at the end), reporting what compaction
// costs; then it times restoring each copy. Each upload takes 10,000 PUTs:
// run it once.
//
//	go test -run '^$' -bench Session10k -benchtime 1x ./compact/
func BenchmarkSession10k(b *testing.B) {
	appends := benchAppends(b, 10000)
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) { benchSession(b, be.client, appends) })
	}
}

func benchSession(b *testing.B, c remote.Client, appends [][]byte) {
	var plain, compacted *writer
	run := 0
	upload := func(b *testing.B, compact bool) *writer {
		run++
		id := fmt.Sprintf("bench%d", run)
		agentCnt, compCnt := &counter{Client: c}, &counter{Client: c}
		agent, comp := repo.New(agentCnt, repo.NewZstd()), repo.New(compCnt, repo.NewZstd())
		w := newWriter(agent, session(id, "laptop"), "0000000000000001", 0)
		p := Policy{}.withDefaults()
		var rewritten int64
		var took time.Duration
		mostChunks, since := 0, 0
		compactNow := func(idle bool) {
			start := time.Now()
			res, err := Stream(context.Background(), comp, w.s, w.gen, idle, p)
			took += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			rewritten += res.Rewritten
			mostChunks = max(mostChunks, res.Before)
		}
		for _, a := range appends {
			if err := w.append(context.Background(), a); err != nil {
				b.Fatal(err)
			}
			if since++; compact && since > p.MaxChunks {
				compactNow(false)
				since = 0
			}
		}
		if compact {
			compactNow(true)
		}
		size := float64(len(w.data))
		b.ReportMetric(size, "session-bytes")
		b.ReportMetric(float64(agentCnt.puts), "agent-PUTs")
		b.ReportMetric(float64(agentCnt.putBytes), "agent-upload-bytes")
		b.ReportMetric(float64(storedSize(b, c, w)), "stored-bytes")
		if compact {
			b.ReportMetric(float64(compCnt.putBytes)/size, "extra-upload/size")
			b.ReportMetric(float64(compCnt.putBytes)/float64(agentCnt.putBytes), "extra-upload/agent-upload")
			b.ReportMetric(float64(rewritten)/size, "rewritten/size")
			b.ReportMetric(float64(compCnt.puts), "compaction-PUTs")
			b.ReportMetric(float64(compCnt.gets+compCnt.stats), "compaction-GETs")
			b.ReportMetric(float64(compCnt.lists), "compaction-LISTs")
			b.ReportMetric(float64(compCnt.dels), "compaction-DELETEs")
			b.ReportMetric(float64(compCnt.getBytes), "compaction-download-bytes")
			b.ReportMetric(float64(mostChunks), "most-chunks")
			b.ReportMetric(took.Seconds(), "compaction-s")
		}
		return w
	}
	b.Run("upload", func(b *testing.B) {
		for b.Loop() {
			plain = upload(b, false)
		}
	})
	b.Run("upload+compact", func(b *testing.B) {
		for b.Loop() {
			compacted = upload(b, true)
		}
	})
	if plain == nil || compacted == nil || !bytes.Equal(plain.data, compacted.data) {
		b.Fatal("the two copies differ (or were not written: do not filter out the upload benchmarks)")
	}
	b.Run("restore-before", func(b *testing.B) { benchRestore(b, c, plain) })
	b.Run("restore-after", func(b *testing.B) { benchRestore(b, c, compacted) })
}

func storedSize(b *testing.B, c remote.Client, w *writer) int64 {
	var n int64
	for obj, err := range c.List(context.Background(), w.s.GenPrefix(w.gen), remote.ListOptions{}) {
		if err != nil {
			b.Fatal(err)
		}
		n += obj.Size
	}
	return n
}

// benchRestore times what a restore of the session costs: one LIST, then
// reading and verifying every chunk.
func benchRestore(b *testing.B, c remote.Client, w *writer) {
	cnt := &counter{Client: c}
	r := repo.New(cnt, repo.NewZstd())
	ctx := context.Background()
	runs := 0
	for b.Loop() {
		got, err := read(ctx, r, w.s, w.gen)
		if err != nil || !bytes.Equal(got, w.data) {
			b.Fatalf("restore: %v", err)
		}
		runs++
	}
	b.ReportMetric(float64(cnt.gets)/float64(runs), "GETs/op")
	b.ReportMetric(float64(listPages(cnt.listed/runs)), "LIST-pages/op")
	b.ReportMetric(float64(cnt.listed)/float64(runs), "objects")
}

// BenchmarkPruneCompare is what retention's comparison costs for one
// superseded session of 64 MiB of corpus lines whose newest generation
// holds every one of them (omp's rewrite): a dry-run prune reads both
// generations whole, keying every line (the worst case: a kept generation
// stops at its first missing line). MB/s counts the bytes of both.
//
//	go test -run '^$' -bench PruneCompare -benchtime 5x ./compact/
func BenchmarkPruneCompare(b *testing.B) {
	ctx := context.Background()
	c, err := backend.Open(ctx, "file://"+b.TempDir(), backend.S3Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := repo.New(c, repo.NewZstd())
	var data []byte
	for _, a := range benchAppends(b, 40000) {
		if len(data) >= 64<<20 {
			break
		}
		data = append(data, a...)
	}
	for len(data) < 64<<20 {
		data = append(data, data...)
	}
	now := time.Now()
	s := session("big", "laptop")
	var gens []string
	for _, age := range []time.Duration{100 * day, 50 * day} {
		w := newWriter(r, s, repo.NewGeneration(now.Add(-age).UnixNano()), 0)
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 4<<20)
			if i := bytes.LastIndexByte(rest[:n], '\n'); i >= 0 && n < len(rest) {
				n = i + 1
			}
			if err := w.append(ctx, rest[:n]); err != nil {
				b.Fatal(err)
			}
			rest = rest[n:]
		}
		gens = append(gens, w.gen)
	}
	putCatalog(b, r, "laptop", entry("big", gens[1], repo.StatePresent, now.Add(-50*day)))
	b.SetBytes(2 * int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		rep, err := Prune(ctx, r, store.OMP(), "laptop", Retention{Generations: 30 * day}, now, true)
		if err != nil || len(rep.Items) != 1 {
			b.Fatalf("%+v, %v", rep, err)
		}
	}
	// The keys held are 16 bytes a line of the newest.
	b.ReportMetric(float64(bytes.Count(data, []byte("\n"))), "lines/generation")
}
