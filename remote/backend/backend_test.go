package backend_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/remote/file"
)

func TestMain(m *testing.M) { remotetest.Main(m) }

func TestOpenFileCreatesFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ompsync")
	c, err := backend.Open(t.Context(), "file://"+dir, backend.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("remote folder: %v, %v; want a 0700 folder", fi, err)
	}
	remotetest.Put(t, c, "x/y", []byte("z"))
	if b, err := os.ReadFile(filepath.Join(dir, "x", "y")); err != nil || string(b) != "z" {
		t.Errorf("object on disk: %q, %v", b, err)
	}
	raw, err := backend.OpenRaw(t.Context(), "file://"+dir, backend.S3Options{})
	if _, ok := raw.(*file.Client); err != nil || !ok {
		t.Errorf("OpenRaw(file://) = %T, %v", raw, err)
	}
}

// A remote folder whose parent is missing (a disk not mounted) is not made
// again on the disk below: the error names the parent, and nothing is
// created.
func TestOpenFileParentMissing(t *testing.T) {
	media := filepath.Join(t.TempDir(), "media")
	dir := filepath.Join(media, "usb", "backup")
	_, err := backend.Open(t.Context(), "file://"+dir, backend.S3Options{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(media, "usb")+" does not exist: is the disk mounted?") {
		t.Fatalf("Open with the remote's parent missing = %v, want an error naming the parent", err)
	}
	if _, err := os.Stat(media); !os.IsNotExist(err) {
		t.Errorf("%s after the refused open: %v, want it still missing", media, err)
	}
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := backend.Open(t.Context(), "file://"+file, backend.S3Options{}); err == nil || !strings.Contains(err.Error(), "is a file, not a folder") {
		t.Errorf("Open of a file = %v, want it refused", err)
	}
}

func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct{ url, client, want string }{
		{"", "", "empty"},
		{"ftp://host/x", "", "unsupported scheme"},
		{"file://relative/path", "", "absolute"},
		{"s3://Bad_Bucket", "", "bucket names"},
		{"s3://bucket", "gcs", `s3 client "gcs"`},
	} {
		_, err := backend.Open(t.Context(), tc.url, backend.S3Options{Client: tc.client})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q, client %q) = %v, want an error about %q", tc.url, tc.client, err, tc.want)
		}
	}
}

// Each s3.client value opens its own driver, and none the default's.
func TestOpenPicksS3Client(t *testing.T) {
	opts := backend.S3Options{Endpoint: "http://127.0.0.1:1", AccessKeyID: "a", SecretAccessKey: "b"}
	opened := func(client string) string {
		opts := opts
		opts.Client = client
		c, err := backend.OpenRaw(t.Context(), "s3://bucket/pre/fix", opts)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%T", c)
	}
	seen := map[string]string{}
	for _, b := range backend.Backends() {
		if b.Scheme != "s3" {
			continue
		}
		c, err := b.Open(t.Context(), remote.Location{Scheme: "s3", Bucket: "bucket"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%T", c)
		if got := opened(b.Client); got != want || seen[want] != "" {
			t.Errorf("client %q opened %s, want %s, not that of %q", b.Client, got, want, seen[want])
		}
		seen[want] = b.Client
	}
	if def := backend.Clients("s3")[0]; opened("") != opened(def) {
		t.Errorf("no client opened %s, not the default %s", opened(""), opened(def))
	}
}

func TestOptionsHideSecret(t *testing.T) {
	o := backend.S3Options{AccessKeyID: "AKID", SecretAccessKey: "s3cr3t-value"}
	for _, s := range []string{fmt.Sprint(o), fmt.Sprintf("%+v", o), fmt.Sprintf("%#v", o)} {
		if strings.Contains(s, "s3cr3t-value") {
			t.Errorf("options print the secret: %s", s)
		}
	}
}

// Each way to store works end to end through Open, with retries.
func TestOpenEveryBackend(t *testing.T) {
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		remotetest.Put(t, b.Client, "v1/hello", []byte("world"))
		// What a config or a subprocess gets is enough to reopen it.
		c, err := backend.Open(t.Context(), b.URL, b.S3)
		if err != nil {
			t.Fatal(err)
		}
		if got := remotetest.Get(t, c, "v1/hello", 0, -1); string(got) != "world" {
			t.Errorf("reopened %s: %q", b.URL, got)
		}
	})
}
