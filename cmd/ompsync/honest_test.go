package main

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/internal/testkit/faultproxy"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote/backend"
)

// gate is a proxy in front of an S3 server that holds the requests it is
// told to hold until it is opened, so a test can act while ompsync waits
// for the remote.
type gate struct {
	URL      string
	mu       sync.Mutex
	hold     func(r *http.Request) bool
	open     chan struct{}
	held     chan struct{} // closed when the first request is held
	heldOnce sync.Once
}

func newGate(t *testing.T, target string, hold func(r *http.Request) bool) *gate {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{hold: hold, open: make(chan struct{}), held: make(chan struct{})}
	proxy := httputil.NewSingleHostReverseProxy(u) // keeps Host: signatures still verify
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.hold(r) {
			g.heldOnce.Do(func() { close(g.held) })
			select {
			case <-g.open:
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { g.release(); srv.Close() })
	g.URL = srv.URL
	return g
}

// release lets every held request, and every later one, through.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// s3Clients runs f once for each S3 client against the shared test server.
func s3Clients(t *testing.T, f func(t *testing.T, srv *remotetest.Server, client string)) {
	for _, client := range backend.Clients("s3") {
		t.Run(client, func(t *testing.T) { f(t, remotetest.SharedServer(t), client) })
	}
}

// s3Options points a client at endpoint with the server's keys.
func s3Options(srv *remotetest.Server, client, endpoint string) backend.S3Options {
	return backend.S3Options{Client: client, Endpoint: endpoint, Region: "us-east-1", PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}
}

// SIGTERM while the agent is still starting (the service manager stopping
// it as it starts, here while the remote has not yet answered its first
// request): it finishes start-up, uploads what is settled and exits 0.
func TestSIGTERMDuringStartUp(t *testing.T) {
	s3Clients(t, func(t *testing.T, srv *remotetest.Server, client string) {
		bucket := srv.NewBucket(t)
		g := newGate(t, srv.Endpoint, func(*http.Request) bool { return true })
		m := newMachineEnv(t, "s3://"+bucket, s3Options(srv, client, g.URL), "starty")
		w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 11, 2)
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			if err := w.step(); err != nil {
				t.Fatal(err)
			}
		}
		cmd, out := m.start("agent", "--interval", "1h")
		<-g.held // start-up waits for the remote
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		g.release()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("agent stopped during start-up: %v, want exit 0\n%s", err, out)
		}
		if strings.Contains(out.String(), "context canceled") {
			t.Errorf("the log shows the cancellation as an error:\n%s", out)
		}
		r := openTestRepo(t, "s3://"+bucket, s3Options(srv, client, srv.Endpoint))
		for _, p := range w.files {
			b, _ := os.ReadFile(p)
			want := b[:bytes.LastIndexByte(b, '\n')+1]
			if got := remoteCopy(t, r, idOf(p), "starty"); !bytes.Equal(got, want) {
				t.Fatalf("%s: remote %d bytes, settled %d\n%s", filepath.Base(p), len(got), len(want), out)
			}
		}
	})
}

// errorLine is the last line of a command's output, which must be its one
// error line.
func errorLine(t *testing.T, out string) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "ompsync: ") {
		t.Errorf("the output does not end with an 'ompsync: ' error line:\n%s", out)
	}
	return last
}

// failsWith runs ompsync args and checks that it exits 1 with an error
// line holding want, and that no secret appears anywhere in its output.
func failsWith(t *testing.T, m *machineEnv, want string, args ...string) string {
	t.Helper()
	code, out := m.ompsync(args...)
	if code != 1 {
		t.Errorf("ompsync %s: exit %d, want 1\n%s", strings.Join(args, " "), code, out)
	}
	line := errorLine(t, out)
	if !strings.Contains(line, want) {
		t.Errorf("ompsync %s: error line %q lacks %q", strings.Join(args, " "), line, want)
	}
	if s := m.s3.SecretAccessKey; s != "" && strings.Contains(out, s) {
		t.Errorf("ompsync %s: the secret key appears in the output:\n%s", strings.Join(args, " "), out)
	}
	return line
}

// A wrong access key id, or a wrong secret, is said as such, with the
// settings to check, by every command that reads or writes the remote.
func TestWrongAccessKey(t *testing.T) {
	t.Parallel()
	s3Clients(t, func(t *testing.T, srv *remotetest.Server, client string) {
		bucket := srv.NewBucket(t)
		for _, tc := range []struct{ name, id, secret, want string }{
			{"unknown key id", "NOSUCHKEY000", srv.SecretKey, "the server does not know this access key id: check s3.access_key_id / AWS_ACCESS_KEY_ID"},
			{"wrong secret", srv.AccessKey, "not-the-secret-0123456789", "the server does not accept this secret access key for the access key id: check s3.secret_access_key / AWS_SECRET_ACCESS_KEY"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				o := s3Options(srv, client, srv.Endpoint)
				o.AccessKeyID, o.SecretAccessKey = tc.id, tc.secret
				m := newMachineEnv(t, "s3://"+bucket, o, "keyed")
				for _, args := range [][]string{{"ls"}, {"verify"}, {"restore", "--all"}, {"agent", "--once"}, {"agent"}} {
					line := failsWith(t, m, tc.want, args...)
					if want := "ompsync: s3://" + bucket + ": " + tc.want; line != want {
						t.Errorf("%s: error line %q, want %q", args, line, want)
					}
				}
			})
		}
	})
}

