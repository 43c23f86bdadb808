//go:build chaos

package chaos

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/faultproxy"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/internal/testkit/repotest"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/session"
)

// chaosFaults is the fault mix between the agents and the server: about
// one request in ten fails, in every way the proxy knows. Delays stay
// under the drivers' response timeout so a run is not all waiting.
func chaosFaults(seed uint64) faultproxy.Config {
	return faultproxy.Config{
		InternalError: 0.015, SlowDown: 0.015, TooMany: 0.015, ResetRequest: 0.015, ResetResponse: 0.015,
		Truncate: 0.01, Delay: 0.01, DropPut: 0.003, DelayFor: 1500 * time.Millisecond, Seed: seed,
	}
}

// world is the server, the fault proxy and the machines of a scenario.
type world struct {
	t        *testing.T
	srv      *remotetest.Server
	bucket   string
	proxy    *faultproxy.Proxy
	machines []*machine
	st       *stats
	seed     uint64
}

func newWorld(t *testing.T, names []string, sync bool) *world {
	t.Helper()
	w := &world{t: t, srv: remotetest.StartServer(t), st: newStats(), seed: seed(t)}
	w.bucket = w.srv.NewBucket(t)
	var err error
	if w.proxy, err = faultproxy.Start(w.srv.Endpoint, chaosFaults(w.seed)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.proxy.Close() })
	clients := backend.Clients("s3")
	for i, n := range names {
		w.machines = append(w.machines, newMachine(t, i+1, n, clients[i%2], w.proxy.URL, w.bucket, w.srv, newRand(w.seed, uint64(10+i)), w.st, sync))
	}
	return w
}

// chaos runs the omps, the killed-and-restarted agents and the disk
// filler for d, then stops them all (agents with SIGTERM).
func (w *world) chaos(d time.Duration, pull bool) {
	w.t.Helper()
	stop := make(chan struct{})
	errs := make(chan error, len(w.machines))
	var writers, agents, others sync.WaitGroup
	for i, m := range w.machines {
		writers.Go(func() { m.omp.run(stop, errs) })
		agents.Go(func() { m.supervise(agentArgs(pull), true, newRand(w.seed, uint64(100+i)), w.st, stop) })
		if m.small {
			others.Go(func() { fillDisk(m.stateDir, newRand(w.seed, uint64(200+i)), w.st, stop) })
		}
		if pull {
			others.Go(func() { m.watchSizes(w.st, stop) })
		}
	}
	select {
	case <-time.After(d):
	case err := <-errs:
		failf(w.t, "%v", err)
	}
	close(stop)
	writers.Wait()
	agents.Wait()
	others.Wait()
	w.st.Faults = w.proxy.Counts()
	if err := w.proxy.SetConfig(faultproxy.Config{}); err != nil { // the network heals
		w.t.Fatal(err)
	}
}

// direct is a repository client on the server itself, past the proxy.
func (w *world) direct() *repo.Repo {
	w.t.Helper()
	c, err := backend.Open(context.Background(), "s3://"+w.bucket, backend.S3Options{
		Endpoint: w.srv.Endpoint, Region: "us-east-1", PathStyle: true, AccessKeyID: w.srv.AccessKey, SecretAccessKey: w.srv.SecretKey,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return repo.New(c, repo.NewZstd())
}

// newest reassembles the newest generation of a stream of machine, or nil.
func newest(t *testing.T, r *repo.Repo, id, machine, stream string) []byte {
	t.Helper()
	invs, err := r.Inventory(context.Background(), id, machine)
	if err != nil {
		failf(t, "session %s: %v", id, err)
		return nil
	}
	for _, inv := range invs {
		if inv.Stream.Name != stream || inv.Newest() == nil {
			continue
		}
		as, err := repotest.ReadGeneration(context.Background(), r, inv.Stream, inv.Newest(), 1<<40)
		if err != nil {
			failf(t, "session %s stream %s: %v", id, stream, err)
			return nil
		}
		return as.Data
	}
	return nil
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		failf(t, "%v", err)
	}
	return b
}

func diffAt(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		failf(t, "%s: %d bytes, want %d; first difference at byte %d", what, len(got), len(want), diffAt(got, want))
	}
}

