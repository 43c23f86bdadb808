package omptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ConflictMessage is what omp 18.2.3 logs when it finds its session file
// changed by another program before a rewrite (session-storage.ts); it then
// stops saving that session.
const ConflictMessage = "Session file changed before rewrite"

// Frame is one JSON line omp wrote on stdout in RPC mode: a response to a
// command, an agent event (agent_start, message_end, tool_execution_end,
// agent_end, ...), a notice or an extension UI request.
type Frame struct {
	Type string
	Raw  json.RawMessage
}

// Get decodes the frame's field name into v.
func (f Frame) Get(name string, v any) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(f.Raw, &m); err != nil {
		return err
	}
	raw, ok := m[name]
	if !ok {
		return fmt.Errorf("frame %s has no %q", f.Type, name)
	}
	return json.Unmarshal(raw, v)
}

// Response is omp's answer to one RPC command.
type Response struct {
	ID      string          `json:"id"`
	Command string          `json:"command"`
	Success bool            `json:"success"`
	Error   string          `json:"error"`
	Data    json.RawMessage `json:"data"`
}

// RPC is an omp process in RPC mode (omp --mode rpc): JSON commands on its
// stdin, responses and events on its stdout.
type RPC struct {
	home  *Home
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when omp has exited
	err   error         // omp's exit status, set before done closes

	mu      sync.Mutex
	frames  []Frame
	changed chan struct{} // closed and replaced when frames grows or omp exits
	stderr  bytes.Buffer
	nextID  int
	closed  bool
}

// StartRPC starts omp --mode rpc --model fake/fake-model args... in Cwd and
// waits for its "ready" frame (failing the test when ctx ends first). omp is
// killed when the test ends if Close was not called.
func (h *Home) StartRPC(ctx context.Context, args ...string) *RPC {
	t := h.t
	t.Helper()
	// Not bound to ctx: the process outlives the call; Close or the
	// cleanup ends it.
	cmd := h.Command(context.Background(), append([]string{"--mode", "rpc", "--model", ModelID}, args...)...)
	r := &RPC{home: h, cmd: cmd, done: make(chan struct{}), changed: make(chan struct{})}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.stdin = stdin
	cmd.Stderr = lockedWriter{r}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start omp rpc: %v", err)
	}
	go r.read(stdout)
	t.Cleanup(r.kill)
	if _, err := r.WaitFrame(ctx, 0, func(f Frame) bool { return f.Type == "ready" }); err != nil {
		t.Fatalf("omp rpc did not get ready: %v; stderr: %s", err, tail(r.Stderr(), 2000))
	}
	return r
}

// lockedWriter collects stderr under the RPC's lock.
type lockedWriter struct{ r *RPC }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.stderr.Write(p)
}

func (r *RPC) read(stdout io.Reader) {
	br := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			var head struct {
				Type   string `json:"type"`
				ID     string `json:"id"`
				Method string `json:"method"`
			}
			if json.Unmarshal(line, &head) == nil {
				r.add(Frame{Type: head.Type, Raw: append(json.RawMessage(nil), line...)})
				if head.Type == "extension_ui_request" {
					r.answerDialog(head.ID, head.Method)
				}
			}
		}
		if err != nil {
			break
		}
	}
	r.err = r.cmd.Wait()
	close(r.done)
	r.mu.Lock()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// answerDialog cancels a dialog omp asks the host for, so a turn never waits
// on a user; the request stays in Frames for a test to see.
func (r *RPC) answerDialog(id, method string) {
	switch method {
	case "select", "confirm", "input", "editor":
		_ = r.send(map[string]any{"type": "extension_ui_response", "id": id, "cancelled": true})
	}
}

func (r *RPC) add(f Frame) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, f)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *RPC) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("omptest: RPC closed")
	}
	_, err = r.stdin.Write(append(b, '\n'))
	return err
}

// PID is omp's process id.
func (r *RPC) PID() int { return r.cmd.Process.Pid }

// Frames returns a copy of every frame omp wrote so far.
func (r *RPC) Frames() []Frame {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Frame(nil), r.frames...)
}

// Stderr is what omp wrote on stderr so far.
func (r *RPC) Stderr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stderr.String()
}

// WaitFrame waits for the first frame at index from or later that match
// accepts, and returns its index. It fails when ctx ends or omp exits first.
func (r *RPC) WaitFrame(ctx context.Context, from int, match func(Frame) bool) (int, error) {
	for i := from; ; {
		r.mu.Lock()
		for ; i < len(r.frames); i++ {
			if match(r.frames[i]) {
				r.mu.Unlock()
				return i, nil
			}
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-r.done:
			// Frames read before the exit are all in; look once more.
			r.mu.Lock()
			for ; i < len(r.frames); i++ {
				if match(r.frames[i]) {
					r.mu.Unlock()
					return i, nil
				}
			}
			r.mu.Unlock()
			return 0, fmt.Errorf("omp exited (%v); stderr: %s", r.err, tail(r.Stderr(), 2000))
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-changed:
		}
	}
}

// call sends cmd with a fresh id and returns its response and the number of
// frames there were before it was sent.
func (r *RPC) call(ctx context.Context, cmd map[string]any) (Response, int, error) {
	r.mu.Lock()
	r.nextID++
	id := "omptest-" + strconv.Itoa(r.nextID)
	from := len(r.frames)
	r.mu.Unlock()
	msg := make(map[string]any, len(cmd)+1)
	for k, v := range cmd {
		msg[k] = v
	}
	msg["id"] = id
	if err := r.send(msg); err != nil {
		return Response{}, 0, err
	}
	var resp Response
	_, err := r.WaitFrame(ctx, from, func(f Frame) bool {
		if f.Type != "response" {
			return false
		}
		var got Response
		if json.Unmarshal(f.Raw, &got) != nil || got.ID != id {
			return false
		}
		resp = got
		return true
	})
	if err != nil {
		return Response{}, 0, fmt.Errorf("omp rpc %v: %w", cmd["type"], err)
	}
	if !resp.Success {
		return resp, from, fmt.Errorf("omp rpc %v: %s", cmd["type"], resp.Error)
	}
	return resp, from, nil
}