// An endpoint that is a web server, not S3, is named as such, with what it
// answered, instead of passing for a missing object or bucket.
func TestEndpointNotS3(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "<html><body><h1>Not Found</h1></body></html>\n")
	}))
	defer web.Close()
	for _, client := range backend.Clients("s3") {
		t.Run(client, func(t *testing.T) {
			o := backend.S3Options{Client: client, Endpoint: web.URL, PathStyle: true, AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "web-secret-0123456789"}
			m := newMachineEnv(t, "s3://backups/omp", o, "webby")
			want := web.URL + " did not answer like an S3 server (HTTP 404, text/html): check s3.endpoint"
			for _, args := range [][]string{{"ls"}, {"restore", "--all"}, {"agent", "--once"}} {
				if line := failsWith(t, m, want, args...); line != "ompsync: s3://backups/omp: "+want {
					t.Errorf("%s: error line %q", args, line)
				}
			}
		})
	}
}

// runEnv runs ompsync args with exactly the environment env.
func runEnv(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(ompsyncBin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	case err != nil:
		t.Fatal(err)
	}
	return 0, string(out)
}

// withoutAWS is env without any AWS_ variable.
func withoutAWS(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AWS_") {
			out = append(out, kv)
		}
	}
	return out
}

// with is env and kvs, in a new slice.
func with(env []string, kvs ...string) []string {
	return append(append([]string{}, env...), kvs...)
}

// No credentials anywhere (no keys in the configuration, no AWS_
// variables, no ~/.aws): one line says where to put them, at once.
func TestNoCredentials(t *testing.T) {
	const want = "no S3 credentials found: set s3.access_key_id/s3.secret_access_key, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
	check := func(t *testing.T, env []string, remoteURL string) {
		t.Helper()
		for _, args := range [][]string{{"ls"}, {"agent", "--once"}, {"agent"}} {
			code, out := runEnv(t, env, args...)
			if code != 1 {
				t.Errorf("%s: exit %d, want 1\n%s", args, code, out)
			}
			if line := errorLine(t, out); line != "ompsync: "+remoteURL+": "+want {
				t.Errorf("%s: error line %q, want %q", args, line, want)
			}
		}
	}
	// A self-hosted server: the EC2 metadata service is not asked at all.
	s3Clients(t, func(t *testing.T, srv *remotetest.Server, client string) {
		o := s3Options(srv, client, srv.Endpoint)
		o.AccessKeyID, o.SecretAccessKey = "", ""
		m := newMachineEnv(t, "s3://"+srv.NewBucket(t), o, "keyless")
		check(t, withoutAWS(m.environ()), m.remote)
	})
	// AWS itself: the metadata service is asked last, here one on this
	// machine that has no role to give.
	t.Run("aws-imds", func(t *testing.T) {
		var asked atomic.Int32
		imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked.Add(1)
			http.NotFound(w, r)
		}))
		defer imds.Close()
		m := newMachineEnv(t, "s3://ompsync-no-such-bucket/omp", backend.S3Options{}, "keyless")
		env := append(withoutAWS(m.environ()), "AWS_EC2_METADATA_SERVICE_ENDPOINT="+imds.URL, "AWS_REGION=eu-west-1")
		check(t, env, m.remote)
		if asked.Load() == 0 {
			t.Errorf("the metadata service was not asked")
		}
	})
}

// A server with a private CA: refused with the key to set, trusted once
// s3.ca_file or AWS_CA_BUNDLE names the CA, by both clients.
func TestPrivateCA(t *testing.T) {
	t.Parallel()
	s3Clients(t, func(t *testing.T, srv *remotetest.Server, client string) {
		target, _ := url.Parse(srv.Endpoint)
		proxy := httputil.NewSingleHostReverseProxy(target)
		tlsSrv := httptest.NewTLSServer(proxy) // its own CA, for 127.0.0.1
		defer tlsSrv.Close()
		dir := t.TempDir()
		ca := filepath.Join(dir, "ca.pem")
		writeFile(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})), 0o644)
		notPEM := filepath.Join(dir, "not.pem")
		writeFile(t, notPEM, "not a certificate\n", 0o644)

		bucket := srv.NewBucket(t)
		m := newMachineEnv(t, "s3://"+bucket, s3Options(srv, client, tlsSrv.URL), "tlsy")
		base := withoutAWS(m.environ())
		if code, out := runEnv(t, with(base, "OMPSYNC_S3_CA_FILE="+ca), "agent", "--once"); code != 0 {
			t.Fatalf("agent --once with s3.ca_file: exit %d\n%s", code, out)
		}
		for _, tc := range []struct {
			name string
			env  []string
			want string // the error line, "" for success
		}{
			{"no CA", base, "ompsync: s3://" + bucket + ": the server's certificate is signed by an authority this machine does not trust: set s3.ca_file (or AWS_CA_BUNDLE) to the file of that authority's certificate (PEM)"},
			{"system CAs only", with(base, "AWS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt"), "ompsync: s3://" + bucket + ": the server's certificate is not signed by an authority in s3.ca_file (/etc/ssl/certs/ca-certificates.crt): set it to the file of the authority that signed it (PEM)"},
			{"s3.ca_file", with(base, "OMPSYNC_S3_CA_FILE="+ca), ""},
			{"AWS_CA_BUNDLE", with(base, "AWS_CA_BUNDLE="+ca), ""},
			{"not PEM", with(base, "OMPSYNC_S3_CA_FILE="+notPEM), "ompsync: open remote: s3.ca_file " + notPEM + " holds no PEM certificate (-----BEGIN CERTIFICATE-----)"},
		} {
			if tc.name == "system CAs only" {
				if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err != nil {
					continue
				}
			}
			for _, args := range [][]string{{"ls"}, {"agent", "--once"}} {
				code, out := runEnv(t, tc.env, args...)
				switch {
				case tc.want == "" && code != 0:
					t.Errorf("%s: %s: exit %d\n%s", tc.name, args, code, out)
				case tc.want != "" && code != 1:
					t.Errorf("%s: %s: exit %d, want 1\n%s", tc.name, args, code, out)
				case tc.want != "":
					if line := errorLine(t, out); line != tc.want {
						t.Errorf("%s: %s: error line\n%q, want\n%q", tc.name, args, line, tc.want)
					}
				}
			}
		}
	})
}

