package bench

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ompsync/ompsync/remote"
)

// Rclone runs `rclone copy` against an S3 remote named "bench", configured
// through environment variables only (no config file is read or written).
type Rclone struct {
	Bin string
	env []string
}

// NewRclone configures rclone for an S3-compatible endpoint with path-style
// addressing. confDir holds an empty rclone.conf so the user's is not read.
func NewRclone(bin, endpoint, accessKey, secretKey, confDir string) (*Rclone, error) {
	conf := filepath.Join(confDir, "rclone.conf")
	if err := os.WriteFile(conf, nil, 0o600); err != nil {
		return nil, err
	}
	// rclone (1.60) fails to build its S3 client when AWS_CA_BUNDLE is set
	// ("unsupported transport"); the endpoint is plain HTTP on loopback, so
	// no CA bundle is needed. Other AWS_ and RCLONE_ settings of the user
	// are left out too.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "RCLONE_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"RCLONE_CONFIG="+conf,
		"RCLONE_CONFIG_BENCH_TYPE=s3",
		"RCLONE_CONFIG_BENCH_PROVIDER=Other",
		"RCLONE_CONFIG_BENCH_ENDPOINT="+endpoint,
		"RCLONE_CONFIG_BENCH_REGION=us-east-1",
		"RCLONE_CONFIG_BENCH_ACCESS_KEY_ID="+accessKey,
		"RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY="+secretKey,
		"RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE=true",
	)
	return &Rclone{Bin: bin, env: env}, nil
}

// Copy runs `rclone copy src dst` with rclone's defaults; "bench:bucket/path"
// names the server.
func (r *Rclone) Copy(ctx context.Context, src, dst string) error {
	cmd := exec.CommandContext(ctx, r.Bin, "copy", src, dst)
	cmd.Env = r.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("rclone copy %s %s: %w: %s", src, dst, err, out.String())
	}
	return nil
}

// Whole is what simple replicators do: every file whose size or mtime
// changed since the last pass is uploaded again, whole, under its path.
type Whole struct {
	Client   remote.Client
	Root     string // uploads Root/sessions/...
	Parallel int

	seen map[string][2]int64 // rel -> size, mtime
}

// Sync uploads the changed files and returns how many.
func (w *Whole) Sync(ctx context.Context) (int, error) {
	if w.seen == nil {
		w.seen = map[string][2]int64{}
	}
	type job struct {
		rel string
		st  [2]int64
	}
	var jobs []job
	err := filepath.WalkDir(filepath.Join(w.Root, "sessions"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(w.Root, p)
		rel = filepath.ToSlash(rel)
		st := [2]int64{fi.Size(), fi.ModTime().UnixNano()}
		if w.seen[rel] != st {
			jobs = append(jobs, job{rel, st})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
	)
	sem := make(chan struct{}, max(1, w.Parallel))
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			data, err := os.ReadFile(filepath.Join(w.Root, filepath.FromSlash(j.rel)))
			if err == nil {
				err = w.Client.Put(ctx, j.rel, data, remote.PutOptions{})
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			w.seen[j.rel] = j.st
		}()
	}
	wg.Wait()
	return len(jobs), firstErr
}
