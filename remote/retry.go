package remote

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how WithRetry retries transient errors: up to MaxAttempts
// tries in all, waiting a random time in [0, min(Max, Base*2^n)] before the
// n-th retry ("full jitter", which spreads out clients that failed together).
// Zero fields take the values of DefaultRetry.
type RetryPolicy struct {
	MaxAttempts int
	Base        time.Duration
	Max         time.Duration
	// OnRetry, when set, is called before each wait, e.g. to log or count.
	OnRetry func(op, key string, attempt int, wait time.Duration, err error)
}

// DefaultRetry tries six times over about eight seconds on average, long
// enough to ride out a server restart or a throttling burst, short enough
// that a caller with its own schedule (the uploader) gets control back soon.
var DefaultRetry = RetryPolicy{MaxAttempts: 6, Base: 250 * time.Millisecond, Max: 8 * time.Second}

func (p RetryPolicy) withDefaults() RetryPolicy {
	// A negative field is taken as zero: a negative Max would make the
	// backoff's random wait panic.
	p.MaxAttempts = cmp.Or(max(p.MaxAttempts, 0), DefaultRetry.MaxAttempts)
	p.Base = cmp.Or(max(p.Base, 0), DefaultRetry.Base)
	p.Max = cmp.Or(max(p.Max, 0), DefaultRetry.Max)
	return p
}

// backoff returns the wait before retry number n (1-based).
func (p RetryPolicy) backoff(n int) time.Duration {
	ceil := p.Max
	if n < 62 { // beyond that the shift overflows and Max applies anyway
		if d := p.Base << (n - 1); d > 0 && d < ceil {
			ceil = d
		}
	}
	return rand.N(ceil + 1)
}

// WithRetry wraps c so that operations failing with a transient error
// (IsTransient) are retried with capped, jittered exponential backoff.
// Permanent errors and context cancellation return at once.
//
// Get retries opening the object, not reads from the returned body. List
// resumes after the last key it yielded, so a caller never sees a key twice.
// An IfAbsent or IfMatch Put (or PutReader) that fails transiently, or meets
// ErrPreconditionFailed after a transient failure, compares the stored
// object with its bytes: equal means an earlier try landed (its answer was
// lost), so the put reports success.
func WithRetry(c Client, p RetryPolicy) Client {
	return &retryClient{c: c, p: p.withDefaults()}
}

type retryClient struct {
	c Client
	p RetryPolicy
}

// do calls f until it succeeds, fails permanently, runs out of attempts or
// ctx ends. hadTransient tells f whether an earlier try failed transiently.
func (r *retryClient) do(ctx context.Context, op, key string, f func(hadTransient bool) error) error {
	hadTransient := false
	for attempt := 1; ; attempt++ {
		err := f(hadTransient)
		if err == nil || !IsTransient(err) || attempt >= r.p.MaxAttempts || ctx.Err() != nil {
			return err
		}
		hadTransient = true
		if err := r.wait(ctx, op, key, attempt, err); err != nil {
			return err
		}
	}
}

// wait sleeps before retry number attempt; it returns an error that wraps
// both the failure and ctx's error when ctx ends first.
func (r *retryClient) wait(ctx context.Context, op, key string, attempt int, cause error) error {
	d := r.p.backoff(attempt)
	if r.p.OnRetry != nil {
		r.p.OnRetry(op, key, attempt, d, cause)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w (gave up retrying: %w)", cause, ctx.Err())
	}
}

func (r *retryClient) Put(ctx context.Context, key string, data []byte, opts PutOptions) error {
	return r.put(ctx, key, bytes.NewReader(data), int64(len(data)), opts, func() error {
		return r.c.Put(ctx, key, data, opts)
	})
}

// PutReader retries like Put; each try reads r again from its start.
func (r *retryClient) PutReader(ctx context.Context, key string, src io.ReaderAt, size int64, opts PutOptions) error {
	if opts.Sums == nil {
		// The first attempt's checksums hold for every retry: a source
		// that changed in between is refused, not sent as it is now.
		opts.Sums = &Sums{}
	}
	return r.put(ctx, key, src, size, opts, func() error {
		return r.c.PutReader(ctx, key, src, size, opts)
	})
}