// A mistyped remote is no repository: ls, verify, restore, compact and
// prune say so and exit 1, and create nothing; only the agent starts one.
func TestNoRepository(t *testing.T) {
	t.Parallel()
	readers := [][]string{{"ls"}, {"verify"}, {"restore", "--all"}, {"compact"}, {"prune", "--dry-run"}}
	t.Run("missing folder", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "remote-typo")
		m := newMachineEnv(t, "file://"+dir, backend.S3Options{}, "typo")
		want := "ompsync: no ompsync repository at " + dir + ": the folder does not exist; check remote (env OMPSYNC_REMOTE), or run 'ompsync agent' to back up there first"
		for _, args := range readers {
			if line := failsWith(t, m, "", args...); line != want {
				t.Errorf("%s: error line\n%q, want\n%q", args, line, want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s created the remote folder (%v)", args, err)
			}
		}
	})
	// A bucket that does not exist: said so, with what to do, by backup
	// and readers alike, with either client.
	t.Run("missing bucket", func(t *testing.T) {
		s3Clients(t, func(t *testing.T, srv *remotetest.Server, client string) {
			m := newMachineEnv(t, "s3://ompsync-no-such-bucket-"+client, s3Options(srv, client, srv.Endpoint), "typo")
			for _, args := range append(readers, []string{"agent", "--once"}) {
				failsWith(t, m, `bucket "ompsync-no-such-bucket-`+client+`" does not exist (NoSuchBucket): create it, or correct the bucket in remote`, args...)
			}
		})
	})
	forEachRemote(t, func(t *testing.T, url string, s3 backend.S3Options) {
		m := newMachineEnv(t, url, s3, "typo")
		at := url
		if strings.HasPrefix(url, "file://") {
			at = strings.TrimPrefix(url, "file://")
			if err := os.MkdirAll(at, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		want := "ompsync: no ompsync repository at " + at + ": it holds no ompsync.json and no backups; check remote (env OMPSYNC_REMOTE), or run 'ompsync agent' to back up there first"
		for _, args := range readers {
			if line := failsWith(t, m, "", args...); line != want {
				t.Errorf("%s: error line\n%q, want\n%q", args, line, want)
			}
		}
		// A remote of other data: readers say so, and do not suggest the
		// agent, which refuses to back up beside it.
		if strings.HasPrefix(url, "file://") {
			other := filepath.Join(t.TempDir(), "home")
			writeFile(t, filepath.Join(other, "Documents", "notes.txt"), "mine\n", 0o600)
			o := newMachineEnv(t, "file://"+other, s3, "typo")
			want := "ompsync: no ompsync repository at " + other + `: it holds other data ("Documents/" is there); check remote (env OMPSYNC_REMOTE): a backup goes to a folder, bucket or prefix of its own`
			for _, args := range readers {
				if line := failsWith(t, o, "", args...); line != want {
					t.Errorf("%s on other data: error line\n%q, want\n%q", args, line, want)
				}
			}
		}
		p := filepath.Join(m.agentDir, "sessions", "-w", "2026-11-30T00-00-00-000Z_019a0000-0000-7000-8000-00000000ab01.jsonl")
		writeFile(t, p, titleSlotLine("")+`{"type":"session","version":3,"id":"019a0000-0000-7000-8000-00000000ab01","timestamp":"2026-11-30T00:00:00Z","cwd":"/w"}`+"\n", 0o600)
		old := time.Now().Add(-time.Hour) // not a file omp is writing
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		if code, out := m.ompsync("agent", "--once"); code != 0 {
			t.Fatalf("agent --once: exit %d\n%s", code, out)
		}
		for _, args := range readers {
			if code, out := m.ompsync(args...); code != 0 {
				t.Errorf("%s after the agent ran: exit %d\n%s", args, code, out)
			}
		}
	})
}

// compact by hand right after the last upload merges what it is asked to;
// where there is nothing to merge it says so per generation.
func TestCompactByHand(t *testing.T) {
	t.Parallel()
	m := newMachineEnv(t, "file://"+t.TempDir(), backend.S3Options{}, "compacty")
	w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 21, 1)
	if err != nil {
		t.Fatal(err)
	}
	id := idOf(w.files[0])
	for range 5 { // five passes, five chunks
		if err := w.step(); err != nil {
			t.Fatal(err)
		}
		if code, out := m.ompsync("agent", "--once"); code != 0 {
			t.Fatalf("agent --once: exit %d\n%s", code, out)
		}
	}
	want, _ := os.ReadFile(w.files[0])
	want = want[:bytes.LastIndexByte(want, '\n')+1]
	where := id + " session generation "
	code, out := m.ompsync("compact", "--compaction-idle", "1h", id[:8])
	if code != 0 || !strings.Contains(out, where) || !strings.Contains(out, "written to lately: merged once idle") {
		t.Errorf("compact --compaction-idle 1h: exit %d, want 0 and the reason it merged nothing:\n%s", code, out)
	}
	code, out = m.ompsync("compact", id[:8])
	if code != 0 || !strings.Contains(out, "chunks -> 1, uploaded") || !strings.Contains(out, "compacted 1 generations of 1 sessions") {
		t.Fatalf("compact right after the last upload: exit %d, want 0 and the chunks merged:\n%s", code, out)
	}
	code, out = m.ompsync("compact", id[:8])
	if code != 0 || !strings.Contains(out, where) || !strings.Contains(out, "one chunk, nothing to merge") || !strings.Contains(out, "1 generations had nothing to merge") {
		t.Errorf("compact again: exit %d, want 0 and why nothing was merged:\n%s", code, out)
	}
	if got := remoteCopy(t, openTestRepo(t, m.remote, m.s3), id, "compacty"); !bytes.Equal(got, want) {
		t.Fatalf("after compaction the remote holds %d bytes, want %d", len(got), len(want))
	}
}

