package file

// Root returns the folder the client stores into, for tests that look at
// the files themselves.
func (c *Client) Root() string { return c.root }
