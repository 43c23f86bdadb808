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
	return &drainConn{Connection: c, answered: make(chan struct{}), closed: make(chan struct{})}, nil
}

// drainConn counts the calls read and not yet answered.
type drainConn struct {
	mcp.Connection
	mu        sync.Mutex
	pending   int
	ended     bool          // the input ended
	answered  chan struct{} // closed once the input ended and pending is 0
	closeOnce sync.Once
	closed    chan struct{}
}

func (c *drainConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		c.count(1, false)
	}
	if err != nil {
		c.count(0, true)
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
	if _, ok := msg.(*jsonrpc.Response); ok {
		c.count(-1, false)
	}
	return err
}

func (c *drainConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Connection.Close()
}

func (c *drainConn) count(n int, end bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	wasDone := c.ended && c.pending <= 0
	c.pending += n
	c.ended = c.ended || end
	if !wasDone && c.ended && c.pending <= 0 {
		close(c.answered)
	}
}
