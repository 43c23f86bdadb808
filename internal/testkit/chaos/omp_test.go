//go:build chaos

package chaos

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// omp imitates what omp does to its agent dir (docs/omp-sessions.md):
// sessions appear whole by a temp-file rename, grow by lines appended with
// O_APPEND (sometimes in several writes, so a reader sees half a line), get
// their 256-byte title slot rewritten in place, are rewritten whole through
// a temp file, moved to another cwd folder, archived with gzip, deleted;
// artifact folders grow beside them and blobs appear. It keeps a model of
// what every file must hold. It also plays a careless user: malformed
// lines, symlinks out of the agent dir, sidecar and credential files.
type omp struct {
	dir     string // the agent dir
	machine int    // makes ids unique between machines
	rng     *lockedRand
	st      *stats
	// sync: several machines share the sessions, so the agent may merge
	// into the files; the model then tracks lines, not bytes, and only
	// the operations a synced session sees are made (no rewrites, moves,
	// archives or deletes).
	sync bool
	// outside holds a file out of the agent dir whose bytes must never be
	// uploaded; secret is in it (and in auth.json).
	outside, secret string

	mu       sync.Mutex
	sessions map[string]*sess // by id
	blobs    map[string][]byte
	n        int // entries written, for unique ids
}

// sess is the model of one session.
type sess struct {
	id, cwd, name string
	state         string // live, archived, deleted
	data          []byte // what the file holds (not kept in sync mode)
	// lines is every line ever written, without its newline.
	lines map[string]bool
	// slot is the newest title slot written (sync mode checks it wins).
	slot      []byte
	slotAt    time.Time
	last      string            // id of the newest entry, the next parent
	artifacts map[string][]byte // path inside the artifact folder -> bytes
}

func (s *sess) rel() string { return "sessions/" + s.cwd + "/" + s.name }

// artifactDir is the session's artifact folder, relative to the agent dir.
func (s *sess) artifactDir() string {
	return "sessions/" + s.cwd + "/" + strings.TrimSuffix(s.name, ".jsonl")
}

func (s *sess) archiveRel() string { return "archive/sessions/" + s.cwd + "/" + s.name + ".gz" }

var cwds = []string{"-work", "-work-api", "--srv-data--", "-proj-ünï", "-.omp-work"}

func newOmp(dir string, machine int, rng *lockedRand, st *stats, sync bool, outside string) *omp {
	return &omp{
		dir: dir, machine: machine, rng: rng, st: st, sync: sync, outside: outside,
		secret:   fmt.Sprintf("CHAOS-SECRET-%d-never-uploaded", machine),
		sessions: map[string]*sess{}, blobs: map[string][]byte{},
	}
}

func (o *omp) path(rel string) string { return filepath.Join(o.dir, filepath.FromSlash(rel)) }

// writeRename writes a file the way omp does: a hidden temp file renamed
// into place.
func (o *omp) writeRename(rel string, data []byte) error {
	p := o.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(p), fmt.Sprintf(".%s.%d.tmp", filepath.Base(p), o.rng.IntN(1000)))
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// appendSplit appends data with O_APPEND, sometimes in several writes a
// few milliseconds apart.
func (o *omp) appendSplit(rel string, data []byte) error {
	f, err := os.OpenFile(o.path(rel), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for len(data) > 0 {
		n := len(data)
		if o.rng.IntN(4) == 0 && n > 1 {
			n = 1 + o.rng.IntN(n-1)
		}
		if _, err := f.Write(data[:n]); err != nil {
			return err
		}
		data = data[n:]
		if len(data) > 0 {
			time.Sleep(o.rng.between(time.Millisecond, 8*time.Millisecond))
		}
	}
	return nil
}

func titleSlot(title string, at time.Time) []byte {
	s := fmt.Sprintf(`{"type":"title","v":1,"title":%q,"updatedAt":%q,"pad":"`, title, at.UTC().Format("2006-01-02T15:04:05.000000000Z"))
	return []byte(s + strings.Repeat(" ", 256-len(s)-3) + "\"}\n")
}

// text returns printable text of about n bytes, with some non-ASCII.
func (o *omp) text(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz     0123456789.,;:-_ü名🙂\"\\/"
	runes := []rune(alphabet)
	var b strings.Builder
	for b.Len() < n {
		b.WriteRune(runes[o.rng.IntN(len(runes))])
	}
	return b.String()
}

func (o *omp) lineSize() int {
	switch r := o.rng.IntN(100); {
	case r < 80:
		return 40 + o.rng.IntN(500)
	case r < 98:
		return 1000 + o.rng.IntN(8000)
	default:
		return 150_000 + o.rng.IntN(100_000)
	}
}

// entry renders one entry line (with its newline) under parent.
func (o *omp) entry(kind, parent string, text string) (id string, line []byte) {
	o.n++
	id = fmt.Sprintf("%02x%06x", o.machine, o.n)
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	txt, _ := json.Marshal(text)
	line = []byte(fmt.Sprintf(`{"type":%q,"id":%q,"parentId":%s,"timestamp":%q,"message":{"role":"user","content":%s}}`+"\n",
		kind, id, p, time.Now().UTC().Format(time.RFC3339Nano), txt))
	return id, line
}

func (o *omp) live() []*sess {
	var out []*sess
	for _, s := range o.sessions {
		if s.state == "live" {
			out = append(out, s)
		}
	}
	// Map order is random already; sort for a seed to mean something.
	sortSess(out)
	return out
}

func sortSess(s []*sess) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].id < s[j-1].id; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func (o *omp) pick() *sess {
	l := o.live()
	if len(l) == 0 {
		return nil
	}
	return l[o.rng.IntN(len(l))]
}