// statusJSON runs status --json and returns its files by path.
func statusJSON(t *testing.T, m *machineEnv, args ...string) (int, map[string]agent.FileStatus, string) {
	t.Helper()
	cmd, out := m.start(append([]string{"status", "--json"}, args...)...)
	err := cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	files := map[string]agent.FileStatus{}
	for _, l := range strings.Split(out.String(), "\n") {
		var f agent.FileStatus
		if json.Unmarshal([]byte(l), &f) == nil && f.Path != "" {
			files[f.Path] = f
		}
	}
	return code, files, out.String()
}

// A session that appears while the remote is away is never uploaded:
// status counts its pending age from when the agent first saw it, and
// fails past --max-lag; so does the oldest-pending metric.
func TestStatusNeverUploaded(t *testing.T) {
	t.Parallel()
	srv := remotetest.StartServer(t)
	bucket := srv.NewBucket(t)
	m := newMachineEnv(t, "s3://"+bucket, s3Options(srv, "", srv.Endpoint), "laggy")
	w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 31, 1)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metrics := ln.Addr().String()
	ln.Close()
	cmd, out := m.start("agent", "--interval", "100ms", "--metrics-addr", metrics)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	r := openTestRepo(t, m.remote, s3Options(srv, "", srv.Endpoint))
	waitUntil(t, "first upload", func() bool { return remoteSize(t, r, idOf(w.files[0]), "laggy") > 0 })
	srv.Stop()

	seenBefore := time.Now()
	late, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 32, 1)
	if err != nil {
		t.Fatal(err)
	}
	rel := strings.TrimPrefix(late.files[0], m.agentDir+"/")
	var f agent.FileStatus
	waitUntil(t, "the agent records the new session", func() bool {
		_, files, _ := statusJSON(t, m, "--max-lag", "1h")
		f = files[rel]
		return f.State == "present"
	})
	if f.Uploaded != 0 || f.Pending != f.LocalSize || f.PendingAge <= 0 || f.PendingAge > time.Since(seenBefore) {
		t.Fatalf("status of a never-uploaded session: %+v, want all of it pending since the agent saw it (at most %s)\n%s", f, time.Since(seenBefore), out)
	}
	code, files, sout := statusJSON(t, m, "--max-lag", "1ns")
	if code != 1 || !strings.Contains(sout, "ompsync: 1 file(s) have bytes pending for more than 1ns") {
		t.Errorf("status --max-lag 1ns: exit %d, want 1 and the one file\n%s", code, sout)
	}
	if files[strings.TrimPrefix(w.files[0], m.agentDir+"/")].Pending != 0 {
		t.Errorf("the uploaded session is pending: %s", sout)
	}
	waitUntil(t, "the oldest-pending metric", func() bool {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "ompsync_oldest_pending_seconds "); ok {
				s, err := strconv.ParseFloat(v, 64)
				return err == nil && s > 0
			}
		}
		return false
	})
}

// status works as soon as the agent runs: during its first pass (here
// while the remote has not yet answered) every file is pending, and
// --max-lag counts from each file's last change.
func TestStatusDuringFirstPass(t *testing.T) {
	srv := remotetest.SharedServer(t)
	g := newGate(t, srv.Endpoint, func(*http.Request) bool { return true })
	m := newMachineEnv(t, "s3://"+srv.NewBucket(t), s3Options(srv, "", g.URL), "firsty")
	w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 41, 2)
	if err != nil {
		t.Fatal(err)
	}
	cmd, out := m.start("agent")
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	<-g.held
	code, files, sout := statusJSON(t, m)
	if code != 0 || len(files) != len(w.files) {
		t.Fatalf("status during the first pass: exit %d, %d files, want 0 and %d\n%s\nagent:\n%s", code, len(files), len(w.files), sout, out)
	}
	for _, p := range w.files {
		f := files[strings.TrimPrefix(p, m.agentDir+"/")]
		if f.State != agent.StateNew || f.Pending == 0 || f.Pending != f.LocalSize {
			t.Errorf("%s during the first pass: %+v, want all of it pending", p, f)
		}
	}
	if code, _, sout := statusJSON(t, m, "--max-lag", "1ns"); code != 1 {
		t.Errorf("status --max-lag 1ns during the first pass: exit %d, want 1\n%s", code, sout)
	}
	code, tout := m.ompsync("status")
	if code != 0 || !strings.Contains(tout, "not recorded yet") {
		t.Errorf("status table during the first pass: exit %d\n%s", code, tout)
	}
}

