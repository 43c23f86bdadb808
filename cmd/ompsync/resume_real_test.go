package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/clienttest"
	"github.com/ompsync/ompsync/internal/testkit/omptest"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/store"
)

// These tests continue a session on another machine with the real
// clients: machine A runs a session with a tool call in its checkout of a
// project and backs it up; machine B pulls it (agent --once --pull) and
// continues it with the client's "continue the last session" in its own
// checkout; machine C restores it by id and continues it with the client's
// resume by id; B backs up, A pulls, and A's client continues the session
// that now holds every machine's turns. Every machine is a home folder of
// its own on this host; A's project folder is moved away while the others
// work, so that it is not on their "machine".

// resumeMode is how a turn starts: a new session, the client's continue
// of the folder's last session, or its resume by id.
type resumeMode int

const (
	newSession resumeMode = iota
	continueLast
	resumeByID
)

// resumer is one machine's real client, for these tests.
type resumer struct {
	st     *store.Store
	home   string // $HOME
	folder string // what ompsync backs up
	setCwd func(string)
	turn   func(ctx context.Context, mode resumeMode, id, prompt string) error
	files  func() []string
	// tool is a tool call that runs command in the folder the client runs
	// its tools in.
	tool func(command string) omptest.Reply
}

type newResumer func(t *testing.T, model *omptest.Model) *resumer

func ompResumer(o *omptest.OMP) newResumer {
	return func(t *testing.T, model *omptest.Model) *resumer {
		h := omptest.NewHome(t, o, model)
		return &resumer{st: store.OMP(), home: h.Dir, folder: h.AgentDir(), setCwd: func(d string) { h.Cwd = d }, files: h.SessionFiles,
			tool: omptest.Bash,
			turn: func(ctx context.Context, mode resumeMode, id, prompt string) error {
				_, _, err := h.Print(ctx, resumeArgs(mode, id, prompt, []string{"-c"}, []string{"--resume", id})...)
				return err
			}}
	}
}

func piResumer(pi *clienttest.Pi) newResumer {
	return func(t *testing.T, model *omptest.Model) *resumer {
		h := clienttest.NewPiHome(t, pi, model)
		return &resumer{st: store.Pi(), home: h.Dir, folder: h.AgentDir(), setCwd: func(d string) { h.Cwd = d }, files: h.SessionFiles,
			tool: omptest.Bash,
			turn: func(ctx context.Context, mode resumeMode, id, prompt string) error {
				_, _, err := h.Print(ctx, resumeArgs(mode, id, prompt, []string{"--continue"}, []string{"--session", id})...)
				return err
			}}
	}
}

func claudeResumer(c *clienttest.Claude) newResumer {
	return func(t *testing.T, model *omptest.Model) *resumer {
		h := clienttest.NewClaudeHome(t, c, model)
		return &resumer{st: store.Claude(), home: h.Dir, folder: h.ConfigDir(), setCwd: func(d string) { h.Cwd = d }, files: h.SessionFiles,
			tool: func(command string) omptest.Reply {
				return omptest.ToolCall("Bash", map[string]any{"command": command, "description": "run it"})
			},
			turn: func(ctx context.Context, mode resumeMode, id, prompt string) error {
				_, _, err := h.Print(ctx, resumeArgs(mode, id, prompt, []string{"--continue"}, []string{"--resume", id})...)
				return err
			}}
	}
}

func codexResumer(c *clienttest.Codex) newResumer {
	return func(t *testing.T, model *omptest.Model) *resumer {
		h := clienttest.NewCodexHome(t, c, model)
		return &resumer{st: store.Codex(), home: h.Dir, folder: h.ConfigDir(), setCwd: func(d string) { h.Cwd = d }, files: h.SessionFiles,
			tool: func(command string) omptest.Reply {
				return omptest.ToolCall("exec_command", map[string]any{"cmd": command})
			},
			turn: func(ctx context.Context, mode resumeMode, id, prompt string) error {
				_, _, err := h.Exec(ctx, resumeArgs(mode, id, prompt, []string{"resume", "--last"}, []string{"resume", id})...)
				return err
			}}
	}
}