func addLines(s *sess, data []byte) {
	for _, l := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		s.lines[string(l)] = true
	}
}

// step makes one random operation.
func (o *omp) step() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sync {
		o.adoptPulled()
	}
	r := o.rng.IntN(1000)
	live := len(o.live())
	switch {
	case live < 3 || r < 40 && live < 14:
		return o.create()
	case r < 600:
		return o.appendLines()
	case r < 660:
		return o.retitle()
	case r < 760:
		return o.artifact()
	case r < 810:
		return o.blob()
	case r < 860:
		return o.badInput()
	case o.sync:
		return o.appendLines()
	case r < 900:
		return o.rewrite()
	case r < 940:
		return o.move()
	case r < 970:
		return o.archive()
	default:
		return o.remove()
	}
}

func (o *omp) create() error {
	o.n++
	id := fmt.Sprintf("019b%04x-%04x-7000-8000-%012x", o.machine, o.n&0xffff, o.rng.IntN(1<<30))
	now := time.Now()
	s := &sess{
		id: id, cwd: cwds[o.rng.IntN(len(cwds))], state: "live", lines: map[string]bool{}, artifacts: map[string][]byte{},
		name: now.UTC().Format("2006-01-02T15-04-05-000Z") + "_" + id + ".jsonl",
	}
	s.slot, s.slotAt = titleSlot("", now), now
	header := fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":%q,"cwd":"/home/u/%s"}`+"\n", id, now.UTC().Format(time.RFC3339Nano), s.cwd)
	first, line := o.entry("message", "", o.text(o.lineSize()))
	s.last = first
	s.data = append(append(append([]byte{}, s.slot...), header...), line...)
	addLines(s, s.data[256:])
	if err := o.writeRename(s.rel(), s.data); err != nil {
		return err
	}
	o.sessions[id] = s
	o.st.op("create")
	return nil
}

func (o *omp) appendLines() error {
	s := o.pick()
	if s == nil {
		return nil
	}
	var data []byte
	for range 1 + o.rng.IntN(3) {
		id, line := o.entry("message", s.last, o.text(o.lineSize()))
		s.last = id
		data = append(data, line...)
	}
	if err := o.appendSplit(s.rel(), data); err != nil {
		return err
	}
	s.data = append(s.data, data...)
	addLines(s, data)
	o.st.op("append")
	return nil
}

