// Package recall serves the backup to coding agents over MCP, read-only:
// its tools are thin layers over what ompsync grep, ls, cat --text and
// history read, with the same remote, decryption, cache and bounds.
package recall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/restore"
	"github.com/ompsync/ompsync/search"
	"github.com/ompsync/ompsync/transcript"
)

// Budget bounds the text of one tool result, in bytes.
const Budget = 32 << 10

// Source is how the tools reach the remote.
type Source struct {
	// Places opens the remote's agents (of one agent, when set).
	Places func(ctx context.Context, machine, agent string) ([]restore.Place, []string, error)
	// Cache opens an agent's search cache (nil, nil: none), as
	// restore.GrepAll takes it.
	Cache        func(agent string) (*search.Cache, error)
	Parallel     int
	MaxMergeSize int64
	// Redact masks what looks like a credential (mcp.redact).
	Redact bool
}

// NewServer is the MCP server with the four tools.
func NewServer(src Source, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "ompsync", Version: version}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "search", Description: SearchHelp}, src.search)
	mcp.AddTool(s, &mcp.Tool{Name: "list_sessions", Description: ListHelp}, src.list)
	mcp.AddTool(s, &mcp.Tool{Name: "read_session", Description: ReadHelp}, src.read)
	mcp.AddTool(s, &mcp.Tool{Name: "session_history", Description: HistoryHelp}, src.history)
	return s
}

// The tools' descriptions, also printed by ompsync mcp --help.
const (
	SearchHelp  = `Search the text of every coding-agent session ever backed up, on every machine (including sessions deleted locally): what users and models wrote, reasoning, tool calls and results. Use it to recall past work ("what did we decide about X"). pattern is a fixed string, or a Go RE2 regular expression with regexp=true; filter by agent (omp, pi, claude, codex), project (substring), machine, since/until (RFC 3339 or a duration back from now like 7d). Returns matches (session id, title, project, time, role, entry id, snippet) and the total; a result holds at most 32 KiB: pass next_cursor back as cursor for the next page. Cost: the first search reads every session from the remote (a LIST and GET per machine, then each copy's chunks); later ones read only the catalogs and new chunks, through the local cache.`
	ListHelp    = `List the backed-up sessions of every machine, newest first: id, agent, title, project, machines, size, last change, state (present, archived, deleted). Filters as search. At most 32 KiB a result; pass next_cursor back as cursor. Cost: one LIST and one GET per machine, however many sessions.`
	ReadHelp    = `Read one backed-up session as a readable transcript (time, [entry id], role, text of each entry; tool calls summed up), by id or id prefix (from search or list_sessions). At most 32 KiB a result, from line (0 first) or from a few lines before the first line holding around (an entry id from search, or any text); pass next_line back as line to continue. Cost: the session's copies are fetched whole and verified (its size in bytes from the remote).`
	HistoryHelp = `The copies the backup holds of one session: per machine and generation, when each began and why, size, last upload, and whether it is current; at most 32 KiB, the newest copies kept. Cost: one LIST and one GET per machine and the session's meta objects.`
)

// Filter narrows search and list_sessions.
type Filter struct {
	Agent   string `json:"agent,omitempty" jsonschema:"only this agent's sessions: omp, pi, claude or codex"`
	Project string `json:"project,omitempty" jsonschema:"only sessions whose project contains this text"`
	Machine string `json:"machine,omitempty" jsonschema:"only this machine's copies"`
	Since   string `json:"since,omitempty" jsonschema:"from this time on: RFC 3339 or a duration back from now (3h, 7d)"`
	Until   string `json:"until,omitempty" jsonschema:"up to this time: RFC 3339 or a duration back from now"`
	Cursor  string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous page"`
}