// An unreadable session with the agent passing every 200 ms: one ERROR
// line for it while the other sessions go on being uploaded, not one per
// pass.
func TestUnreadableFileSaidOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	dir, bin, cred := unprivileged(t)
	home := filepath.Join(dir, "home")
	agentDir := filepath.Join(home, ".omp", "agent")
	remoteDir := filepath.Join(home, "remote")
	w, err := newSessionWriter(filepath.Join(agentDir, "sessions"), 51, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(remoteDir, 0o700); err != nil {
		t.Fatal(err)
	}
	chownAll(t, home, cred)
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	locked, open := w.files[0], w.files[1]
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "agent", "--interval", "200ms", "--reconcile-interval", "200ms")
	cmd.Env = []string{
		"OMPSYNC_TEST_MAIN=1", "HOME=" + home, "PATH=" + os.Getenv("PATH"),
		"OMPSYNC_AGENT_DIR=" + agentDir, "OMPSYNC_STATE_DIR=" + filepath.Join(home, "state"),
		"OMPSYNC_REMOTE=file://" + remoteDir, "OMPSYNC_MACHINE=box",
	}
	runAs(cmd, cred)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	r := openTestRepo(t, "file://"+remoteDir, backend.S3Options{})
	// Twenty appends to the readable session, each waited for: twenty
	// passes at least, each of which meets the unreadable one.
	for i := range 20 {
		line := fmt.Sprintf(`{"type":"message","id":"%08x","parentId":null,"timestamp":"2026-11-30T00:00:00Z","text":"more"}`+"\n", i)
		f, err := os.OpenFile(open, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(line)
		f.Close()
		fi, _ := os.Stat(open)
		waitUntil(t, "the append uploaded", func() bool { return remoteSize(t, r, idOf(open), "box") == fi.Size() })
	}
	rel := strings.TrimPrefix(locked, agentDir+"/")
	var said []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, rel) {
			said = append(said, l)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "permission denied") {
		t.Fatalf("%d ERROR lines name the unreadable session, want 1:\n%s", len(said), out)
	}
}

// startEnv starts ompsync args with exactly the environment env.
func startEnv(t *testing.T, env []string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(ompsyncBin, args...)
	cmd.Env = env
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, out
}

// SIGHUP after changing log.level in the config file: the level changes.
func TestSIGHUPReloadsLogLevel(t *testing.T) {
	m := newMachineEnv(t, "file://"+t.TempDir(), backend.S3Options{}, "huppy")
	cfgFile := filepath.Join(m.home, "config.yaml")
	writeFile(t, cfgFile, "interval: 100ms\nlog:\n  level: info\n", 0o600)
	w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 61, 1)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range m.environ() {
		if !strings.HasPrefix(kv, "OMPSYNC_LOG_LEVEL=") {
			env = append(env, kv)
		}
	}
	cmd, out := startEnv(t, env, "agent", "--config", cfgFile)
	r := openTestRepo(t, m.remote, m.s3)
	uploaded := func() {
		t.Helper()
		if err := w.step(); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(w.files[0])
		want := int64(bytes.LastIndexByte(b, '\n') + 1)
		waitUntil(t, "the append uploaded", func() bool { return remoteSize(t, r, idOf(w.files[0]), "huppy") == want })
	}
	uploaded()
	if strings.Contains(out.String(), "level=DEBUG") {
		t.Fatalf("debug lines at log.level info:\n%s", out)
	}
	writeFile(t, cfgFile, "interval: 100ms\nlog:\n  level: debug\n", 0o600)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the reload", func() bool { return strings.Contains(out.String(), "log_level=debug") })
	uploaded()
	waitUntil(t, "a debug line", func() bool { return strings.Contains(out.String(), "level=DEBUG msg=uploaded") })

	writeFile(t, cfgFile, "interval: 100ms\nlog:\n  level: warn\n", 0o600)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the reload", func() bool { return strings.Contains(out.String(), "log_level=warn") })
	n := len(out.String())
	uploaded()
	if after := out.String()[n:]; strings.Contains(after, "level=DEBUG") || strings.Contains(after, "level=INFO") {
		t.Fatalf("debug or info lines after log.level warn:\n%s", after)
	}
}