// retitle rewrites the title slot in place and appends a title_change.
func (o *omp) retitle() error {
	s := o.pick()
	if s == nil {
		return nil
	}
	now := time.Now()
	slot := titleSlot(fmt.Sprintf("chaos %d on machine %d", o.n, o.machine), now)
	f, err := os.OpenFile(o.path(s.rel()), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(slot, 0)
	f.Close()
	if err != nil {
		return err
	}
	s.slot, s.slotAt = slot, now
	if len(s.data) >= 256 {
		copy(s.data, slot)
	}
	id, line := o.entry("title_change", s.last, "retitled")
	s.last = id
	if err := o.appendSplit(s.rel(), line); err != nil {
		return err
	}
	s.data = append(s.data, line...)
	addLines(s, line)
	o.st.op("retitle")
	return nil
}

// rewrite replaces the file whole through a temp file, pruning the text of
// one earlier entry, as omp does when it prunes old tool output.
func (o *omp) rewrite() error {
	s := o.pick()
	if s == nil {
		return nil
	}
	lines := bytes.SplitAfter(s.data[256:], []byte("\n"))
	if len(lines) > 2 {
		i := 1 + o.rng.IntN(len(lines)-2)
		var e map[string]any
		if json.Unmarshal(lines[i], &e) == nil {
			e["message"] = map[string]any{"role": "toolResult", "content": "[pruned]"}
			b, _ := json.Marshal(e)
			lines[i] = append(b, '\n')
		}
	}
	data := append(append([]byte{}, s.data[:256]...), bytes.Join(lines, nil)...)
	if err := o.writeRename(s.rel(), data); err != nil {
		return err
	}
	s.data = data
	addLines(s, data[256:])
	o.st.op("rewrite")
	return nil
}

// move renames the session (and its artifact folder) into another cwd
// folder; half the time by writing it there anew with the header's cwd
// changed, as /move does.
func (o *omp) move() error {
	s := o.pick()
	if s == nil {
		return nil
	}
	cwd := cwds[o.rng.IntN(len(cwds))]
	if cwd == s.cwd {
		return nil
	}
	oldRel, oldArt := s.rel(), s.artifactDir()
	s.cwd = cwd
	if err := os.MkdirAll(filepath.Dir(o.path(s.rel())), 0o700); err != nil {
		return err
	}
	if _, err := os.Stat(o.path(oldArt)); err == nil {
		if err := os.Rename(o.path(oldArt), o.path(s.artifactDir())); err != nil {
			return err
		}
	}
	if o.rng.IntN(2) == 0 {
		o.st.op("move-rename")
		return os.Rename(o.path(oldRel), o.path(s.rel()))
	}
	lines := bytes.SplitAfterN(s.data[256:], []byte("\n"), 2)
	var h map[string]any
	if len(lines) == 2 && json.Unmarshal(lines[0], &h) == nil {
		h["cwd"] = "/home/u/" + cwd
		b, _ := json.Marshal(h)
		s.data = append(append(append([]byte{}, s.data[:256]...), append(b, '\n')...), lines[1]...)
		addLines(s, s.data[256:])
	}
	if err := o.writeRename(s.rel(), s.data); err != nil {
		return err
	}
	o.st.op("move-rewrite")
	return os.Remove(o.path(oldRel))
}

// archive gzips the session into archive/sessions and removes it.
func (o *omp) archive() error {
	s := o.pick()
	if s == nil || len(o.live()) < 4 {
		return nil
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(s.data)
	zw.Close()
	if err := o.writeRename(s.archiveRel(), gz.Bytes()); err != nil {
		return err
	}
	s.state = "archived"
	o.st.op("archive")
	return os.Remove(o.path(s.rel()))
}

// remove deletes the session and its artifact folder, as /delete does.
func (o *omp) remove() error {
	s := o.pick()
	if s == nil || len(o.live()) < 4 {
		return nil
	}
	s.state = "deleted"
	o.st.op("delete")
	if err := os.RemoveAll(o.path(s.artifactDir())); err != nil {
		return err
	}
	return os.Remove(o.path(s.rel()))
}

// artifact grows a subagent log in a session's artifact folder, or writes
// a tool output file whole.
func (o *omp) artifact() error {
	s := o.pick()
	if s == nil {
		return nil
	}
	if o.rng.IntN(4) == 0 {
		rel := fmt.Sprintf("tool-%d.log", o.rng.IntN(3))
		data := []byte(o.text(200 + o.rng.IntN(3000)))
		if err := o.writeRename(s.artifactDir()+"/"+rel, data); err != nil {
			return err
		}
		s.artifacts[rel] = data
		o.st.op("artifact-write")
		return nil
	}
	rel := fmt.Sprintf("subagents/%d-Explore.jsonl", o.rng.IntN(2))
	_, line := o.entry("message", "", o.text(o.lineSize()/4+10))
	p := o.path(s.artifactDir() + "/" + rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(line)
	f.Close()
	if err != nil {
		return err
	}
	s.artifacts[rel] = append(s.artifacts[rel], line...)
	o.st.op("artifact-append")
	return nil
}

// blob writes a content-addressed blob.
func (o *omp) blob() error {
	data := []byte(o.text(100 + o.rng.IntN(30_000)))
	sum := sha256.Sum256(data)
	name := hex.EncodeToString(sum[:])
	if err := o.writeRename("blobs/"+name, data); err != nil {
		return err
	}
	o.blobs[name] = data
	o.st.op("blob")
	return nil
}

// badInput is what a careless user or a crashed writer leaves: each must
// be backed up as bytes or skipped, never followed out of the agent dir,
// never uploaded when it holds credentials.
func (o *omp) badInput() error {
	switch o.rng.IntN(6) {
	case 0: // a malformed line: not JSON, not UTF-8
		s := o.pick()
		if s == nil {
			return nil
		}
		line := []byte("{not json \xff\xfe " + o.text(30) + "\n")
		if o.rng.IntN(2) == 0 {
			line = []byte("\n") // an empty line
		}
		if err := o.appendSplit(s.rel(), line); err != nil {
			return err
		}
		s.data = append(s.data, line...)
		addLines(s, line)
		o.st.bad("malformed-line")
	case 1: // a symlink to a session file out of the agent dir
		o.n++
		rel := fmt.Sprintf("sessions/%s/2026-01-01T00-00-00-000Z_0ut%05x-0000-7000-8000-000000000000.jsonl", cwds[o.rng.IntN(len(cwds))], o.n)
		if err := os.MkdirAll(filepath.Dir(o.path(rel)), 0o700); err != nil {
			return err
		}
		if err := os.Symlink(o.outside, o.path(rel)); err != nil {
			return err
		}
		o.st.bad("symlink-outside")
	case 2: // a folder symlinked out of the agent dir
		o.n++
		rel := fmt.Sprintf("sessions/-linked-%d", o.n)
		if err := os.Symlink(filepath.Dir(o.outside), o.path(rel)); err != nil {
			return err
		}
		o.st.bad("symlinked-folder")
	case 3: // credentials and local state omp keeps beside its sessions
		body := fmt.Sprintf(`{"anthropic":{"key":%q}}`, o.secret)
		if err := o.writeRename("auth.json", []byte(body)); err != nil {
			return err
		}
		if err := o.writeRename("agent.db", []byte("SQLite format 3\x00"+o.secret)); err != nil {
			return err
		}
		o.st.bad("credentials")
	case 4: // sidecars: lock, temp and backup files
		s := o.pick()
		if s == nil {
			return nil
		}
		for _, suffix := range []string{".lock", ".bak"} {
			if err := os.WriteFile(o.path(s.rel()+suffix), []byte(o.secret+"\n"), 0o600); err != nil {
				return err
			}
		}
		o.st.bad("sidecar")
	case 5: // a .jsonl that is no session: no header, no id in its name
		rel := fmt.Sprintf("sessions/%s/notes-%d.jsonl", cwds[o.rng.IntN(len(cwds))], o.rng.IntN(3))
		if err := os.MkdirAll(filepath.Dir(o.path(rel)), 0o700); err != nil {
			return err
		}
		if err := o.writeRename(rel, []byte(o.secret+"\n")); err != nil {
			return err
		}
		o.st.bad("not-a-session")
	}
	return nil
}

// adoptPulled takes up, in sync mode, sessions another machine created and
// this machine's agent pulled, so this omp can resume them.
func (o *omp) adoptPulled() {
	matches, _ := filepath.Glob(filepath.Join(o.dir, "sessions", "*", "*.jsonl"))
	for _, p := range matches {
		name := filepath.Base(p)
		i := strings.LastIndexByte(name, '_')
		if i < 0 || !strings.HasPrefix(name[i+1:], "019b") {
			continue
		}
		id := strings.TrimSuffix(name[i+1:], ".jsonl")
		if _, ok := o.sessions[id]; ok {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil || len(b) < 256 || b[len(b)-1] != '\n' {
			continue
		}
		s := &sess{id: id, cwd: filepath.Base(filepath.Dir(p)), name: name, state: "live", lines: map[string]bool{}, artifacts: map[string][]byte{}}
		lines := bytes.Split(bytes.TrimSuffix(b[256:], []byte("\n")), []byte("\n"))
		var e struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(lines[len(lines)-1], &e) == nil {
			s.last = e.ID
		}
		o.sessions[id] = s
		o.st.op("resume-pulled")
	}
}

// run makes operations until stop is closed.
func (o *omp) run(stop <-chan struct{}, errs chan<- error) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		if err := o.step(); err != nil {
			errs <- fmt.Errorf("omp on machine %d: %w", o.machine, err)
			return
		}
		time.Sleep(o.rng.between(2*time.Millisecond, 25*time.Millisecond))
	}
}