func resumeArgs(mode resumeMode, id, prompt string, last, byID []string) []string {
	switch mode {
	case continueLast:
		return append(append([]string(nil), last...), prompt)
	case resumeByID:
		return append(append([]string(nil), byID...), prompt)
	}
	return []string{prompt}
}

// resumeMachine is a machine of these tests: a client, ompsync for its
// agent alone, and the folder the user works in.
type resumeMachine struct {
	*machineEnv
	c   *resumer
	cwd string
	env []string // more of ompsync's environment
}

func newResumeMachine(t *testing.T, mk newResumer, model *omptest.Model, url, name string) *resumeMachine {
	m := &resumeMachine{machineEnv: newMachineEnv(t, url, backend.S3Options{}, name), c: mk(t, model)}
	m.agentDir = m.c.folder
	return m
}

// ompsync runs ompsync as this machine, for the client's agent alone,
// with the client's home as its home (where it looks for checkouts).
func (m *resumeMachine) ompsync(args ...string) (int, string) {
	m.t.Helper()
	name := m.c.st.Name()
	extra := append([]string{"HOME=" + m.c.home, "OMPSYNC_AGENTS=" + name}, m.env...)
	if name != "omp" {
		extra = append(extra, "OMPSYNC_"+strings.ToUpper(name)+"_DIR="+m.c.folder)
	}
	return m.startWithWait(extra, args...)
}

func (m *resumeMachine) must(args ...string) string {
	m.t.Helper()
	code, out := m.ompsync(args...)
	if code != 0 {
		m.t.Fatalf("%s: ompsync %s: exit %d\n%s", m.machine, strings.Join(args, " "), code, out)
	}
	return out
}

// session is the client's one session file.
func (m *resumeMachine) session() string {
	m.t.Helper()
	files := m.c.files()
	if len(files) != 1 {
		m.t.Fatalf("%s: %s holds %d session files, want 1: %v", m.machine, m.c.st.Name(), len(files), files)
	}
	return files[0]
}

// work runs a turn in the machine's folder whose tool call leaves marker
// there, and checks that it did, and that the turn landed in the one
// session file, after what it held.
func (m *resumeMachine) work(ctx context.Context, model *omptest.Model, mode resumeMode, id, prompt, marker string) {
	m.t.Helper()
	var before []byte
	if mode != newSession {
		before = readFile(m.t, m.session())
	}
	m.c.setCwd(m.cwd)
	model.Queue(m.c.tool("touch "+marker), omptest.Text("done: "+marker))
	if err := m.c.turn(ctx, mode, id, prompt); err != nil {
		m.t.Fatalf("%s: %s: %v", m.machine, m.c.st.Name(), err)
	}
	if _, err := os.Stat(filepath.Join(m.cwd, marker)); err != nil {
		m.t.Errorf("%s: the tool call of %q did not run in %s: %v", m.machine, prompt, m.cwd, err)
	}
	after := readFile(m.t, m.session())
	if !bytes.HasPrefix(after, before) || !bytes.Contains(after[len(before):], []byte(prompt)) {
		m.t.Errorf("%s: %s did not append %q to the session it resumed (%d bytes before, %d after)", m.machine, m.c.st.Name(), prompt, len(before), len(after))
	}
}