// settle runs `agent --once` until a run exits 0 twice in a row (the first
// may find objects the remote lost and the next upload them again), within
// a few runs.
func (m *machine) settle(env ...string) {
	m.t.Helper()
	ok := 0
	for i := 0; i < 6 && ok < 2; i++ {
		if code, out := m.ompsync(env, "agent", "--once"); code == 0 {
			ok++
		} else {
			ok = 0
			m.t.Logf("%s: agent --once exit %d:\n%s", m.name, code, lastLines(out, 5))
		}
	}
	if ok < 2 {
		failf(m.t, "%s: agent --once did not succeed twice in a row within six runs; see %s", m.name, filepath.Join(m.home, "agent.log"))
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// secretUploaded reports whether any object in the bucket, as stored or
// opened, holds needle.
func (w *world) secretUploaded(needle string) bool {
	found := false
	_ = filepath.WalkDir(filepath.Join(w.srv.Dir, w.bucket), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		if plain, err := repo.NewZstd().Open(b, 1<<30); err == nil {
			b = append(b, plain...)
		}
		if bytes.Contains(b, []byte(needle)) {
			failf(w.t, "%s holds bytes that must never be uploaded", p)
			found = true
		}
		return nil
	})
	return found
}

// whereIs says where a session went instead: the restored files naming
// its id, and what each machine's catalog says of it.
func whereIs(t *testing.T, r *repo.Repo, to, id string) string {
	var found []string
	_ = filepath.WalkDir(to, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(p, id) {
			found = append(found, strings.TrimPrefix(p, to+"/"))
		}
		return nil
	})
	var cat []string
	ms, err := r.Machines(context.Background())
	if err != nil {
		return err.Error()
	}
	for _, m := range ms {
		c, err := r.GetCatalog(context.Background(), m)
		if err != nil {
			cat = append(cat, m+": "+err.Error())
			continue
		}
		for _, e := range c.Sessions {
			if e.ID == id {
				cat = append(cat, fmt.Sprintf("%s: %s %s size %d generation %s", m, e.State, e.Path, e.Size, e.Generation))
			}
		}
	}
	return fmt.Sprintf("restored as %q; catalogs: %q", found, cat)
}

