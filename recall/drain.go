package recall

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Drained is t whose end of input waits until every call read has been
// answered: the SDK cancels the calls in flight when its read ends and
// drops their answers, so a client that writes its requests and closes
// stdin (ompsync mcp < requests) got none.
func Drained(t mcp.Transport) mcp.Transport { return drainTransport{t} }

type drainTransport struct{ mcp.Transport }

func (t drainTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &drainConn{Connection: c, pending: map[jsonrpc.ID]bool{}, answered: make(chan struct{}), closed: make(chan struct{})}, nil
}

// drainConn keeps the calls read and not yet answered, by id: a client
// that reuses an id still in flight gets one answer (the SDK's), so a
// count would wait for one that never comes.
type drainConn struct {
	mcp.Connection
	mu        sync.Mutex
	pending   map[jsonrpc.ID]bool
	ended     bool          // the input ended
	answered  chan struct{} // closed once the input ended and nothing is pending
	closeOnce sync.Once
	closed    chan struct{}
}

func (c *drainConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		c.update(func() { c.pending[req.ID] = true })
	}
	if err != nil {
		c.update(func() { c.ended = true })
		// Close (the SDK's, once its writes fail) or ctx ends the wait.
		select {
		case <-c.answered:
		case <-c.closed:
		case <-ctx.Done():
		}
	}
	return msg, err
}

func (c *drainConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.update(func() { delete(c.pending, resp.ID) })
	}
	return err
}

func (c *drainConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Connection.Close()
}

// update changes the calls pending or the end of input under the lock,
// and closes answered when both are done.
func (c *drainConn) update(change func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	wasDone := c.ended && len(c.pending) == 0
	change()
	if !wasDone && c.ended && len(c.pending) == 0 {
		close(c.answered)
	}
}
