package main

import (
	"bufio"
	"context"
	"io"
	"iter"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
)

// meter counts what a command asks of the remote, for its progress bar and
// its summary line: requests (retries too), bytes sent and received, and
// the bytes of the objects it opened (decompressed and decrypted, so they
// compare with session sizes).
type meter struct {
	requests, sent, received, opened, retries atomic.Int64
	// log, when set, gets one debug line per retry.
	log *slog.Logger
	// onRetry, when set, is also called per retry (a metric).
	onRetry func()
}

// retryPolicy is remote.DefaultRetry, counting and logging its retries.
func (m *meter) retryPolicy() remote.RetryPolicy {
	p := remote.DefaultRetry
	p.OnRetry = func(op, key string, attempt int, wait time.Duration, err error) {
		m.retries.Add(1)
		if m.log != nil {
			m.log.Debug("retrying", "op", op, "key", key, "attempt", attempt, "wait", wait.Round(time.Millisecond), "err", err)
		}
		if m.onRetry != nil {
			m.onRetry()
		}
	}
	return p
}

// client counts the requests c is asked for. It goes between the driver
// and the retry wrapper, so that every try counts.
func (m *meter) client(c remote.Client) remote.Client { return meteredClient{c, m} }

type meteredClient struct {
	c remote.Client
	m *meter
}

func (c meteredClient) Put(ctx context.Context, key string, data []byte, opts remote.PutOptions) error {
	c.m.requests.Add(1)
	c.m.sent.Add(int64(len(data)))
	return c.c.Put(ctx, key, data, opts)
}

func (c meteredClient) PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts remote.PutOptions) error {
	c.m.requests.Add(1)
	c.m.sent.Add(size)
	return c.c.PutReader(ctx, key, r, size, opts)
}

func (c meteredClient) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	c.m.requests.Add(1)
	rc, err := c.c.Get(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	return countingBody{rc, &c.m.received}, nil
}

func (c meteredClient) Stat(ctx context.Context, key string) (remote.ObjectInfo, error) {
	c.m.requests.Add(1)
	return c.c.Stat(ctx, key)
}

// List counts one request per page of a thousand keys, as S3 pages.
func (c meteredClient) List(ctx context.Context, prefix string, opts remote.ListOptions) iter.Seq2[remote.ObjectInfo, error] {
	return func(yield func(remote.ObjectInfo, error) bool) {
		n := 0
		for info, err := range c.c.List(ctx, prefix, opts) {
			if n%1000 == 0 {
				c.m.requests.Add(1)
			}
			n++
			if !yield(info, err) {
				return
			}
		}
		if n == 0 {
			c.m.requests.Add(1)
		}
	}
}

func (c meteredClient) Delete(ctx context.Context, key string) error {
	c.m.requests.Add(1)
	return c.c.Delete(ctx, key)
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// codec counts the bytes c opens. An encrypting codec stays one
// (repo.Encrypter), which the repository checks.
func (m *meter) codec(c repo.Codec) repo.Codec {
	mc := meteredCodec{c, &m.opened}
	if enc, ok := c.(repo.Encrypter); ok {
		return meteredEncrypter{mc, enc}
	}
	return mc
}

type meteredCodec struct {
	repo.Codec
	opened *atomic.Int64
}

func (c meteredCodec) Open(sealed []byte, limit int64) ([]byte, error) {
	b, err := c.Codec.Open(sealed, limit)
	c.opened.Add(int64(len(b)))
	return b, err
}

// OpenReader counts as its plaintext is read: a restore streams every
// chunk through it, and its progress is these bytes.
func (c meteredCodec) OpenReader(sealed *bufio.Reader, limit int64) (io.ReadCloser, error) {
	rc, err := c.Codec.OpenReader(sealed, limit)
	if err != nil {
		return nil, err
	}
	return countingBody{rc, c.opened}, nil
}

type meteredEncrypter struct {
	meteredCodec
	enc repo.Encrypter
}

func (c meteredEncrypter) Keys() repo.Keys { return c.enc.Keys() }
