package omptest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// machine is one fake model and one HOME running the real omp, with a
// deadline for the test (omp starts in 1-2 s; a loaded CI machine is slower).
func machine(t *testing.T) (*Home, *Model, context.Context) {
	t.Helper()
	omp := Find(t)
	m := NewModel(t)
	h := NewHome(t, omp, m)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return h, m, ctx
}

// entry is the part of a session line the tests look at.
type entry struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Title   string `json:"title"`
	Source  string `json:"source"`
	Message *struct {
		Role     string `json:"role"`
		ToolName string `json:"toolName"`
		Content  []struct {
			Type string `json:"type"`
			Text string `json:"text"`
			Data string `json:"data"`
		} `json:"content"`
	} `json:"message"`
}

func (e entry) text() string {
	if e.Message == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range e.Message.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// readSession returns a session file's bytes and its entries, one per line.
func readSession(t *testing.T, path string) ([]byte, []entry) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("%s does not end in a newline", path)
	}
	var out []entry
	for i, line := range bytes.Split(b[:len(b)-1], []byte("\n")) {
		var e entry
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("%s line %d: %v: %s", path, i, err, line)
		}
		out = append(out, e)
	}
	return b, out
}

// messages returns the text of the message entries of role.
func messages(entries []entry, role string) []string {
	var out []string
	for _, e := range entries {
		if e.Type == "message" && e.Message.Role == role {
			out = append(out, e.text())
		}
	}
	return out
}

// onlySession returns the one session file, failing when there are others.
func onlySession(t *testing.T, h *Home) string {
	t.Helper()
	files := h.SessionFiles()
	if len(files) != 1 {
		t.Fatalf("want 1 session file, have %q", files)
	}
	if dir := filepath.Dir(files[0]); dir != h.SessionDir() {
		t.Fatalf("session in %s, want %s", dir, h.SessionDir())
	}
	return files[0]
}

func TestPrintWritesOneSession(t *testing.T) {
	h, m, ctx := machine(t)
	m.Queue(Text("reply-print-one"))
	out, _, err := h.Print(ctx, "prompt-print-one")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "reply-print-one") {
		t.Errorf("stdout %q lacks the reply", out)
	}
	b, entries := readSession(t, onlySession(t, h))
	if i := bytes.IndexByte(b, '\n'); i != 255 || entries[0].Type != "title" {
		t.Errorf("line 0 is %d bytes of type %q, want the 256-byte title slot", i+1, entries[0].Type)
	}
	if entries[1].Type != "session" || entries[1].ID == "" {
		t.Errorf("line 1 = %+v, want the session header", entries[1])
	}
	if got := messages(entries, "user"); !slices.Equal(got, []string{"prompt-print-one"}) {
		t.Errorf("user messages %q", got)
	}
	if got := messages(entries, "assistant"); !slices.Equal(got, []string{"reply-print-one"}) {
		t.Errorf("assistant messages %q", got)
	}
	if got := m.Prompts(); !slices.Equal(got, []string{"prompt-print-one"}) {
		t.Errorf("model saw prompts %q", got)
	}
	if m.Pending() != 0 {
		t.Errorf("%d replies left in the queue", m.Pending())
	}
}

func TestResumeAppendsToTheSameFile(t *testing.T) {
	h, m, ctx := machine(t)
	if _, _, err := h.Print(ctx, "first-prompt"); err != nil {
		t.Fatal(err)
	}
	path := onlySession(t, h)
	before, entries := readSession(t, path)
	id := entries[1].ID
	if _, _, err := h.Print(ctx, "--resume", id[:13], "second-prompt"); err != nil {
		t.Fatal(err)
	}
	if got := onlySession(t, h); got != path {
		t.Fatalf("resume wrote %s, want %s", got, path)
	}
	after, entries := readSession(t, path)
	if !bytes.HasPrefix(after, before) {
		t.Errorf("resume changed the file's first %d bytes instead of appending", len(before))
	}
	if got := messages(entries, "user"); !slices.Equal(got, []string{"first-prompt", "second-prompt"}) {
		t.Errorf("user messages %q", got)
	}
	if got := messages(entries, "assistant"); !slices.Equal(got, []string{"ok 0001", "ok 0002"}) {
		t.Errorf("assistant messages %q", got)
	}
	// The resumed turn was sent the first one as context.
	if reqs := m.Requests(); len(reqs) != 2 || !bytes.Contains(reqs[1].Body, []byte("ok 0001")) {
		t.Errorf("the resumed request lacks the first turn (%d requests)", len(reqs))
	}
}

