package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/internal/testkit/omptest"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/session"
	"github.com/ompsync/ompsync/store"
)

// These tests let the real omp (omptest.Find: npm @oh-my-pi/pi-coding-agent,
// run by Bun, against a fake model on 127.0.0.1) write every session file,
// so what ompsync backs up, restores and merges is what omp really does.
// They run in parallel with each other: omp's time goes to starting Bun and
// waiting on the model, not to the CPU.

// ompHost is one machine: a real omp and an ompsync sharing its agent dir.
type ompHost struct {
	*machineEnv
	omp *omptest.Home
}

func newOmpHost(t *testing.T, o *omptest.OMP, model *omptest.Model, remoteURL string, s3 backend.S3Options, name string) *ompHost {
	h := omptest.NewHome(t, o, model)
	m := newMachineEnv(t, remoteURL, s3, name)
	m.agentDir = h.AgentDir()
	return &ompHost{m, h}
}

// backup runs `ompsync agent --once`, which must exit 0.
func (h *ompHost) backup() {
	h.t.Helper()
	if code, out := h.ompsync("agent", "--once"); code != 0 {
		h.t.Fatalf("agent --once: exit %d\n%s", code, out)
	}
}

// ompSidecar reports the files omp keeps beside its sessions that are not
// backed up: locks, temp files, backups, credentials and databases.
func ompSidecar(name string) bool {
	switch name {
	case "auth.json", "agent.db", "agent.db-wal", "agent.db-shm":
		return true
	}
	for _, suf := range []string{".lock", ".lock.os", ".tmp", ".bak"} {
		if strings.HasSuffix(name, suf) {
			return true
		}
	}
	return strings.HasPrefix(name, ".")
}

// treeFile is one file a restore must reproduce.
type treeFile struct {
	data  []byte
	mtime time.Time // zero: not compared
}