// Without a systemd user manager (no bus for this login, as under su or
// in a container): service status exits 1 saying so, and uninstall still
// removes the unit file, says what it could not do and exits 1.
func TestServiceWithoutUserManager(t *testing.T) {
	for _, tc := range []struct {
		name, path, hint string
	}{
		{"no bus", os.Getenv("PATH"), "there is no systemd user manager for this login"},
		{"no systemctl", t.TempDir(), "this system does not seem to run systemd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath("systemctl"); err != nil && tc.name == "no bus" {
				t.Skip("no systemctl on PATH (.ci/run installs systemd)")
			}
			home := t.TempDir()
			runtime := t.TempDir() // no bus socket in it
			cfg := filepath.Join(home, ".config", "ompsync", "config.yaml")
			writeFile(t, cfg, "remote: file://"+filepath.Join(home, "remote")+"\n", 0o600)
			env := []string{"OMPSYNC_TEST_MAIN=1", "HOME=" + home, "PATH=" + tc.path, "USER=alice",
				"XDG_RUNTIME_DIR=" + runtime, "DBUS_SESSION_BUS_ADDRESS=unix:path=" + filepath.Join(runtime, "bus")}
			code, unit := runEnv(t, env, "service", "unit", "--systemd")
			if code != 0 {
				t.Fatalf("service unit: exit %d\n%s", code, unit)
			}
			unitFile := filepath.Join(home, ".config", "systemd", "user", "ompsync.service")
			var body []string
			for _, l := range strings.SplitAfter(unit, "\n") {
				if !strings.HasPrefix(l, "ompsync: warning:") {
					body = append(body, l)
				}
			}
			writeFile(t, unitFile, strings.Join(body, ""), 0o644)

			code, out := runEnv(t, env, "service", "status")
			if code != 1 || !strings.Contains(errorLine(t, out), tc.hint) {
				t.Errorf("service status: exit %d, want 1 and %q\n%s", code, tc.hint, out)
			}
			code, out = runEnv(t, env, "service", "uninstall")
			if code != 1 || !strings.Contains(out, "Removed "+unitFile) || !strings.Contains(errorLine(t, out), "the unit file is removed, but systemd could not disable and stop the service") {
				t.Errorf("service uninstall: exit %d, want 1, the file removed and why systemd was not told\n%s", code, out)
			}
			if _, err := os.Stat(unitFile); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the unit file is still there: %v", err)
			}
		})
	}
}

// Ctrl-C during a restore: it says interrupted, with what was and was not
// restored, and exits 130; what it wrote is whole.
func TestRestoreInterrupted(t *testing.T) {
	srv := remotetest.SharedServer(t)
	bucket := srv.NewBucket(t)
	m := newMachineEnv(t, "s3://"+bucket, s3Options(srv, "", srv.Endpoint), "stoppy")
	w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 81, 3)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		w.step()
	}
	if code, out := m.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("agent --once: exit %d\n%s", code, out)
	}
	slow := idOf(w.files[2]) // its chunks are held: the restore waits for it
	g := newGate(t, srv.Endpoint, func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/"+slow+"/") && !r.URL.Query().Has("list-type")
	})
	reader := newMachineEnv(t, "s3://"+bucket, s3Options(srv, "", g.URL), "reader")
	to := filepath.Join(t.TempDir(), "restored")
	cmd, out := reader.start("restore", "--all", "--to", to)
	<-g.held
	restored := func(p string) bool {
		_, err := os.Stat(filepath.Join(to, strings.TrimPrefix(p, m.agentDir+"/")))
		return err == nil
	}
	waitUntil(t, "the other sessions restored", func() bool { return restored(w.files[0]) && restored(w.files[1]) })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("restore after Ctrl-C: %v, want exit 130\n%s", err, out)
	}
	want := "ompsync: interrupted: 2 of 3 sessions restored or already up to date; 1 not restored (" + slow + "); what was written is complete: run the same command again to finish"
	if line := errorLine(t, out.String()); line != want {
		t.Errorf("error line\n%q, want\n%q", line, want)
	}
	if strings.Contains(out.String(), "context canceled") || strings.Contains(out.String(), "refused") {
		t.Errorf("the interruption shows as a failure:\n%s", out)
	}
	// The unfinished session is named once, in the error line.
	if n := strings.Count(out.String(), slow); n != 1 {
		t.Errorf("the unfinished session is named %d times:\n%s", n, out)
	}
	for _, p := range w.files[:2] {
		got, _ := os.ReadFile(filepath.Join(to, strings.TrimPrefix(p, m.agentDir+"/")))
		want, _ := os.ReadFile(p)
		if !bytes.Equal(got, want) {
			t.Errorf("%s restored as %d bytes, want %d", filepath.Base(p), len(got), len(want))
		}
	}
	if restored(w.files[2]) {
		t.Errorf("the interrupted session was written")
	}
	// Run again: it finishes (--force: the sessions were written seconds
	// ago, as omp would).
	g.release()
	if code, out := reader.ompsync("restore", "--all", "--force", "--to", to); code != 0 {
		t.Fatalf("restore again: exit %d\n%s", code, out)
	}
}

// Exit codes are one scheme for every command: 0 done and safe, 1 failed
// or not safe, 2 usage, 130 interrupted (here verify and agent --once,
// stopped while they wait for the remote); the agent itself exits 0 on a
// stop signal once it has flushed (TestSIGTERMFlushes).
func TestExitCodes(t *testing.T) {
	t.Parallel()
	srv := remotetest.SharedServer(t)
	bucket := srv.NewBucket(t)
	m := newMachineEnv(t, "s3://"+bucket, s3Options(srv, "", srv.Endpoint), "codes")
	if _, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 91, 2); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"agent", "--once"}, 0},
		{[]string{"verify"}, 0},
		{[]string{"verify", "--bogus"}, 2},
		{[]string{"restore"}, 2},
		{[]string{"restore", "ffffffff"}, 1},
	} {
		if code, out := m.ompsync(tc.args...); code != tc.code {
			t.Errorf("%s: exit %d, want %d\n%s", tc.args, code, tc.code, out)
		}
	}
	for _, args := range [][]string{{"verify"}, {"agent", "--once"}} {
		g := newGate(t, srv.Endpoint, func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/session/") })
		o := *m
		o.s3 = s3Options(srv, "", g.URL)
		if args[0] == "agent" {
			writeFile(t, filepath.Join(o.agentDir, "sessions", "-w", "2026-11-30T00-00-00-000Z_019a0000-0000-7000-8000-00000000c0de.jsonl"),
				titleSlotLine("")+`{"type":"session","version":3,"id":"019a0000-0000-7000-8000-00000000c0de","timestamp":"2026-11-30T00:00:00Z","cwd":"/w"}`+"\n", 0o600)
		}
		cmd, out := o.start(args...)
		<-g.held
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("%s after Ctrl-C: %v, want exit 130\n%s", args, err, out)
			continue
		}
		if line := errorLine(t, out.String()); !strings.HasPrefix(line, "ompsync: interrupted") {
			t.Errorf("%s after Ctrl-C: error line %q", args, line)
		}
	}
}

