package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Restic runs restic (Debian's package) with its S3 backend against one
// bucket of the server, configured through environment variables only.
// Its defaults are kept: compression auto (repository version 2), five
// connections, a local cache.
type Restic struct {
	Bin string
	env []string
}

// NewRestic configures restic for the bucket at endpoint (a path-style
// http URL). home is an empty folder for HOME and restic's cache, so that
// nothing of the user's is read.
func NewRestic(bin, endpoint, accessKey, secretKey, bucket, home string) *Restic {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "RESTIC_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"HOME="+home,
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"RESTIC_REPOSITORY=s3:"+endpoint+"/"+bucket,
		"RESTIC_PASSWORD=bench",
		"AWS_ACCESS_KEY_ID="+accessKey,
		"AWS_SECRET_ACCESS_KEY="+secretKey,
	)
	return &Restic{Bin: bin, env: env}
}

// WithCache returns the same restic with its cache in dir: a restore on a
// new machine starts without one.
func (r *Restic) WithCache(dir string) *Restic {
	return &Restic{Bin: r.Bin, env: append(append([]string(nil), r.env...), "RESTIC_CACHE_DIR="+dir)}
}

func (r *Restic) run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, r.Bin, args...)
	cmd.Env = r.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("restic %s: %w: %s", strings.Join(args, " "), err, tail(out.String()))
	}
	return nil
}

// Init creates the repository (restic's default format).
func (r *Restic) Init(ctx context.Context) error { return r.run(ctx, "init") }

// Backup backs up dir as restic does by default: the last snapshot of the
// same paths is the parent, so unchanged files are not read again.
func (r *Restic) Backup(ctx context.Context, dir string) error {
	return r.run(ctx, "backup", "--quiet", "--host", "bench", dir)
}

// Restore restores the latest snapshot into target (files come back under
// target + their absolute path).
func (r *Restic) Restore(ctx context.Context, target string) error {
	return r.run(ctx, "restore", "--quiet", "latest", "--target", target)
}
