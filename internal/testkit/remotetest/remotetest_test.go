package remotetest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
)

func TestMain(m *testing.M) { Main(m) }

// The harness's own server stops and starts on the same port with the same
// data, and a stopped server looks like an outage (transient errors).
func TestServerRestart(t *testing.T) {
	srv := StartServer(t)
	bucket := srv.NewBucket(t)
	c, err := backend.OpenRaw(t.Context(), "s3://"+bucket, backend.S3Options{
		Endpoint: srv.Endpoint, PathStyle: true, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	Put(t, c, "k", []byte("v"))
	if _, err := os.Stat(srv.Dir + "/" + bucket + "/k"); err != nil {
		t.Errorf("object not in the server's folder: %v", err)
	}
	srv.Stop()
	srv.Stop() // idempotent
	if _, err := c.Stat(t.Context(), "k"); !remote.IsTransient(err) {
		t.Errorf("stat while stopped: %v is not transient", err)
	}
	srv.Start(t)
	if got := Get(t, c, "k", 0, -1); string(got) != "v" {
		t.Errorf("after restart: %q", got)
	}
}

func TestBackends(t *testing.T) {
	bs := Backends(t)
	var names []string
	for _, b := range bs {
		names = append(names, b.Name)
		if b.Client == nil {
			t.Errorf("%s: no client", b.Name)
			continue
		}
		if got := Keys(t, b.Client, "", remote.ListOptions{}); len(got) != 0 {
			t.Errorf("%s starts with %q", b.Name, got)
		}
		Put(t, b.Client, "k", []byte(b.Name))
	}
	want := "file,s3-aws,s3-minio"
	if os.Getenv(EnvMinioEndpoint) != "" {
		want += ",minio-aws,minio-minio"
	}
	if strings.Join(names, ",") != want {
		t.Errorf("backends %v, want %s", names, want)
	}
	// Every backend is its own store.
	for _, b := range bs {
		if got := Get(t, b.Client, "k", 0, -1); string(got) != b.Name {
			t.Errorf("%s holds %q", b.Name, got)
		}
	}
}

// helperEnv marks the child process of TestS3SkipPolicy.
const helperEnv = "OMPSYNC_REMOTETEST_HELPER"

func TestBackendsHelper(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("run by TestS3SkipPolicy")
	}
	Backends(t)
}

// Without a server the S3 backends skip, with a message on how to run them;
// under CI=true they fail, so CI never passes by skipping.
func TestS3SkipPolicy(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBackendsHelper$", "-test.v", "-test.count=1")
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "OMPSYNC_TEST_") && !strings.HasPrefix(kv, "CI=") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, helperEnv+"=1", "CI="+ci, EnvVersitygw+"=/nonexistent/versitygw")
		out, err := cmd.CombinedOutput()
		s := string(out)
		if ci == "" {
			if err != nil || !strings.Contains(s, "--- SKIP: TestBackendsHelper/s3-aws") || !strings.Contains(s, "bash .ci/run") {
				t.Errorf("without CI: want a pass with s3 skipped and a hint; got %v:\n%s", err, s)
			}
		} else if err == nil || !strings.Contains(s, "--- FAIL: TestBackendsHelper/s3-aws") || !strings.Contains(s, "--- FAIL: TestBackendsHelper/minio-aws") {
			t.Errorf("with CI=true: want a failure of the versitygw and the MinIO backends; got %v:\n%s", err, s)
		}
		if ci == "" && strings.Contains(s, "minio-aws") {
			t.Errorf("without CI and without a MinIO server, MinIO is named:\n%s", s)
		}
	}
}