// Retries are visible at debug: one line each, naming the operation and
// the attempt; the run still succeeds.
func TestRetriesAtDebug(t *testing.T) {
	srv := remotetest.SharedServer(t)
	p, err := faultproxy.Start(srv.Endpoint, faultproxy.Config{SlowDown: 0.3, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m := newMachineEnv(t, "s3://"+srv.NewBucket(t), s3Options(srv, "", p.URL), "retry")
	if _, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 93, 3); err != nil {
		t.Fatal(err)
	}
	code, out := m.ompsync("agent", "--once")
	if code != 0 {
		t.Fatalf("agent --once through 503s: exit %d\n%s", code, out)
	}
	if p.Count(faultproxy.SlowDown) == 0 || !strings.Contains(out, "level=DEBUG msg=retrying") || !strings.Contains(out, "attempt=1") {
		t.Errorf("%d 503s, and the log shows no retry:\n%s", p.Count(faultproxy.SlowDown), out)
	}
}

// -q leaves only errors: a pass that works prints nothing, one that fails
// its one error line; -v stays --version.
func TestQuiet(t *testing.T) {
	m := newMachineEnv(t, "file://"+t.TempDir(), backend.S3Options{}, "hush")
	if _, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 95, 2); err != nil {
		t.Fatal(err)
	}
	if code, out := m.ompsync("-q", "agent", "--once"); code != 0 || out != "" {
		t.Errorf("-q agent --once: exit %d, output %q; want 0 and nothing", code, out)
	}
	if code, out := m.ompsync("--quiet", "restore", "--all", "--to", filepath.Join(t.TempDir(), "r")); code != 0 || out != "" {
		t.Errorf("--quiet restore: exit %d, output %q; want 0 and nothing", code, out)
	}
	code, out := m.ompsync("-q", "restore", "ffffffff")
	if code != 1 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "ompsync: ") {
		t.Errorf("-q restore of an unknown id: exit %d, output %q; want 1 and one error line", code, out)
	}
	if code, out := m.ompsync("-v"); code != 0 || !strings.HasPrefix(out, "ompsync ") {
		t.Errorf("-v: exit %d, %q; want the version", code, out)
	}
}