// SearchIn is search's input.
type SearchIn struct {
	Pattern    string `json:"pattern" jsonschema:"the text to find (a fixed string unless regexp)"`
	Regexp     bool   `json:"regexp,omitempty" jsonschema:"pattern is a Go RE2 regular expression"`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"match without regard to case"`
	Filter
}

// Match is one matching line.
type Match struct {
	Session string    `json:"session"`
	Agent   string    `json:"agent,omitempty"`
	Title   string    `json:"title,omitempty"`
	Project string    `json:"project,omitempty"`
	Time    time.Time `json:"time,omitzero"`
	Role    string    `json:"role"`
	Entry   string    `json:"entry,omitempty"`
	Snippet string    `json:"snippet"`
	// Older: only an older copy of the session holds this line (a rewrite
	// or a compaction replaced it since).
	Older bool `json:"older,omitempty"`
}

type filter struct {
	since, until time.Time
	project      string
	cursor       int
}

func (f Filter) parse() (filter, error) {
	out := filter{project: f.Project}
	var err error
	now := time.Now()
	if f.Since != "" {
		if out.since, err = restore.ParseAt(f.Since, now); err != nil {
			return out, fmt.Errorf("since: %w", err)
		}
	}
	if f.Until != "" {
		if out.until, err = restore.ParseAt(f.Until, now); err != nil {
			return out, fmt.Errorf("until: %w", err)
		}
	}
	if f.Cursor != "" {
		if out.cursor, err = strconv.Atoi(f.Cursor); err != nil || out.cursor < 0 {
			return out, fmt.Errorf("cursor %q: pass next_cursor of the previous result, or none", f.Cursor)
		}
	}
	return out, nil
}

// in reports whether a session or match of that time and project passes.
func (f filter) in(t time.Time, project string) bool {
	return (f.since.IsZero() || !t.Before(f.since)) && (f.until.IsZero() || !t.After(f.until)) && strings.Contains(project, f.project)
}

// projectOf is a session's project as the tools show it ("" for none).
func projectOf(id *project.ID) string {
	if id == nil {
		return ""
	}
	return id.String()
}

func (s Source) search(ctx context.Context, _ *mcp.CallToolRequest, in SearchIn) (*mcp.CallToolResult, any, error) {
	if in.Pattern == "" {
		return nil, nil, errors.New("pattern is empty: give the text to find")
	}
	f, err := in.parse()
	if err != nil {
		return nil, nil, err
	}
	m, err := search.Compile(search.Pattern{Text: in.Pattern, IgnoreCase: in.IgnoreCase, Regexp: in.Regexp})
	if err != nil {
		return nil, nil, fmt.Errorf("pattern: %w", err)
	}
	places, problems, err := s.Places(ctx, in.Machine, in.Agent)
	if err != nil {
		return nil, nil, err
	}
	opts := restore.GrepOptions{Pattern: m, Since: f.since}
	opts.Options = restore.Options{Machine: in.Machine, IncludeDeleted: true, Parallel: s.Parallel}
	pg := &page[Match]{cursor: f.cursor}
	emit := func(gm restore.GrepMatch) error {
		p := projectOf(gm.Project)
		if !f.in(gm.Time, p) || !pg.take() {
			return nil
		}
		pg.add(Match{Session: gm.Session, Agent: gm.Agent, Title: gm.Title, Project: p, Time: gm.Time, Role: gm.Label(), Entry: gm.Entry, Snippet: m.Excerpt(gm.Text), Older: gm.Older})
		return nil
	}
	rep, err := restore.GrepAll(ctx, places, nil, opts, s.Cache, emit)
	if err != nil {
		return nil, nil, err
	}
	problems = append(problems, rep.Problems...)
	return s.result(struct {
		Total      int      `json:"total"`
		Matches    []Match  `json:"matches"`
		NextCursor string   `json:"next_cursor,omitempty"`
		Problems   []string `json:"problems,omitempty"`
	}{pg.total, pg.items, pg.nextCursor(), problems})
}

// page is one page of a paged result: the results from cursor on that fit
// in Budget, and the count of all.
type page[T any] struct {
	items                     []T
	cursor, total, size, next int // next: 1 + the index of the first result left out, 0 for none
}

// take counts a result and says whether it belongs on this page.
func (p *page[T]) take() bool {
	p.total++
	return p.total > p.cursor && p.next == 0
}

// add puts a taken result on the page, or ends the page before it when it
// does not fit (with room for the envelope).
func (p *page[T]) add(item T) {
	b, _ := json.Marshal(item)
	if p.size+len(b) > Budget-1024 {
		p.next = p.total
		return
	}
	p.size += len(b)
	p.items = append(p.items, item)
}

// nextCursor is the cursor of the next page, "" after the last.
func (p *page[T]) nextCursor() string {
	if p.next == 0 {
		return ""
	}
	return strconv.Itoa(p.next - 1)
}

// Session is one session of list_sessions.
type Session struct {
	ID       string    `json:"id"`
	Agent    string    `json:"agent"`
	Title    string    `json:"title,omitempty"`
	Project  string    `json:"project,omitempty"`
	Machines []string  `json:"machines"`
	Size     int64     `json:"size"`
	Mtime    time.Time `json:"last_change"`
	State    string    `json:"state"`
}

func (s Source) list(ctx context.Context, _ *mcp.CallToolRequest, in Filter) (*mcp.CallToolResult, any, error) {
	f, err := in.parse()
	if err != nil {
		return nil, nil, err
	}
	places, problems, err := s.Places(ctx, in.Machine, in.Agent)
	if err != nil {
		return nil, nil, err
	}
	list, more, err := restore.ListAll(ctx, places, in.Machine)
	if err != nil {
		return nil, nil, err
	}
	problems = append(problems, more...)
	pg := &page[Session]{cursor: f.cursor}
	for _, l := range list {
		p := projectOf(l.Project)
		if f.in(l.Mtime, p) && pg.take() {
			pg.add(Session{ID: l.ID, Agent: l.Agent, Title: l.Title, Project: p, Machines: l.Machines, Size: l.Size, Mtime: l.Mtime, State: l.State})
		}
	}
	return s.result(struct {
		Total      int       `json:"total"`
		Sessions   []Session `json:"sessions"`
		NextCursor string    `json:"next_cursor,omitempty"`
		Problems   []string  `json:"problems,omitempty"`
	}{pg.total, pg.items, pg.nextCursor(), problems})
}

// ReadIn is read_session's input.
type ReadIn struct {
	ID      string `json:"id" jsonschema:"the session's id or a prefix of it"`
	Agent   string `json:"agent,omitempty" jsonschema:"the agent whose session it is, when ids of two agents meet"`
	Machine string `json:"machine,omitempty" jsonschema:"that machine's copy alone"`
	Line    int    `json:"line,omitempty" jsonschema:"the transcript line to start at (0 first); next_line of the previous result"`
	Around  string `json:"around,omitempty" jsonschema:"start a few lines before the first line holding this text: an entry id from search, or any text"`
}

// before is how many lines a window around a line starts before it.
const before = 5

// errFull stops rendering a transcript past the budget.
var errFull = errors.New("budget reached")

// window keeps the transcript lines of one page.
type window struct {
	in         ReadIn
	line, from int
	partial    []byte
	out        bytes.Buffer
	next       int
	ring       []string
	found      bool
}

func (w *window) Write(p []byte) (int, error) {
	for l := range bytes.Lines(p) {
		w.partial = append(w.partial, l...)
		if l[len(l)-1] != '\n' {
			break // the last line goes on in the next write
		}
		if err := w.take(string(w.partial)); err != nil {
			return 0, err
		}
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

func (w *window) take(l string) error {
	defer func() { w.line++ }()
	if w.in.Around != "" && !w.found {
		if !strings.Contains(l, w.in.Around) {
			w.ring = append(w.ring, l)
			if len(w.ring) > before {
				w.ring = w.ring[1:]
			}
			return nil
		}
		w.found = true
		w.from = w.line - len(w.ring)
		for _, r := range w.ring {
			w.out.WriteString(r)
		}
	} else if w.in.Around == "" && w.line < w.in.Line {
		return nil
	}
	if w.out.Len()+len(l) > Budget-1024 && w.out.Len() > 0 {
		w.next = w.line // past the first line: never 0
		return errFull
	}
	if len(l) > Budget-1024 {
		l = l[:Budget-1024] + "...\n"
	}
	w.out.WriteString(l)
	return nil
}

func (s Source) read(ctx context.Context, _ *mcp.CallToolRequest, in ReadIn) (*mcp.CallToolResult, any, error) {
	if in.Line < 0 {
		return nil, nil, errors.New("line is negative: give 0 or next_line of the previous result")
	}
	pl, id, opts, problems, err := s.find(ctx, in.ID, in.Agent, in.Machine)
	if err != nil {
		return nil, nil, err
	}
	pr, more, err := restore.Cat(ctx, pl.Repo, id, opts)
	problems = append(problems, more...)
	if err != nil {
		return nil, nil, err
	}
	defer pr.Close()
	w := &window{in: in, from: in.Line}
	if err := pr.Transcript(w, transcript.RenderOptions{EntryIDs: true}); err != nil && !errors.Is(err, errFull) {
		return nil, nil, err
	}
	if in.Around != "" && !w.found {
		return nil, nil, fmt.Errorf("no line of session %s holds %q: search for it first, or read from a line", id, in.Around)
	}
	out := struct {
		Session    string   `json:"session"`
		Agent      string   `json:"agent"`
		FromLine   int      `json:"from_line"`
		Transcript string   `json:"transcript"`
		NextLine   int      `json:"next_line,omitempty"`
		Problems   []string `json:"problems,omitempty"`
	}{Session: id, Agent: pl.Store.Name(), FromLine: w.from, Transcript: w.out.String(), NextLine: w.next, Problems: problems}
	return s.result(out)
}

// HistoryIn is session_history's input.
type HistoryIn struct {
	ID      string `json:"id" jsonschema:"the session's id or a prefix of it"`
	Agent   string `json:"agent,omitempty" jsonschema:"the agent whose session it is"`
	Machine string `json:"machine,omitempty" jsonschema:"only this machine's copies"`
}

func (s Source) history(ctx context.Context, _ *mcp.CallToolRequest, in HistoryIn) (*mcp.CallToolResult, any, error) {
	pl, id, opts, problems, err := s.find(ctx, in.ID, in.Agent, in.Machine)
	if err != nil {
		return nil, nil, err
	}
	h, more, err := restore.History(ctx, pl.Repo, id, opts)
	problems = append(problems, more...)
	if err != nil {
		return nil, nil, err
	}
	if keepNewest(h, Budget-1024) {
		problems = append(problems, "older copies left out to stay within 32 KiB")
	}
	out := struct {
		History  *restore.SessionHistory `json:"history"`
		Problems []string                `json:"problems,omitempty"`
	}{h, problems}
	return s.result(out)
}

// keepNewest drops h's oldest copies (by when each began, whatever its
// machine: the copies are ordered by machine first) until its JSON is
// under size, keeping at least one, and reports whether it dropped any.
func keepNewest(h *restore.SessionHistory, size int) (dropped bool) {
	for len(h.Copies) > 1 {
		if b, _ := json.Marshal(h); len(b) < size {
			break
		}
		oldest := 0
		for i, c := range h.Copies {
			if c.Started.Before(h.Copies[oldest].Started) {
				oldest = i
			}
		}
		h.Copies, dropped = slices.Delete(h.Copies, oldest, oldest+1), true
	}
	return dropped
}

// find is the place and id of the session prefix names (read_session,
// session_history), with the options to read it by.
func (s Source) find(ctx context.Context, prefix, agent, machine string) (restore.Place, string, restore.Options, []string, error) {
	opts := restore.Options{Machine: machine, Parallel: s.Parallel, MaxMergeSize: s.MaxMergeSize}
	if prefix == "" {
		return restore.Place{}, "", opts, nil, errors.New("id is empty: give a session id or prefix (from search or list_sessions)")
	}
	places, problems, err := s.Places(ctx, machine, agent)
	if err != nil {
		return restore.Place{}, "", opts, nil, err
	}
	pl, id, err := restore.Find(ctx, places, prefix, opts)
	if err != nil {
		return pl, "", opts, nil, oneLine(err)
	}
	opts.Store = pl.Store
	return pl, id, opts, problems, nil
}

// result is v as JSON text, credentials masked when s.Redact.
func (s Source) result(v any) (*mcp.CallToolResult, any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	text := string(b)
	if s.Redact {
		var n int
		text, n = Redact(text)
		if n > 0 {
			text = fmt.Sprintf(`{"redacted":%d,"result":%s}`, n, text)
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
}

// oneLine is err's first line: an ambiguous prefix names its candidates
// on one.
func oneLine(err error) error {
	if i := strings.IndexByte(err.Error(), '\n'); i >= 0 {
		return errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return err
}