// Command sends one RPC command (a map with "type" and its fields, e.g.
// {"type": "set_session_name", "name": "x"}, {"type": "new_session"},
// {"type": "branch", "entryId": id}, {"type": "get_state"}) and returns
// omp's response; an unsuccessful response is an error.
func (r *RPC) Command(ctx context.Context, cmd map[string]any) (Response, error) {
	resp, _, err := r.call(ctx, cmd)
	return resp, err
}

// Prompt sends a prompt and waits until omp reports the turn finished: the
// final agent_end (one not marked isTerminal: false), or, for a slash
// command omp handles itself (/rename, /move, ...), its response saying no
// agent ran. Appends are synchronous in omp, so the turn's entries are in
// the session file when Prompt returns.
func (r *RPC) Prompt(ctx context.Context, text string) error {
	resp, from, err := r.call(ctx, map[string]any{"type": "prompt", "message": text})
	if err != nil {
		return err
	}
	var data struct {
		AgentInvoked *bool `json:"agentInvoked"`
	}
	_ = json.Unmarshal(resp.Data, &data)
	if data.AgentInvoked != nil && !*data.AgentInvoked {
		return nil
	}
	// From before the prompt was sent: its events may precede the
	// acknowledgement. Earlier turns ended before Prompt was called.
	var failed string
	_, err = r.WaitFrame(ctx, from, func(f Frame) bool {
		switch f.Type {
		case "agent_end":
			var terminal *bool
			_ = f.Get("isTerminal", &terminal)
			return terminal == nil || *terminal
		case "prompt_result": // the prompt ran no agent
			var id string
			_ = f.Get("id", &id)
			return id == resp.ID
		case "response": // a prompt that failed after its acknowledgement
			var late Response
			if json.Unmarshal(f.Raw, &late) == nil && late.ID == resp.ID && !late.Success {
				failed = late.Error
				return true
			}
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("omp rpc prompt %q: %w", text, err)
	}
	if failed != "" {
		return fmt.Errorf("omp rpc prompt %q: %s", text, failed)
	}
	return nil
}

// State is part of omp's get_state answer.
type State struct {
	SessionFile string `json:"sessionFile"`
	SessionID   string `json:"sessionId"`
	SessionName string `json:"sessionName"`
	IsStreaming bool   `json:"isStreaming"`
}

// State asks omp for its session state.
func (r *RPC) State(ctx context.Context) (State, error) {
	var s State
	resp, err := r.Command(ctx, map[string]any{"type": "get_state"})
	if err == nil {
		err = json.Unmarshal(resp.Data, &s)
	}
	return s, err
}

// Rename sets the session title (RPC set_session_name, source "user"),
// which omp writes into the title slot in place.
func (r *RPC) Rename(ctx context.Context, title string) error {
	_, err := r.Command(ctx, map[string]any{"type": "set_session_name", "name": title})
	return err
}

// Logged reports whether omp wrote s on stderr, in an RPC frame (omp sends
// store failures as "notice" frames), or in its log files under HOME.
func (r *RPC) Logged(s string) bool {
	if strings.Contains(r.Stderr(), s) {
		return true
	}
	for _, f := range r.Frames() {
		if bytes.Contains(f.Raw, []byte(s)) {
			return true
		}
	}
	return r.home.Logged(r.PID(), s)
}

// ConflictLogged reports whether omp logged "Session file changed before
// rewrite": it found its session file changed by someone else and stopped
// saving that session.
func (r *RPC) ConflictLogged() bool { return r.Logged(ConflictMessage) }

// Logged reports whether omp process pid (0: any) wrote s in a log file
// under HOME (~/.omp/logs/omp.<date>.<pid>.log).
func (h *Home) Logged(pid int, s string) bool {
	pattern := "omp.*.log*"
	if pid != 0 {
		pattern = "omp.*." + strconv.Itoa(pid) + ".log*"
	}
	files, _ := filepath.Glob(filepath.Join(h.LogDir(), pattern))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// Close ends omp the way a host does, by closing its stdin: omp finishes
// queued commands, appends its session_exit entry and exits. It waits up
// to 15 s, then kills omp. It returns omp's exit error, if any.
func (r *RPC) Close() error {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		_ = r.stdin.Close()
	}
	r.mu.Unlock()
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		r.kill()
		return errors.New("omp rpc did not exit within 15s of closing its stdin; killed")
	}
	return r.err
}

// Done is closed when omp has exited.
func (r *RPC) Done() <-chan struct{} { return r.done }

// kill ends omp and its process group at once.
func (r *RPC) kill() {
	select {
	case <-r.done:
		return
	default:
	}
	_ = killGroup(r.cmd)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
	}
}

// HoldsOpen reports whether omp has a descriptor open on the file at path,
// compared by device and inode through /proc/<pid>/fd (Linux only), so a
// file replaced under the same name does not count.
func (r *RPC) HoldsOpen(path string) (bool, error) {
	want, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	dir := "/proc/" + strconv.Itoa(r.PID()) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err == nil && os.SameFile(fi, want) { // os.SameFile compares device and inode
			return true, nil
		}
	}
	return false, nil
}