// One machine: omp works while its agent is killed, the network fails and
// the state disk fills. Afterwards every live and archived session, every
// artifact and every blob is on the remote and restores byte for byte;
// deleted sessions keep only lines omp wrote; the local files are exactly
// what omp wrote; nothing from outside the agent dir or from credential
// files was uploaded.
func TestChaosOneMachine(t *testing.T) {
	t.Parallel() // its own world and remote: it runs beside TestChaosSync
	d := duration(t)
	w := newWorld(t, []string{"chaotic"}, false)
	m := w.machines[0]
	defer func() { w.st.report(t, "one machine", d) }()
	w.chaos(d, false)
	m.settle()

	r := w.direct()
	o := m.omp
	t.Logf("puts the proxy acknowledged and dropped: %q", w.proxy.Dropped())
	checked := 0
	for _, s := range o.sessions {
		switch s.state {
		case "live":
			sameBytes(t, s.rel()+" on disk", readFile(t, filepath.Join(m.agentDir, s.rel())), s.data)
			sameBytes(t, s.rel()+" on the remote", newest(t, r, s.id, m.name, repo.SessionStream), s.data)
			for rel, data := range s.artifacts {
				sameBytes(t, s.artifactDir()+"/"+rel+" on the remote", newest(t, r, s.id, m.name, repo.ArtifactStream(rel)), data)
			}
		case "archived":
			zr, err := gzip.NewReader(bytes.NewReader(readFile(t, filepath.Join(m.agentDir, s.archiveRel()))))
			if err != nil {
				failf(t, "%s: %v", s.archiveRel(), err)
				continue
			}
			plain, _ := io.ReadAll(zr)
			sameBytes(t, s.archiveRel()+" on disk", plain, s.data)
			sameBytes(t, s.archiveRel()+" on the remote", newest(t, r, s.id, m.name, repo.SessionStream), s.data)
		case "deleted":
			// Whatever was backed up before the delete holds only lines
			// omp wrote.
			if got := newest(t, r, s.id, m.name, repo.SessionStream); len(got) > session.SlotLen(got) {
				for _, l := range bytes.Split(bytes.TrimSuffix(got[session.SlotLen(got):], []byte("\n")), []byte("\n")) {
					if !s.lines[string(l)] {
						failf(t, "deleted session %s: the remote holds a line omp never wrote: %.80q", s.id, l)
					}
				}
			}
		}
		checked++
	}
	for name, data := range o.blobs {
		got, err := r.GetBlob(context.Background(), name, 1<<20)
		if err != nil {
			failf(t, "blob %s: %v", name, err)
			continue
		}
		sameBytes(t, "blob "+name, got, data)
	}

	// The restore command brings it all back into an empty folder.
	to := filepath.Join(t.TempDir(), "restored")
	if code, out := m.ompsync([]string{"OMPSYNC_S3_ENDPOINT=" + w.srv.Endpoint}, "restore", "--all", "--to", to); code != 0 {
		failf(t, "restore --all: exit %d:\n%s", code, out)
	}
	for _, s := range o.sessions {
		if s.state == "deleted" {
			continue
		}
		if _, err := os.Stat(filepath.Join(to, s.rel())); err != nil {
			failf(t, "%s session %s not restored at %s; %s", s.state, s.id, s.rel(), whereIs(t, r, to, s.id))
			continue
		}
		sameBytes(t, "restored "+s.rel(), readFile(t, filepath.Join(to, s.rel())), s.data)
		if s.state != "live" {
			continue
		}
		for rel, data := range s.artifacts {
			sameBytes(t, "restored "+s.artifactDir()+"/"+rel, readFile(t, filepath.Join(to, s.artifactDir(), rel)), data)
		}
	}
	for name, data := range o.blobs {
		sameBytes(t, "restored blob "+name, readFile(t, filepath.Join(to, "blobs", name)), data)
	}
	if w.secretUploaded(o.secret) {
		failf(t, "a credential file, a sidecar, a non-session file or a file outside the agent dir was uploaded")
	}
	t.Logf("checked %d sessions (%d live), %d blobs", checked, len(o.live()), len(o.blobs))
}

// Several machines sync through the faulty proxy with `agent --pull` while
// each one's omp works on its own sessions and on sessions it pulled, and
// agents are killed. When the chaos stops and the network heals, every
// machine converges on the same bytes for every session, holding every
// line any machine wrote, once, under the newest title; no local file ever
// shrank; each machine's remote copy is its local file.
func TestChaosSync(t *testing.T) {
	t.Parallel()
	d := duration(t) / 2
	for _, names := range [][]string{{"laptop", "desk"}, {"laptop", "desk", "box"}} {
		t.Run(fmt.Sprintf("%d machines", len(names)), func(t *testing.T) {
			w := newWorld(t, names, true)
			defer func() { w.st.report(t, fmt.Sprintf("sync, %d machines", len(names)), d) }()
			w.chaos(d, true)

			// Calm: the agents run on, unharmed, until the machines agree.
			stop := make(chan struct{})
			var agents, watch sync.WaitGroup
			for i, m := range w.machines {
				agents.Go(func() { m.supervise(agentArgs(true), false, newRand(w.seed, uint64(300+i)), w.st, stop) })
				watch.Go(func() { m.watchSizes(w.st, stop) })
			}
			converged := false
			var id, why string
			for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
				if id, why = w.divergence(); why == "" {
					converged = true
					break
				}
			}
			close(stop)
			agents.Wait()
			watch.Wait()
			if !converged {
				failf(t, "machines did not converge within 3 minutes of calm: %s\n%s", why, w.logsAbout(id))
			}
			for _, s := range w.st.Shrinks {
				failf(t, "a local file shrank: %s", s)
			}
			// Stopped with SIGTERM, each agent flushed: its remote copy
			// is its file.
			r := w.direct()
			t.Logf("puts the proxy acknowledged and dropped: %q", w.proxy.Dropped())
			compared := 0
			for _, m := range w.machines {
				for id := range w.ids() {
					p := findSession(m.agentDir, id)
					if p == "" {
						continue
					}
					sameBytes(t, m.name+" "+id+" on the remote", newest(t, r, id, m.name, repo.SessionStream), readFile(t, p))
					compared++
				}
				if w.secretUploaded(m.omp.secret) {
					failf(t, "%s: a file that must not be uploaded was", m.name)
				}
			}
			t.Logf("%d sessions identical on every machine; %d copies compared with their remote copy", len(w.ids()), compared)
		})
	}
}