// put retries try, a put of the size bytes of src. A conditional put
// that fails transiently may have landed (its answer lost), and a server
// may refuse a large conditional body before reading it and close the
// connection, which the client sees as a reset, not as the refusal: so
// after a transient failure, and after a refusal that follows one, the
// stored object decides. Our bytes there: the put is done. Other bytes
// under an IfAbsent put: refused, as the server meant to say.
func (r *retryClient) put(ctx context.Context, key string, src io.ReaderAt, size int64, opts PutOptions, try func() error) error {
	conditional := opts.IfAbsent || opts.IfMatch != ""
	return r.do(ctx, "put", key, func(hadTransient bool) error {
		err := try()
		refused := errors.Is(err, ErrPreconditionFailed)
		if !conditional || !(IsTransient(err) || refused && hadTransient) {
			return err
		}
		held, exists, herr := r.holds(ctx, key, src, size)
		switch {
		case herr != nil && refused:
			return herr // the refusal may be our own earlier try: find out later
		case herr != nil:
			return err
		case held:
			return nil
		case exists && opts.IfAbsent && !refused:
			return &Error{Op: "put", Key: key, Err: ErrPreconditionFailed}
		}
		return err
	})
}

// holds reports whether key stores exactly the size bytes of src, and
// whether it exists at all. The object is read with retries; an error
// reading it is returned, never taken for a "no" (which would tell an
// IfAbsent caller that other bytes hold the key).
func (r *retryClient) holds(ctx context.Context, key string, src io.ReaderAt, size int64) (held, exists bool, err error) {
	info, err := r.Stat(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	if info.Size != size {
		return false, true, nil
	}
	rc, err := r.Get(ctx, key, 0, -1)
	if errors.Is(err, ErrNotFound) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	defer rc.Close()
	held, err = sameBytes(ctx, rc, src, size)
	return held, true, err
}

func (r *retryClient) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := r.do(ctx, "get", key, func(bool) error {
		var err error
		rc, err = r.c.Get(ctx, key, offset, length)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &resumingBody{r: r, ctx: ctx, key: key, offset: offset, length: length, rc: rc}, nil
}

// resumingBody reads a Get's body and, when the connection breaks part way,
// opens the rest of the range again (the objects ompsync reads by range are
// immutable; the small replaceable ones are checked by their codec). Once
// the retries are spent the error is transient, so callers try again later
// instead of giving up.
type resumingBody struct {
	r              *retryClient
	ctx            context.Context
	key            string
	offset, length int64 // what is still to read; length < 0: to the end
	rc             io.ReadCloser
	attempt        int
}

func (b *resumingBody) Read(p []byte) (int, error) {
	for {
		n, err := b.rc.Read(p)
		b.offset += int64(n)
		if b.length >= 0 {
			b.length -= int64(n)
		}
		if err == nil || err == io.EOF || n > 0 {
			if err != nil && err != io.EOF {
				err = nil // report the bytes now, the error on the next call
			}
			return n, err
		}
		if b.ctx.Err() != nil {
			return 0, b.ctx.Err()
		}
		if b.length == 0 {
			return 0, io.EOF // all asked for is read; the break came after
		}
		b.rc.Close()
		b.attempt++
		if b.attempt >= b.r.p.MaxAttempts {
			return 0, &Error{Op: "get", Key: b.key, Transient: true, Err: fmt.Errorf("body broke off after retries: %w", err)}
		}
		if werr := b.r.wait(b.ctx, "get", b.key, b.attempt, err); werr != nil {
			return 0, werr
		}
		rc, oerr := b.r.c.Get(b.ctx, b.key, b.offset, b.length)
		if oerr != nil {
			return 0, oerr
		}
		b.rc = rc
	}
}

func (b *resumingBody) Close() error { return b.rc.Close() }

func (r *retryClient) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	var info ObjectInfo
	err := r.do(ctx, "stat", key, func(bool) error {
		var err error
		info, err = r.c.Stat(ctx, key)
		return err
	})
	return info, err
}

func (r *retryClient) Delete(ctx context.Context, key string) error {
	return r.do(ctx, "delete", key, func(bool) error { return r.c.Delete(ctx, key) })
}

// List restarts a failed listing with StartAfter set to the last key it
// yielded and drops anything not after that key (a server may yield that
// common prefix again). Attempts count failures since the last progress.
func (r *retryClient) List(ctx context.Context, prefix string, opts ListOptions) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		last, started := opts.StartAfter, false
		failures := 0
		for {
			o := opts
			o.StartAfter = last
			var failed error
			for info, err := range r.c.List(ctx, prefix, o) {
				if err != nil {
					failed = err
					break
				}
				if started && info.Key <= last {
					continue
				}
				last, started = info.Key, true
				failures = 0
				if !yield(info, nil) {
					return
				}
			}
			if failed == nil {
				return
			}
			failures++
			if !IsTransient(failed) || failures >= r.p.MaxAttempts || ctx.Err() != nil {
				yield(ObjectInfo{}, failed)
				return
			}
			if err := r.wait(ctx, "list", prefix, failures, failed); err != nil {
				yield(ObjectInfo{}, err)
				return
			}
		}
	}
}