// A restore killed with SIGKILL mid-session leaves no session file half
// written, only its hidden temp file, which nothing backs up or shows; the
// same restore run again finishes byte for byte and leaves that file
// alone while it is young (another restore may be writing it), and a
// restore once it is a day old removes it.
func TestRestoreKilledLeavesNothingHalfWritten(t *testing.T) {
	t.Parallel()
	srv := remotetest.SharedServer(t)
	bucket := srv.NewBucket(t)
	m := newMachineEnv(t, "s3://"+bucket, s3Options(srv, "", srv.Endpoint), "killy")
	w, err := newSessionWriter(filepath.Join(m.agentDir, "sessions"), 83, 3)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		w.step()
	}
	// The big session goes up in two chunks, the first over the 1 MiB a
	// restore keeps in memory: it is streamed to a temp file while the
	// second is held.
	big := w.files[2]
	appendLine := func(n int) {
		line := `{"type":"message","id":"` + fmt.Sprintf("%08x", n) + `","message":{"role":"user","content":"` + strings.Repeat("x", n) + `"}}` + "\n"
		f, err := os.OpenFile(big, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(line); err != nil {
			t.Fatal(err)
		}
	}
	appendLine(1500 << 10)
	if code, out := m.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("agent --once: exit %d\n%s", code, out)
	}
	appendLine(10 << 10)
	if code, out := m.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("agent --once: exit %d\n%s", code, out)
	}
	bigID := idOf(big)
	laterChunk := regexp.MustCompile(`/session/[0-9a-f]+/0*[1-9a-f][0-9a-f]*-[0-9a-f]+$`) // a chunk that starts past 0
	g := newGate(t, srv.Endpoint, func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/"+bigID+"/") && laterChunk.MatchString(r.URL.Path)
	})
	reader := newMachineEnv(t, "s3://"+bucket, s3Options(srv, "", g.URL), "reader")
	to := filepath.Join(t.TempDir(), "restored")
	temps := func() []string {
		found, _ := filepath.Glob(filepath.Join(to, ".ompsync-*.tmp"))
		more, _ := filepath.Glob(filepath.Join(to, "sessions", "*", ".ompsync-*.tmp"))
		return append(found, more...)
	}
	cmd, out := reader.start("restore", "--all", "--to", to)
	select {
	case <-g.held:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the restore never asked for the big session's second chunk\n%s", out)
	}
	waitUntil(t, "the big session's first chunk in a temp file", func() bool { return len(temps()) > 0 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	left := temps()
	if len(left) == 0 {
		t.Fatalf("no temp file left by the killed restore; the test did not kill it mid-session\n%s", out)
	}
	dest := func(p string) string { return filepath.Join(to, strings.TrimPrefix(p, m.agentDir+"/")) }
	if _, err := os.Stat(dest(big)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the session being fetched when the restore was killed is there: %v", err)
	}
	for _, p := range w.files[:2] {
		if got, err := os.ReadFile(dest(p)); err == nil {
			if want, _ := os.ReadFile(p); !bytes.Equal(got, want) {
				t.Errorf("%s: %d bytes, want %d: half written", filepath.Base(p), len(got), len(want))
			}
		}
	}

	g.release()
	same := func(what string) {
		t.Helper()
		for _, p := range w.files {
			got, _ := os.ReadFile(dest(p))
			if want, _ := os.ReadFile(p); !bytes.Equal(got, want) {
				t.Errorf("%s: %s restored as %d bytes, want %d", what, filepath.Base(p), len(got), len(want))
			}
		}
	}
	if code, out := reader.ompsync("restore", "--all", "--force", "--to", to); code != 0 {
		t.Fatalf("restore again: exit %d\n%s", code, out)
	}
	same("restore again")
	for _, p := range left {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("a young temp file was removed (it may be another restore's): %v", err)
		}
	}
	old := time.Now().Add(-25 * time.Hour)
	for _, p := range left {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// With --json: standard output stays one object per session, the
	// removal is said on standard error.
	later := exec.Command(ompsyncBin, "restore", "--all", "--force", "--json", "--to", to)
	later.Env = reader.environ()
	var stdout, stderr bytes.Buffer
	later.Stdout, later.Stderr = &stdout, &stderr
	if err := later.Run(); err != nil {
		t.Fatalf("restore a day later: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if now := temps(); len(now) > 0 {
		t.Errorf("temp files a day old still there: %v\n%s", now, stderr.String())
	}
	if !strings.Contains(stderr.String(), "removed a temp file an interrupted restore left: "+left[0]) {
		t.Errorf("the removal is not said on standard error:\n%s", stderr.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("--json: a line of standard output is not JSON: %q", line)
		}
	}
	same("restore a day later")
}

// A session deleted, recorded as deleted, and restored comes back with its
// old mtime. Until the agent records it again, status lists it as not
// recorded yet, pending since the restore put it there, not since its mtime
// of days ago: no alarm, exit 0. Past --max-lag, the alarm is true again.
func TestStatusAfterRestoreOfDeletedSession(t *testing.T) {
	t.Parallel()
	m := newMachineEnv(t, "file://"+filepath.Join(t.TempDir(), "remote"), backend.S3Options{}, "laptop")
	const id = "01a113d2-be76-73c7-986b-d3ac6e3fbb83"
	rel := "sessions/-work/2026-10-07T00-45-40-854Z_" + id + ".jsonl"
	p := filepath.Join(m.agentDir, filepath.FromSlash(rel))
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "corpus", "omp-v18-title-slot-skill-toolcalls_01a113d2.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, string(data), 0o600)
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	for _, step := range [][]string{{"agent", "--once"}, {"rm"}, {"agent", "--once"}, {"restore", id}} {
		if step[0] == "rm" {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if code, out := m.ompsync(step...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", step, code, out)
		}
	}
	if fi, err := os.Stat(p); err != nil || fi.ModTime().Sub(old).Abs() > time.Second {
		t.Fatalf("restored file: %v, mtime %v, want its old mtime %v", err, fi.ModTime(), old)
	}
	code, files, out := statusJSON(t, m)
	if f := files[rel]; code != 0 || f.State != agent.StateNew || f.PendingAge > time.Minute {
		t.Fatalf("status after the restore: exit %d, %+v; want exit 0, not recorded yet, pending since the restore\n%s", code, f, out)
	}
	if code, _, out := statusJSON(t, m, "--max-lag", "1ns"); code != 1 {
		t.Errorf("status --max-lag 1ns before the agent recorded the restored file: exit %d, want 1\n%s", code, out)
	}
	if code, out := m.ompsync("agent", "--once"); code != 0 {
		t.Fatalf("agent --once after the restore: exit %d\n%s", code, out)
	}
	if code, files, out := statusJSON(t, m, "--max-lag", "1ns"); code != 0 || files[rel].Uploaded != int64(len(data)) {
		t.Errorf("status once the agent recorded it: exit %d, %+v\n%s", code, files[rel], out)
	}
}

// An s3.endpoint written https:// for a server that speaks plain HTTP is
// named as such, with both clients, not as Go's "server gave HTTP
// response to HTTPS client".
func TestEndpointSchemeMismatch(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	for _, client := range []string{"aws", "minio"} {
		env, home := newEnv(t)
		env["OMPSYNC_AGENT_DIR"] = filepath.Join(home, "agent")
		env["OMPSYNC_REMOTE"] = "s3://bucket"
		env["OMPSYNC_S3_ENDPOINT"] = strings.Replace(srv.URL, "http://", "https://", 1)
		env["OMPSYNC_S3_CLIENT"] = client
		env["OMPSYNC_S3_ACCESS_KEY_ID"], env["OMPSYNC_S3_SECRET_ACCESS_KEY"] = "key", "secret1234"
		r := runWith(t, env, "ls")
		if r.code != 1 || !strings.Contains(oneErrorLine(t, r), "answers in plain HTTP, not HTTPS: write s3.endpoint as http://") {
			t.Errorf("%s client, https:// endpoint of a plain HTTP server: exit %d, %q", client, r.code, r.stderr)
		}
	}
}