// expectedTree is what `restore --all` must reproduce from an agent dir:
// every file under sessions/ and blobs/ that omp keeps (not its locks and
// temp files) with its mtime, and archived sessions (with their artifact
// folders) back under sessions/.
func expectedTree(t *testing.T, agentDir string) map[string]treeFile {
	t.Helper()
	out := map[string]treeFile{}
	for _, top := range []string{"sessions", "blobs", "archive/sessions"} {
		root := filepath.Join(agentDir, filepath.FromSlash(top))
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == root && os.IsNotExist(err) {
					return filepath.SkipDir
				}
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			rel, _ := filepath.Rel(agentDir, p)
			rel = filepath.ToSlash(rel)
			if ompSidecar(d.Name()) {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			// Every file with its mtime but an archive, which comes back
			// inflated, as the session file it was.
			f := treeFile{data: data, mtime: fi.ModTime()}
			switch store.OMP().Classify(rel) {
			case store.KindArchive:
				f.mtime = time.Time{}
				zr, err := gzip.NewReader(bytes.NewReader(data))
				if err != nil {
					return err
				}
				if f.data, err = io.ReadAll(zr); err != nil {
					return err
				}
				rel = strings.TrimSuffix(strings.TrimPrefix(rel, "archive/"), ".gz")
			default:
				rel = strings.TrimPrefix(rel, "archive/") // an archived artifact folder
			}
			out[rel] = f
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// restoreAll backs h up, restores everything into a new machine's empty
// agent dir, checks that every file came back identical, and returns that
// machine.
func (h *ompHost) restoreAll(o *omptest.OMP, model *omptest.Model) *omptest.Home {
	t := h.t
	t.Helper()
	h.backup()
	to := omptest.NewHome(t, o, model)
	if code, out := h.ompsync("restore", "--all", "--to", to.AgentDir()); code != 0 {
		t.Fatalf("restore --all: exit %d\n%s", code, out)
	}
	want := expectedTree(t, h.omp.AgentDir())
	got := expectedTree(t, to.AgentDir())
	var names []string
	for rel := range want {
		names = append(names, rel)
	}
	sort.Strings(names)
	for _, rel := range names {
		w, g := want[rel], got[rel]
		switch {
		case g.data == nil && w.data != nil:
			t.Errorf("restore --all did not bring back %s", rel)
		case !bytes.Equal(g.data, w.data):
			t.Errorf("%s: restored %d bytes that differ from the %d omp wrote", rel, len(g.data), len(w.data))
		case !w.mtime.IsZero() && !g.mtime.Equal(w.mtime):
			t.Errorf("%s: restored mtime %v, omp's %v", rel, g.mtime, w.mtime)
		}
	}
	for rel := range got {
		if _, ok := want[rel]; !ok {
			t.Errorf("restore made %s, which omp never wrote", rel)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("restore --all reproduced all %d files omp wrote", len(want))
	return to
}

// sessionFileOf finds the file of session id under an agent dir's sessions/.
func sessionFileOf(t *testing.T, agentDir, id string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(agentDir, "sessions", "*", "*_"+id+".jsonl"))
	if len(files) != 1 {
		t.Fatalf("session %s: %d files under %s/sessions", id, len(files), agentDir)
	}
	return files[0]
}

// sessionIDs lists the ids of every session file under sessions/.
func sessionIDs(t *testing.T, h *omptest.Home) []string {
	t.Helper()
	var ids []string
	for _, p := range h.SessionFiles() {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		hd, _, err := session.ReadHeader(b)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		ids = append(ids, hd.ID)
	}
	return ids
}

// resume has the real omp resume session id on h and append a turn: it must
// find the restored file, append to it without rewriting what was there,
// and never find it "changed before rewrite".
func resume(t *testing.T, h *omptest.Home, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	p := sessionFileOf(t, h.AgentDir(), id)
	before, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	prompt := "resumed after restore " + id[len(id)-8:]
	if _, _, err := h.Print(ctx, "--resume", id, prompt); err != nil {
		t.Fatalf("omp --resume %s on the restored copy: %v", id, err)
	}
	after, err := os.ReadFile(sessionFileOf(t, h.AgentDir(), id))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(after[session.SlotLen(after):], before[session.SlotLen(before):]) || len(after) <= len(before) {
		t.Errorf("omp did not append to the restored session %s (%d bytes before, %d after)", id, len(before), len(after))
	}
	if !bytes.Contains(after, []byte(prompt)) {
		t.Errorf("the resumed turn of %s is not in its file", id)
	}
	if h.Logged(0, omptest.ConflictMessage) {
		t.Errorf("omp logged %q resuming the restored %s", omptest.ConflictMessage, id)
	}
}

// Every kind of file the real omp writes is backed up and restored byte for
// byte, and omp resumes the restored sessions and goes on writing them.
func TestRealOmpBackupRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real omp")
	}
	t.Parallel()
	o := omptest.Find(t)
	model := omptest.NewModel(t)
	h := newOmpHost(t, o, model, "file://"+filepath.Join(t.TempDir(), "remote"), backend.S3Options{}, "laptop")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	print := func(args ...string) {
		t.Helper()
		if _, _, err := h.omp.Print(ctx, args...); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string, resumeIDs ...string) {
		t.Helper()
		t.Logf("step: %s", step)
		to := h.restoreAll(o, model)
		for _, id := range resumeIDs {
			resume(t, to, id)
		}
	}

	// A new session.
	print("first prompt")
	ids := sessionIDs(t, h.omp)
	if len(ids) != 1 {
		t.Fatalf("omp wrote %d sessions, want 1", len(ids))
	}
	first := ids[0]
	check("a new session", first)

	// Resumed several times.
	print("--resume", first, "second prompt")
	print("--resume", first, "third prompt")
	check("resumed twice", first)

	// A large tool output: omp keeps it in the session's artifact folder.
	model.Queue(omptest.Bash("seq 1 200000"), omptest.Text("counted"))
	print("--resume", first, "count to a lot")
	art := strings.TrimSuffix(sessionFileOf(t, h.omp.AgentDir(), first), ".jsonl")
	if files, _ := filepath.Glob(filepath.Join(art, "*")); len(files) == 0 {
		t.Fatalf("omp kept no artifact for a large tool output in %s", art)
	}
	check("a large tool output", first)

	// An image: a blob and its .png hard link.
	if err := omptest.WritePNG(filepath.Join(h.omp.Cwd, "pic.png"), 7); err != nil {
		t.Fatal(err)
	}
	model.Queue(omptest.Read("pic.png"), omptest.Text("a picture"))
	print("--resume", first, "look at pic.png")
	if links, _ := filepath.Glob(filepath.Join(h.omp.AgentDir(), "blobs", "*.png")); len(links) == 0 {
		t.Fatal("omp stored no blob with a .png name for the image")
	}
	check("an image", first)

	// /rename in RPC mode: the title slot is rewritten in place.
	rpc := h.omp.StartRPC(ctx, "--resume", first)
	if err := rpc.Rename(ctx, "a title set by hand"); err != nil {
		t.Fatal(err)
	}
	if err := rpc.Prompt(ctx, "after the rename"); err != nil {
		t.Fatal(err)
	}
	if err := rpc.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(sessionFileOf(t, h.omp.AgentDir(), first)); !bytes.Contains(b[:session.TitleSlotSize], []byte("a title set by hand")) {
		t.Fatalf("the title slot does not hold the new title: %q", b[:session.TitleSlotSize])
	}
	check("a renamed session", first)

	// A fork: a new session file that repeats its parent's entries.
	print("--fork", first, "forked off")
	ids = sessionIDs(t, h.omp)
	if len(ids) != 2 {
		t.Fatalf("after --fork: %d sessions, want 2", len(ids))
	}
	fork := ids[0]
	if fork == first {
		fork = ids[1]
	}
	check("a fork", fork)

	// A branch from an earlier user turn into a new file, in RPC mode.
	var firstUser string
	for _, line := range bytes.Split(readFile(t, sessionFileOf(t, h.omp.AgentDir(), first)), []byte("\n")) {
		if e, ok := session.ParseEntry(line); ok && bytes.Contains(line, []byte(`"role":"user"`)) {
			firstUser = e.ID
			break
		}
	}
	rpc = h.omp.StartRPC(ctx, "--resume", first)
	if _, err := rpc.Command(ctx, map[string]any{"type": "branch", "entryId": firstUser}); err != nil {
		t.Fatal(err)
	}
	if err := rpc.Prompt(ctx, "on a branch"); err != nil {
		t.Fatal(err)
	}
	st, err := rpc.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rpc.Close(); err != nil {
		t.Fatal(err)
	}
	if st.SessionID == first || st.SessionID == fork {
		t.Fatalf("the branch stayed in session %s", st.SessionID)
	}
	check("a branch", st.SessionID)

	// omp's loop guard cuts a looping reply, retries, and marks the cut
	// message: a whole-file rewrite (new inode, an old entry changed).
	before, err := os.Stat(sessionFileOf(t, h.omp.AgentDir(), first))
	if err != nil {
		t.Fatal(err)
	}
	model.Queue(omptest.Looping(), omptest.Text("recovered after the loop"))
	print("--resume", first, "say it once")
	after, err := os.Stat(sessionFileOf(t, h.omp.AgentDir(), first))
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(before, after) || !bytes.Contains(readFile(t, sessionFileOf(t, h.omp.AgentDir(), first)), []byte(`"retryRecovery"`)) {
		t.Fatal("omp's loop guard did not rewrite the session file: the step would prove nothing")
	}
	check("a whole-file rewrite by omp's loop guard", first)

	// /move: the file goes to another cwd-dir and its header's cwd changes.
	other := filepath.Join(h.omp.Dir, "other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	rpc = h.omp.StartRPC(ctx, "--resume", fork)
	if err := rpc.Prompt(ctx, "/move "+other); err != nil {
		t.Fatal(err)
	}
	if err := rpc.Close(); err != nil {
		t.Fatal(err)
	}
	if p := sessionFileOf(t, h.omp.AgentDir(), fork); filepath.Base(filepath.Dir(p)) != "-other" {
		t.Fatalf("after /move the fork is at %s", p)
	}
	check("a moved session", fork)

	// omp gc archives cold sessions: gzip under archive/, the artifact
	// folder beside it, the original removed.
	cold := time.Now().Add(-40 * 24 * time.Hour)
	for _, p := range h.omp.SessionFiles() {
		if err := os.Chtimes(p, cold, cold); err != nil {
			t.Fatal(err)
		}
	}
	h.backup() // the mtimes as they are before gc
	if _, _, err := h.omp.Run(ctx, "gc", "--apply", "--archive", "--cold-archive-after-days", "1", "--retain-newest-global", "0", "--retain-newest-per-cwd", "0"); err != nil {
		t.Fatal(err)
	}
	archived, _ := filepath.Glob(filepath.Join(h.omp.AgentDir(), "archive", "sessions", "*", "*.jsonl.gz"))
	if len(archived) == 0 {
		t.Fatal("omp gc archived nothing")
	}
	check(fmt.Sprintf("%d sessions archived by omp gc", len(archived)), first)
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Two machines, each with `ompsync agent --pull` running and the real omp
// holding the same session open in RPC mode, both going on prompting: no
// pull changes a file omp holds, and once both omps close it every prompt
// and reply of both is in the final file, identical on both machines, and
// neither omp found its file changed under it.
func TestRealOmpSyncWithLiveSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real omp")
	}
	t.Parallel()
	o := omptest.Find(t)
	remoteURL := "file://" + filepath.Join(t.TempDir(), "remote")
	models := []*omptest.Model{omptest.NewModel(t), omptest.NewModel(t)}
	hosts := []*ompHost{
		newOmpHost(t, o, models[0], remoteURL, backend.S3Options{}, "laptop"),
		newOmpHost(t, o, models[1], remoteURL, backend.S3Options{}, "desk"),
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	if _, _, err := hosts[0].omp.Print(ctx, "started on the laptop"); err != nil {
		t.Fatal(err)
	}
	id := sessionIDs(t, hosts[0].omp)[0]
	var logs []*syncBuffer
	for _, h := range hosts {
		cmd, out := h.start("agent", "--pull", "--interval", "100ms", "--sync-pull-interval", "300ms")
		logs = append(logs, out)
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	allLogs := func() string {
		return "=== laptop\n" + logs[0].String() + "\n=== desk\n" + logs[1].String()
	}
	waitUntil(t, "the session on the desk", func() bool {
		files, _ := filepath.Glob(filepath.Join(hosts[1].omp.AgentDir(), "sessions", "*", "*_"+id+".jsonl"))
		return len(files) == 1
	})

	rpcs := make([]*omptest.RPC, 2)
	for i, h := range hosts {
		rpcs[i] = h.omp.StartRPC(ctx, "--resume", id)
	}
	// The laptop's omp resumed the session and sits idle: it holds no
	// descriptor on the file until it next appends, yet remembers its size.
	// The desk goes on; the laptop's pulls must wait.
	laptopFile := sessionFileOf(t, hosts[0].omp.AgentDir(), id)
	idle := readFile(t, laptopFile)
	var want []string
	for round := 1; round <= 2; round++ {
		prompt, reply := fmt.Sprintf("desk alone prompt %d", round), fmt.Sprintf("desk alone reply %d", round)
		models[1].Queue(omptest.Text(reply))
		if err := rpcs[1].Prompt(ctx, prompt); err != nil {
			t.Fatal(err)
		}
		want = append(want, prompt, reply)
	}
	waitUntil(t, "the laptop's pull to wait for its idle omp", func() bool {
		return strings.Contains(logs[0].String(), "waiting for the session to be released")
	})
	if got := readFile(t, laptopFile); !bytes.Equal(got, idle) {
		t.Fatalf("a pull changed the session an idle omp had resumed\n%s", allLogs())
	}
	for round := 1; round <= 3; round++ {
		for i, name := range []string{"laptop", "desk"} {
			prompt := fmt.Sprintf("%s prompt %d", name, round)
			reply := fmt.Sprintf("%s reply %d", name, round)
			models[i].Queue(omptest.Text(reply))
			if err := rpcs[i].Prompt(ctx, prompt); err != nil {
				t.Fatal(err)
			}
			want = append(want, prompt, reply)
		}
		time.Sleep(700 * time.Millisecond) // two pull intervals: each agent sees the other's turn
	}
	for i, r := range rpcs {
		if held, err := r.HoldsOpen(sessionFileOf(t, hosts[i].omp.AgentDir(), id)); err != nil || !held {
			t.Fatalf("%s: omp does not hold the session open (%v): the test would prove nothing", hosts[i].machine, err)
		}
	}
	for _, r := range rpcs {
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range rpcs {
		if r.ConflictLogged() {
			t.Fatalf("%s: omp logged %q: a pull changed the file it held\n%s", hosts[i].machine, omptest.ConflictMessage, allLogs())
		}
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		a := readFile(t, sessionFileOf(t, hosts[0].omp.AgentDir(), id))
		b := readFile(t, sessionFileOf(t, hosts[1].omp.AgentDir(), id))
		if bytes.Equal(a, b) && hasLines(want...)(a) {
			break
		}
		if time.Now().After(deadline) {
			for _, w := range want {
				t.Logf("laptop has %q: %v, desk: %v", w, bytes.Contains(a, []byte(w)), bytes.Contains(b, []byte(w)))
			}
			t.Fatalf("the machines did not converge on every prompt and reply\n%s", allLogs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(allLogs(), "waiting for the session to be released") {
		t.Errorf("no pull said it waited for the open session:\n%s", allLogs())
	}
	// The merged file is one omp resumes and appends to.
	resume(t, hosts[0].omp, id)
}

// A restore into a session the real omp holds open is refused, even with
// --force, naming omp's process; once omp exits the same restore merges.
func TestRealOmpRestoreRefusesHeldSession(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real omp")
	}
	t.Parallel()
	o := omptest.Find(t)
	remoteURL := "file://" + filepath.Join(t.TempDir(), "remote")
	model := omptest.NewModel(t)
	laptop := newOmpHost(t, o, model, remoteURL, backend.S3Options{}, "laptop")
	desk := newOmpHost(t, o, model, remoteURL, backend.S3Options{}, "desk")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	if _, _, err := laptop.omp.Print(ctx, "started on the laptop"); err != nil {
		t.Fatal(err)
	}
	id := sessionIDs(t, laptop.omp)[0]
	laptop.backup()
	if code, out := desk.ompsync("restore", id); code != 0 {
		t.Fatalf("first restore: exit %d\n%s", code, out)
	}
	rpc := desk.omp.StartRPC(ctx, "--resume", id)
	if err := rpc.Prompt(ctx, "on the desk"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := laptop.omp.Print(ctx, "--resume", id, "more on the laptop"); err != nil {
		t.Fatal(err)
	}
	laptop.backup()

	p := sessionFileOf(t, desk.omp.AgentDir(), id)
	held := readFile(t, p)
	for _, args := range [][]string{{"restore", id}, {"restore", "--force", id}} {
		code, out := desk.ompsync(args...)
		if code != 1 || !strings.Contains(out, fmt.Sprintf("pid %d", rpc.PID())) {
			t.Fatalf("%v while omp holds the file: exit %d, want 1 naming pid %d\n%s", args, code, rpc.PID(), out)
		}
		if got := readFile(t, p); !bytes.Equal(got, held) {
			t.Fatalf("%v changed a file omp holds open", args)
		}
	}
	if err := rpc.Prompt(ctx, "still saving"); err != nil {
		t.Fatal(err)
	}
	if err := rpc.Close(); err != nil {
		t.Fatal(err)
	}
	if rpc.ConflictLogged() {
		t.Fatalf("omp logged %q", omptest.ConflictMessage)
	}
	if !bytes.Contains(readFile(t, p), []byte("still saving")) {
		t.Fatal("omp's turn after the refused restores is not in its file")
	}

	// A file changed in the last 5 s may be one omp is still writing.
	if fi, err := os.Stat(p); err == nil {
		time.Sleep(time.Until(fi.ModTime().Add(5*time.Second + 100*time.Millisecond)))
	}
	if code, out := desk.ompsync("restore", id); code != 0 {
		t.Fatalf("restore after omp exited: exit %d\n%s", code, out)
	}
	merged := readFile(t, sessionFileOf(t, desk.omp.AgentDir(), id))
	if !hasLines("on the desk", "still saving", "more on the laptop")(merged) {
		t.Fatalf("the restore after omp exited did not merge both machines' turns")
	}
	resume(t, desk.omp, id)
}

// At start omp renames a session folder of the older naming
// (--<home>-work--) to the current one (-work): the backup follows the
// sessions to their new folder, records none as deleted, and restores them
// where omp now looks.
func TestRealOmpRenamesLegacyFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real omp")
	}
	t.Parallel()
	o := omptest.Find(t)
	model := omptest.NewModel(t)
	h := newOmpHost(t, o, model, "file://"+filepath.Join(t.TempDir(), "remote"), backend.S3Options{}, "laptop")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if _, _, err := h.omp.Print(ctx, "in the old folder"); err != nil {
		t.Fatal(err)
	}
	id := sessionIDs(t, h.omp)[0]
	sessions := filepath.Join(h.omp.AgentDir(), "sessions")
	legacy := "--" + strings.ReplaceAll(strings.TrimPrefix(h.omp.Dir, "/"), "/", "-") + "-work--"
	if err := os.Rename(filepath.Join(sessions, omptest.CwdDir), filepath.Join(sessions, legacy)); err != nil {
		t.Fatal(err)
	}
	h.backup()

	if _, _, err := h.omp.Print(ctx, "a new session starts: omp renames the old folder"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(sessions, legacy)); !os.IsNotExist(err) {
		t.Fatalf("omp did not rename the legacy folder %s (%v)", legacy, err)
	}
	if p := sessionFileOf(t, h.omp.AgentDir(), id); filepath.Base(filepath.Dir(p)) != omptest.CwdDir {
		t.Fatalf("the old session is at %s", p)
	}
	to := h.restoreAll(o, model)
	if code, out := h.ompsync("ls"); code != 0 || strings.Contains(out, "deleted") {
		t.Fatalf("ls after omp renamed the folder: exit %d\n%s", code, out)
	}
	resume(t, to, id)
}