// gitCheckout makes dir a git repository whose origin is url.
func gitCheckout(t *testing.T, dir, url string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"remote", "add", "origin", url}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// away moves dir aside, for it not to be on the "machine" that works next;
// back puts it back (and the test's end, if not called).
func away(t *testing.T, dir string) (back func()) {
	t.Helper()
	hidden := dir + ".away"
	if err := os.Rename(dir, hidden); err != nil {
		t.Fatal(err)
	}
	done := false
	back = func() {
		if !done {
			done = true
			if err := os.Rename(hidden, dir); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(back)
	return back
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// resumeCell is one way two machines' folders for a project can differ.
type resumeCell struct {
	name string
	// setUp makes machine a's project folder and b's, and says how
	// ompsync places a's session on b, or "" for nowhere to place it.
	setUp func(t *testing.T, a, b *resumeMachine) (how string)
}

const testOrigin = "https://ci-token:s3cr3t-t0ken@github.com/acme/app.git"

var resumeCells = []resumeCell{
	{"same paths", func(t *testing.T, a, b *resumeMachine) string {
		// A folder outside the homes (/srv/app, a container's
		// /workspace): on this host the very same folder for both.
		a.cwd = filepath.Join(t.TempDir(), "srv", "app")
		gitCheckout(t, a.cwd, testOrigin)
		b.cwd = a.cwd
		return "same path"
	}},
	{"same path under another home", func(t *testing.T, a, b *resumeMachine) string {
		// A folder under a's home that b has at the same path, outside
		// its own home (a mount, a container): omp names a's folder
		// relative to a's home, b's omp looks for it by the whole path.
		a.cwd = filepath.Join(a.c.home, "src", "app")
		gitCheckout(t, a.cwd, testOrigin)
		b.cwd = a.cwd
		return "same path"
	}},
	{"other home", func(t *testing.T, a, b *resumeMachine) string {
		a.cwd, b.cwd = filepath.Join(a.c.home, "src", "app"), filepath.Join(b.c.home, "src", "app")
		mkdir(t, a.cwd) // no git: the same folder under the home
		mkdir(t, b.cwd)
		return "home folder"
	}},
	{"other checkout path", func(t *testing.T, a, b *resumeMachine) string {
		a.cwd, b.cwd = filepath.Join(a.c.home, "src", "app"), filepath.Join(b.c.home, "code", "app")
		gitCheckout(t, a.cwd, testOrigin)
		gitCheckout(t, b.cwd, "git@github.com:acme/app.git")
		return "checkout"
	}},
	{"path_map from the config file", func(t *testing.T, a, b *resumeMachine) string {
		a.cwd, b.cwd = filepath.Join(a.c.home, "src", "app"), filepath.Join(b.c.home, "work", "app")
		mkdir(t, a.cwd) // no git, and another folder under the home
		mkdir(t, b.cwd)
		pathMapConfig(t, b, filepath.Join(a.c.home, "src"), filepath.Join(b.c.home, "work"))
		return "path_map"
	}},
	{"two checkouts", func(t *testing.T, a, b *resumeMachine) string {
		a.cwd = filepath.Join(a.c.home, "src", "app")
		gitCheckout(t, a.cwd, testOrigin)
		older, newer := filepath.Join(b.c.home, "code", "app"), filepath.Join(b.c.home, "work", "app")
		for i, dir := range []string{older, newer} {
			gitCheckout(t, dir, "git@github.com:acme/app")
			// When git last touched each checkout's index.
			at := time.Now().Add(time.Duration(i-2) * time.Hour)
			idx := filepath.Join(dir, ".git", "index")
			if err := os.WriteFile(idx, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(idx, at, at); err != nil {
				t.Fatal(err)
			}
		}
		b.cwd = newer
		return "checkout"
	}},
	{"no match", func(t *testing.T, a, b *resumeMachine) string {
		a.cwd, b.cwd = filepath.Join(a.c.home, "src", "app"), filepath.Join(b.c.home, "elsewhere")
		gitCheckout(t, a.cwd, testOrigin)
		mkdir(t, b.cwd)
		return ""
	}},
}

// pathMapConfig gives machine m a config file with one path_map pair.
func pathMapConfig(t *testing.T, m *resumeMachine, from, to string) {
	t.Helper()
	cfg := filepath.Join(m.home, "config.yaml")
	if err := os.WriteFile(cfg, []byte("path_map:\n  - "+from+"="+to+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m.env = append(m.env, "OMPSYNC_CONFIG="+cfg)
}

// gitCell: machine a's folder is a checkout with an origin.
func gitCell(c resumeCell) bool {
	return c.name != "other home" && c.name != "path_map from the config file"
}

func resumeAnywhere(t *testing.T, mk newResumer) {
	for _, cell := range resumeCells {
		t.Run(cell.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
			defer cancel()
			model := omptest.NewModel(t)
			url := "file://" + filepath.Join(t.TempDir(), "remote")
			a := newResumeMachine(t, mk, model, url, "a")
			b := newResumeMachine(t, mk, model, url, "b")
			c := newResumeMachine(t, mk, model, url, "c")
			how := cell.setUp(t, a, b)
			// c is laid out as b is, in its own home.
			if rel, err := filepath.Rel(b.c.home, b.cwd); err == nil && !strings.HasPrefix(rel, "..") {
				c.cwd = filepath.Join(c.c.home, rel)
				if how == "checkout" {
					gitCheckout(t, c.cwd, "https://github.com/acme/app")
				} else {
					mkdir(t, c.cwd)
				}
			} else {
				c.cwd = b.cwd
			}
			if how == "path_map" {
				pathMapConfig(t, c, filepath.Join(a.c.home, "src"), filepath.Join(c.c.home, "work"))
			}

			a.work(ctx, model, newSession, "", "started on machine a", "ran-on-a")
			aPath := a.session()
			rel, _ := filepath.Rel(a.c.folder, aPath)
			id, ok := a.c.st.IDFromName(filepath.ToSlash(rel))
			if !ok {
				t.Fatalf("no session id in %s", aPath)
			}
			a.must("agent", "--once")
			aBytes := readFile(t, aPath)
			code, ls := a.ompsync("ls", "--json")
			if code != 0 || strings.Contains(ls, "s3cr3t") || strings.Contains(testOrigin, "acme") && gitCell(cell) && !strings.Contains(ls, `"origin":"github.com/acme/app"`) {
				t.Errorf("ls --json does not show the project's origin, or shows its credentials: exit %d\n%s", code, ls)
			}
			// Machine a's folders are not on the other machines.
			backA := func() {}
			if how != "same path" {
				backA = away(t, filepath.Dir(a.cwd))
			}

			// b pulls the session; its client finds it where it looks.
			out := b.must("agent", "--once", "--pull")
			bPath := b.session()
			info, _ := b.c.st.Describe(readFile(t, bPath))
			if how == "" {
				if n := strings.Count(out, "no checkout of github.com/acme/app"); n != 1 || !strings.Contains(out, "path_map") {
					t.Errorf("b: a pull with nowhere to place the session says so %d times, want once with the fix:\n%s", n, out)
				}
				if info.Cwd != a.cwd {
					t.Errorf("b: a session with nowhere to go records cwd %q, want %q as recorded", info.Cwd, a.cwd)
				}
				code, out := c.ompsync("restore", id[:8])
				if code != 0 || !strings.Contains(out, "note: no checkout of github.com/acme/app") || !strings.Contains(out, "once its folder "+a.cwd+" is on this machine") {
					t.Errorf("c: restore with nowhere to place the session: exit %d, no note or hint:\n%s", code, out)
				}
				return
			}
			if info.Cwd != b.cwd {
				t.Errorf("b: the pulled session records cwd %q, want b's folder %s", info.Cwd, b.cwd)
			}
			if how == "same path" && !bytes.Equal(readFile(t, bPath), aBytes) {
				t.Errorf("b: a session whose folder is the same was changed by the pull")
			}
			if !strings.Contains(out, "placed a session from another machine") || !strings.Contains(out, how) {
				t.Errorf("b: the pull does not say it placed the session by %q:\n%s", how, out)
			}
			if cell.name == "two checkouts" && !strings.Contains(out, "2 checkouts of github.com/acme/app here; took "+b.cwd+", used most recently") {
				t.Errorf("b: the pull does not say which of two checkouts it took:\n%s", out)
			}
			b.work(ctx, model, continueLast, id, "continued on machine b", "ran-on-b")

			// c restores it by id; the hint resumes it from the right folder.
			// (b's folders are not on c either.)
			backB := func() {}
			if how != "same path" {
				backB = away(t, filepath.Dir(b.cwd))
			}
			// The newest copy is b's: recorded under b's home in the folder
			// c has under its own, so a path_map pair is not needed there.
			cHow := how
			if how == "path_map" {
				cHow = "home folder"
			}
			if dry := c.must("restore", "--dry-run", id[:8]); !strings.Contains(dry, "in "+c.cwd+" ("+cHow+")") {
				t.Errorf("c: restore --dry-run does not say the session goes in %s (%s):\n%s", c.cwd, cHow, dry)
			}
			out = c.must("restore", id[:8])
			if want := "resume it with: cd " + c.cwd + " && " + c.c.st.Resume(id); !strings.Contains(out, want) {
				t.Errorf("c: restore does not say %q:\n%s", want, out)
			}
			c.work(ctx, model, resumeByID, id, "resumed by id on machine c", "ran-on-c")
			backB()

			// b backs up; a pulls and goes on with every machine's turns.
			b.must("agent", "--once")
			backA()
			// The user comes back to a later: its client wrote the
			// session a while ago (a pull leaves a file written in the
			// last seconds alone, as one the client may be writing).
			old := time.Now().Add(-time.Minute)
			if err := os.Chtimes(aPath, old, old); err != nil {
				t.Fatal(err)
			}
			out = a.must("agent", "--once", "--pull")
			got := readFile(t, aPath)
			if !bytes.HasPrefix(got, aBytes) || !bytes.Contains(got, []byte("continued on machine b")) {
				t.Fatalf("a: after the pull the session does not hold its own bytes and b's turn (%d bytes, %d before):\n%s", len(got), len(aBytes), out)
			}
			// The folder the session records is a's again (what b's
			// client noted of its environment stays b's: it happened there).
			if i := bytes.Index(got, []byte(`"cwd":"`+b.cwd)); i >= 0 && b.cwd != a.cwd {
				t.Errorf("a: b's folder %s came back into a's session as its cwd: %s", b.cwd, got[max(0, i-300):min(len(got), i+200)])
			}
			if pre, _ := filepath.Glob(filepath.Join(filepath.Dir(aPath), ".*pre-merge*")); len(pre) > 0 {
				t.Errorf("a: b's work came back as a merge, not an append: %v", pre)
			}
			a.work(ctx, model, continueLast, id, "back on machine a", "ran-on-a-again")
			// Nothing of the origin's credentials reached the remote (ls
			// --json above reads its catalogs decoded), nor any state dir.
			remoteDir := strings.TrimPrefix(url, "file://")
			for _, dir := range []string{remoteDir, filepath.Join(a.home, "state"), filepath.Join(b.home, "state")} {
				_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
					if err == nil && d.Type().IsRegular() && bytes.Contains(readFile(t, p), []byte("s3cr3t-t0ken")) {
						t.Errorf("the origin's credentials are in %s", p)
					}
					return nil
				})
			}
		})
	}
}

func TestRealOmpResumeAnywhere(t *testing.T) {
	t.Parallel()
	resumeAnywhere(t, ompResumer(omptest.Find(t)))
}

func TestRealPiResumeAnywhere(t *testing.T) {
	t.Parallel()
	resumeAnywhere(t, piResumer(clienttest.FindPi(t)))
}

func TestRealClaudeResumeAnywhere(t *testing.T) {
	t.Parallel()
	resumeAnywhere(t, claudeResumer(clienttest.FindClaude(t)))
}

func TestRealCodexResumeAnywhere(t *testing.T) {
	t.Parallel()
	resumeAnywhere(t, codexResumer(clienttest.FindCodex(t)))
}