func TestToolCallRecordsResult(t *testing.T) {
	h, m, ctx := machine(t)
	// The host's API keys must not reach omp or its tools.
	t.Setenv("OPENAI_API_KEY", "leaked-key")
	written := filepath.Join(h.Cwd, "written.txt")
	m.Queue(Bash("echo marker-tool key=${OPENAI_API_KEY:-none}"), Write(written, "written-by-the-model\n"), Text("done-after-tool"))
	if _, _, err := h.Print(ctx, "run the tool"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(written); err != nil || string(b) != "written-by-the-model\n" {
		t.Errorf("write tool: %q, %v", b, err)
	}
	_, entries := readSession(t, onlySession(t, h))
	var results []string
	for _, e := range entries {
		if e.Type == "message" && e.Message.Role == "toolResult" && e.Message.ToolName == "bash" {
			results = append(results, e.text())
		}
	}
	if len(results) != 1 || !strings.Contains(results[0], "marker-tool key=none") {
		t.Errorf("bash toolResult entries %q, want one with marker-tool key=none", results)
	}
	if got := messages(entries, "assistant"); len(got) != 3 || got[2] != "done-after-tool" {
		t.Errorf("assistant messages %q", got)
	}
	reqs := m.Requests()
	if len(reqs) != 3 || reqs[0].ToolResult != "" || !strings.Contains(reqs[1].ToolResult, "marker-tool") || reqs[2].ToolResult == "" {
		t.Fatalf("requests %+v", reqs)
	}
	if reqs[2].Prompt != "run the tool" || !slices.Equal(m.Prompts(), []string{"run the tool"}) {
		t.Errorf("prompts %q, follow-up prompt %q", m.Prompts(), reqs[2].Prompt)
	}
}

func TestImageReadStoresBlob(t *testing.T) {
	h, m, ctx := machine(t)
	pic := filepath.Join(h.Cwd, "pic.png")
	if err := WritePNG(pic, 1); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(pic)
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	m.Queue(Read(pic))
	if _, _, err := h.Print(ctx, "look at pic.png"); err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(h.AgentDir(), "blobs", hash)
	fi, err := os.Stat(blob)
	if err != nil {
		t.Fatal(err)
	}
	link, err := os.Stat(blob + ".png")
	if err != nil || !os.SameFile(fi, link) {
		t.Errorf("%s.png is not a hardlink of the blob: %v", blob, err)
	}
	b, _ := readSession(t, onlySession(t, h))
	if !bytes.Contains(b, []byte("blob:sha256:"+hash)) {
		t.Error("the session does not reference the blob")
	}
}

func TestLongTextReply(t *testing.T) {
	h, m, ctx := machine(t)
	long := LongText("long-reply-marker", 100<<10)
	m.Queue(long)
	if _, _, err := h.Print(ctx, "write a lot"); err != nil {
		t.Fatal(err)
	}
	_, entries := readSession(t, onlySession(t, h))
	if got := messages(entries, "assistant"); len(got) != 1 || got[0] != long.Text {
		t.Errorf("the stored reply is not the %d-byte long text", len(long.Text))
	}
}

func TestRPCHoldsSessionFileWhileIdle(t *testing.T) {
	h, m, ctx := machine(t)
	r := h.StartRPC(ctx)
	if err := r.Prompt(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	st, err := r.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := onlySession(t, h)
	if st.SessionFile != path {
		t.Fatalf("omp reports %s, the only file is %s", st.SessionFile, path)
	}
	// omp publishes a new session's first turn whole (temp file, rename)
	// and opens its append descriptor only at the next write.
	if held, err := r.HoldsOpen(path); err != nil || held {
		t.Errorf("after the first turn: held=%v (%v), omp 18.2.3 holds no descriptor yet", held, err)
	}
	if err := r.Prompt(ctx, "two"); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(path)
	for range 3 { // idle: no lock, the descriptor stays
		time.Sleep(200 * time.Millisecond)
		if held, err := r.HoldsOpen(path); err != nil || !held {
			t.Fatalf("idle after the second turn: held=%v (%v), want omp to hold the file", held, err)
		}
		if locks, _ := filepath.Glob(filepath.Join(h.SessionDir(), ".*.lock")); len(locks) > 0 {
			t.Errorf("idle omp left lock files %q", locks)
		}
	}
	if err := r.Prompt(ctx, "three"); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if held, _ := r.HoldsOpen(path); !held || !os.SameFile(before, after) {
		t.Errorf("after the third turn: held=%v, same inode=%v", held, os.SameFile(before, after))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	_, entries := readSession(t, path)
	if got := messages(entries, "user"); !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Errorf("user messages %q", got)
	}
	if last := entries[len(entries)-1]; last.Type != "custom" {
		t.Errorf("last entry %+v, want omp's session_exit", last)
	}
	if got := m.Prompts(); !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Errorf("model saw %q", got)
	}
}

// slot decodes a session file's 256-byte title slot.
func slot(t *testing.T, b []byte) entry {
	t.Helper()
	if len(b) < 256 || b[255] != '\n' {
		t.Fatalf("line 0 is not a 256-byte slot: %.300q", b)
	}
	var e entry
	if err := json.Unmarshal(b[:255], &e); err != nil || e.Type != "title" {
		t.Fatalf("title slot %q: %v", b[:255], err)
	}
	return e
}

func TestRPCRenameRewritesTitleSlotInPlace(t *testing.T) {
	h, _, ctx := machine(t)
	r := h.StartRPC(ctx)
	for _, p := range []string{"one", "two"} {
		if err := r.Prompt(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	path := onlySession(t, h)
	before, _ := readSession(t, path)
	fiBefore, _ := os.Stat(path)
	const title = "Renamed by omptest"
	if err := r.Rename(ctx, title); err != nil {
		t.Fatal(err)
	}
	after, entries := readSession(t, path)
	fiAfter, _ := os.Stat(path)
	if !os.SameFile(fiBefore, fiAfter) {
		t.Error("rename replaced the file; want an in-place write")
	}
	if s := slot(t, after); s.Title != title || s.Source != "user" {
		t.Errorf("title slot %+v", s)
	}
	if len(after) <= len(before) || !bytes.Equal(after[256:len(before)], before[256:]) {
		t.Error("rename changed bytes after the slot; want only the slot rewritten and an entry appended")
	}
	if last := entries[len(entries)-1]; last.Type != "title_change" || last.Title != title {
		t.Errorf("last entry %+v, want a title_change", last)
	}
	if st, err := r.State(ctx); err != nil || st.SessionName != title {
		t.Errorf("state %+v, %v", st, err)
	}
}

func TestRPCRenameAsksModelForTitle(t *testing.T) {
	h, m, ctx := machine(t)
	m.SetTitle("Cats And Dogs")
	r := h.StartRPC(ctx)
	if err := r.Prompt(ctx, "tell me about cats and dogs"); err != nil {
		t.Fatal(err)
	}
	m.Queue(Text("reply-for-the-next-turn"))
	// /rename with no title generates one in the background; a title
	// request must not take the queued reply.
	if err := r.Prompt(ctx, "/rename"); err != nil {
		t.Fatal(err)
	}
	path := onlySession(t, h)
	for {
		b, _ := os.ReadFile(path)
		if len(b) >= 256 && slot(t, b).Title == "Cats And Dogs" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the title slot never got the model's title: %.256q", b)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if m.Pending() != 1 {
		t.Errorf("%d replies queued, want the title request to leave 1", m.Pending())
	}
	if err := r.Prompt(ctx, "and birds"); err != nil {
		t.Fatal(err)
	}
	if got := m.Replies(); !slices.Equal(got, []string{"ok 0001", "reply-for-the-next-turn"}) {
		t.Errorf("replies %q", got)
	}
	titles := 0
	for _, req := range m.Requests() {
		if req.Title {
			titles++
		}
	}
	if titles != 1 {
		t.Errorf("%d title requests, want 1", titles)
	}
}

func TestRPCConflictLogged(t *testing.T) {
	h, _, ctx := machine(t)
	r := h.StartRPC(ctx)
	for _, p := range []string{"one", "two"} {
		if err := r.Prompt(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if r.ConflictLogged() {
		t.Fatal("conflict logged before any foreign write")
	}
	// Another program appends while omp holds the file; omp's next rewrite
	// (a /move rewrites the header) finds the size changed and refuses.
	f, err := os.OpenFile(onlySession(t, h), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(`{"type":"custom","customType":"foreign","id":"deadbeef","parentId":null,"timestamp":"2026-12-01T00:00:00.000Z"}` + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(h.Dir, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.Prompt(ctx, "/move "+other); err != nil {
		t.Fatal(err)
	}
	if !r.ConflictLogged() {
		t.Fatalf("no conflict logged; stderr: %s", r.Stderr())
	}
	if !h.Logged(r.PID(), ConflictMessage) {
		t.Error("the conflict is not in omp's log file")
	}
	if err := r.Close(); err == nil {
		t.Error("omp exited 0 with its session unsaved")
	}
}

// TestModelAlone drives the fake model over HTTP, without omp.
func TestModelAlone(t *testing.T) {
	m := NewModel(t)
	m.Queue(Text("first"), Bash("ls"))
	post := func(body string) []byte {
		t.Helper()
		resp, err := http.Post(m.BaseURL()+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		return b
	}
	// A title request is answered without touching the queue.
	title := post(`{"stream":true,"messages":[{"role":"system","content":"Answer inside the <title> tag."},{"role":"user","content":"<user>\nhi\n</user>"}]}`)
	if !bytes.Contains(title, []byte("Fake title 1")) || m.Pending() != 2 {
		t.Fatalf("title reply %s, %d queued", title, m.Pending())
	}
	// Streamed text: SSE data lines, content deltas, usage, [DONE].
	stream := post(`{"stream":true,"messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"<system-reminder>\nToday\n</system-reminder>\nhello"}]}],"tools":[{"type":"function","function":{"name":"bash"}}]}`)
	var text strings.Builder
	var done, usage bool
	sc := bufio.NewScanner(bytes.NewReader(stream))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		for _, c := range chunk.Choices {
			text.WriteString(c.Delta.Content)
		}
		usage = usage || chunk.Usage != nil
	}
	if text.String() != "first" || !done || !usage {
		t.Errorf("stream gave %q, done=%v, usage=%v", text.String(), done, usage)
	}
	// Not streamed: the queued tool call, then the default reply.
	call := post(`{"messages":[{"role":"user","content":"again"}]}`)
	if !bytes.Contains(call, []byte(`"tool_calls"`)) || !bytes.Contains(call, []byte(`\"command\":\"ls\"`)) {
		t.Errorf("tool call reply %s", call)
	}
	follow := post(`{"messages":[{"role":"user","content":"again"},{"role":"assistant","content":null},{"role":"tool","content":"file-list"}]}`)
	if !bytes.Contains(follow, []byte(`"ok 0001"`)) {
		t.Errorf("default reply %s", follow)
	}
	reqs := m.Requests()
	if len(reqs) != 4 || !reqs[0].Title || reqs[1].Prompt != "hello" || reqs[3].ToolResult != "file-list" || reqs[3].Prompt != "again" {
		t.Errorf("requests %+v", reqs)
	}
	if got := m.Prompts(); !slices.Equal(got, []string{"hello", "again"}) {
		t.Errorf("prompts %q", got)
	}
}

func TestLocateSaysHowToInstall(t *testing.T) {
	for _, prefix := range []string{"", t.TempDir()} {
		_, err := Locate(prefix)
		if err == nil || !strings.Contains(err.Error(), "npm install --prefix") || !strings.Contains(err.Error(), EnvPrefix) {
			t.Errorf("Locate(%q) = %v, want how to install", prefix, err)
		}
	}
}

func TestForkThenArchive(t *testing.T) {
	h, _, ctx := machine(t)
	if _, _, err := h.Print(ctx, "to be forked"); err != nil {
		t.Fatal(err)
	}
	src := onlySession(t, h)
	_, entries := readSession(t, src)
	id := entries[1].ID
	if _, _, err := h.Print(ctx, "--fork", id, "in the fork"); err != nil {
		t.Fatal(err)
	}
	files := h.SessionFiles()
	if len(files) != 2 {
		t.Fatalf("after --fork: %q", files)
	}
	fork := files[0]
	if fork == src {
		fork = files[1]
	}
	b, _ := readSession(t, fork)
	if !bytes.Contains(b, []byte(`"parentSession":"`)) || !bytes.Contains(b, []byte("in the fork")) {
		t.Errorf("fork %s lacks parentSession or its prompt", fork)
	}
	// gc archives only sessions past a 5-minute write grace: age them.
	old := time.Now().Add(-40 * 24 * time.Hour)
	for _, f := range files {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := h.Run(ctx, "gc", "--apply", "--archive", "--cold-archive-after-days", "1",
		"--retain-newest-global", "0", "--retain-newest-per-cwd", "0"); err != nil {
		t.Fatal(err)
	}
	if left := h.SessionFiles(); len(left) != 0 {
		t.Errorf("gc left %q", left)
	}
	for _, f := range files {
		gz := filepath.Join(h.AgentDir(), "archive", "sessions", CwdDir, filepath.Base(f)+".gz")
		if _, err := os.Stat(gz); err != nil {
			t.Error(err)
		}
	}
}