// ids is every session any omp created or resumed.
func (w *world) ids() map[string]bool {
	out := map[string]bool{}
	for _, m := range w.machines {
		m.omp.mu.Lock()
		for id := range m.omp.sessions {
			out[id] = true
		}
		m.omp.mu.Unlock()
	}
	return out
}

func findSession(agentDir, id string) string {
	m, _ := filepath.Glob(filepath.Join(agentDir, "sessions", "*", "*_"+id+".jsonl"))
	if len(m) == 0 {
		return ""
	}
	return m[0]
}

// divergence says which session the machines do not agree on yet and why,
// or "" when every session is the same bytes everywhere, holds every line
// written to it anywhere, no entry twice, under the newest title slot.
func (w *world) divergence() (id, why string) {
	for id := range w.ids() {
		var first []byte
		lines := map[string]bool{}
		var slot []byte
		var slotAt time.Time
		for _, m := range w.machines {
			m.omp.mu.Lock()
			if s := m.omp.sessions[id]; s != nil {
				for l := range s.lines {
					lines[l] = true
				}
				if s.slot != nil && s.slotAt.After(slotAt) {
					slot, slotAt = s.slot, s.slotAt
				}
			}
			m.omp.mu.Unlock()
		}
		for i, m := range w.machines {
			p := findSession(m.agentDir, id)
			if p == "" {
				return id, fmt.Sprintf("%s has no session %s", m.name, id)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return id, err.Error()
			}
			if i == 0 {
				first = b
			} else if !bytes.Equal(b, first) {
				return id, fmt.Sprintf("session %s: %s and %s differ at byte %d", id, w.machines[0].name, m.name, diffAt(b, first))
			}
		}
		if len(first) < 256 {
			return id, fmt.Sprintf("session %s is %d bytes", id, len(first))
		}
		if slot != nil && !bytes.Equal(first[:256], slot) {
			return id, fmt.Sprintf("session %s: title slot %.60q is not the newest written %.60q", id, first[:256], slot)
		}
		have := map[string]bool{}
		seenIDs := map[string]bool{}
		for _, l := range bytes.Split(bytes.TrimSuffix(first[256:], []byte("\n")), []byte("\n")) {
			have[string(l)] = true
			var e struct {
				ID        string `json:"id"`
				Timestamp string `json:"timestamp"`
			}
			if json.Unmarshal(l, &e) == nil && e.ID != "" {
				if seenIDs[e.ID+e.Timestamp] {
					return id, fmt.Sprintf("session %s holds entry %s twice", id, e.ID)
				}
				seenIDs[e.ID+e.Timestamp] = true
			}
		}
		for l := range lines {
			if !have[l] {
				return id, fmt.Sprintf("session %s lacks a line written to it: %.80q", id, l)
			}
		}
	}
	return "", ""
}

// logsAbout is the last lines each machine's agents logged about a session,
// for a check that failed on it.
func (w *world) logsAbout(id string) string {
	var b strings.Builder
	for _, m := range w.machines {
		log, err := os.ReadFile(filepath.Join(m.home, "agent.log"))
		if err != nil {
			fmt.Fprintf(&b, "        %s: %v\n", m.name, err)
			continue
		}
		var about []string
		for _, l := range strings.Split(string(log), "\n") {
			if strings.Contains(l, id) {
				about = append(about, l)
			}
		}
		about = about[max(0, len(about)-15):]
		fmt.Fprintf(&b, "        %s's agents, the last %d lines about %s:\n", m.name, len(about), id)
		for _, l := range about {
			fmt.Fprintf(&b, "          %.400s\n", l)
		}
	}
	return b.String()
}
