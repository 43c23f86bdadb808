// Package remote defines the small object-store interface that every storage
// backend implements, the errors they share, and wrappers (retry) that work on
// any backend.
//
// Drivers live one folder per backend: remote/file (a local folder, the
// embedded default), remote/s3 (aws-sdk-go-v2) and remote/minio (minio-go).
// Every driver passes the same conformance suite in internal/testkit/remotetest.
package remote

import (
	"context"
	"errors"
	"io"
	"iter"
	"time"
)

// Client is a byte-range object store. Keys are slash-separated, never start
// with a slash, and never contain "." or ".." segments; drivers refuse others.
// Every method honours ctx cancellation.
type Client interface {
	// Put stores data under key. With opts.IfAbsent it fails with
	// ErrPreconditionFailed when the key already exists. The driver sends a
	// checksum the server verifies, so a corrupted upload is refused.
	Put(ctx context.Context, key string, data []byte, opts PutOptions) error

	// PutReader is Put with the object's size bytes read from r, so an
	// object of any size passes through a buffer of a few blocks (restic's
	// backend Save takes a rewindable reader for the same reason). r is
	// read more than once: a first pass computes the checksum the server
	// verifies, and each try reads it again from the start. It must give
	// the same bytes every time (a file no one writes); bytes that changed
	// between the passes are refused like a corrupted upload, and a source
	// shorter than size is an error. Options are Put's.
	PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts PutOptions) error

	// Get opens the object for reading. With length < 0 it reads from offset
	// to the end; otherwise at most length bytes from offset.
	// A missing key is ErrNotFound.
	Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)

	// Stat returns the object's size and modification time, or ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)

	// List yields the objects under prefix in lexical key order, paging
	// through the server's results as the caller iterates. With a delimiter,
	// keys that share a prefix up to the next delimiter are yielded once as
	// a common prefix (ObjectInfo.Prefix true, Key ending in the delimiter).
	// An error ends the iteration.
	List(ctx context.Context, prefix string, opts ListOptions) iter.Seq2[ObjectInfo, error]

	// Delete removes key. Deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// PutOptions modify Put.
type PutOptions struct {
	// IfAbsent makes the put fail with ErrPreconditionFailed when the key exists.
	IfAbsent bool
	// Sums, when set, carries a PutReader source's checksums from one
	// attempt to the next (the retry layer sets it): a driver computes
	// them only when it holds none, and checks the bytes it sends against
	// them, so a source that changed between two attempts is refused
	// (ErrSourceChanged) as one that changed during one is.
	Sums *Sums
	// IfMatch, when set, makes the put replace the object only while its
	// ETag (from Stat) is this one: ErrPreconditionFailed when it changed
	// since, ErrNotFound when it is gone. A writer that must not undo
	// another's newer write puts this way. Only drivers whose Stat gives
	// an ETag honour it.
	IfMatch string
}

// ListOptions modify List.
type ListOptions struct {
	// Delimiter groups keys into common prefixes ("" lists recursively).
	Delimiter string
	// StartAfter lists only keys that sort after it. Servers differ when it
	// falls inside a common prefix of a delimiter listing ("a/1" with "/"):
	// versitygw leaves "a/" out, the file driver (like AWS) yields it.
	StartAfter string
	// FirstPage, when above 0, asks for at most that many keys in the
	// first page, the rest in full pages: a server lists a page whole
	// before it answers (a page of 1,000 session keys took versitygw 60-300
	// ms, one of 64 a few), so the caller's first keys come sooner, for one
	// request more. Drivers without pages ignore it.
	FirstPage int
}

// ObjectInfo describes one listed or stat'ed object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
	// Prefix marks a common prefix produced by a delimiter listing.
	Prefix bool
	// ETag names this version of the object, set by Stat ("" when the
	// driver has none): PutOptions.IfMatch takes it.
	ETag string
}

var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrPreconditionFailed: an IfAbsent put found the key already present,
	// or an IfMatch put found the object changed.
	ErrPreconditionFailed = errors.New("precondition failed: object already exists")
	// ErrEndlessListing: a listing page says more follows but gives no new
	// continuation token; following it would never end.
	ErrEndlessListing = errors.New("the server says the listing goes on but gives no new continuation token")
	// ErrAccessDenied: the server refused the operation to these
	// credentials (S3 AccessDenied, HTTP 403). A key may be allowed to
	// write and not to delete (against a stolen machine or ransomware),
	// so callers test for it to leave the work to a machine whose key may.
	ErrAccessDenied = errors.New("access denied to this key")
)

// Error wraps a driver error with the operation and key, and whether retrying
// may help. Messages never carry credentials or presigned URLs.
type Error struct {
	Op        string // "put", "get", "stat", "list", "delete"
	Key       string
	Transient bool
	Err       error
}

func (e *Error) Error() string {
	if e.Key == "" {
		return e.Op + ": " + e.Err.Error()
	}
	return e.Op + " " + e.Key + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// IsTransient reports whether err is worth retrying: server errors, throttling,
// timeouts and broken connections. Not-found, precondition and other 4xx
// answers are permanent. Context cancellation is never transient.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var re *Error
	if errors.As(err, &re) {
		return re.Transient
	}
	return false
}

// ContextBody returns rc with reads that fail with ctx's error once ctx
// ends, so every driver's Get body stops the same way, however much the
// network or the file system has buffered.
func ContextBody(ctx context.Context, rc io.ReadCloser) io.ReadCloser {
	return contextBody{ctx, rc}
}

// contextBody's Close is the body's own.
type contextBody struct {
	ctx context.Context
	io.ReadCloser
}

func (b contextBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return b.ReadCloser.Read(p)
}

// DeleteDenied reports whether err is the server refusing these
// credentials a delete (ErrAccessDenied from a delete): a key allowed to
// write and not to delete, which must leave compaction and retention to
// another machine's key.
func DeleteDenied(err error) bool {
	var re *Error
	return errors.Is(err, ErrAccessDenied) && errors.As(err, &re) && re.Op == "delete"
}

// AnyObject reports whether an object's key starts with prefix. A folder a
// delimiter listing names may hold none: on a versioned bucket MinIO still
// names one whose objects are all deleted (only delete markers are left).
func AnyObject(ctx context.Context, c Client, prefix string) (bool, error) {
	for _, err := range c.List(ctx, prefix, ListOptions{FirstPage: 1}) {
		return err == nil, err
	}
	return false, nil
}
