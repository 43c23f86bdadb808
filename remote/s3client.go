package remote

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"io"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// S3API is one S3 library's requests, for S3Client: keys and prefixes come
// with the client's prefix, and errors are the library's own (Failure tells
// what they say).
type S3API interface {
	// PutObject sends size bytes of body with sums (Content-MD5, and
	// SHA-256 for a library that signs it) and opts' conditions.
	PutObject(ctx context.Context, key string, body io.Reader, size int64, sums Sums, opts PutOptions) error
	// SignsSHA256 says whether PutObject passes sums.SHA256 on (minio-go
	// signs it; the aws driver gives the SDK Content-MD5 alone, and the SDK
	// hashes for its own signature): Put computes it only then.
	SignsSHA256() bool
	// GetObject reads key with the Range header byteRange ("" for all).
	GetObject(ctx context.Context, key, byteRange string) (io.ReadCloser, error)
	// HeadObject gives key's size, time and ETag.
	HeadObject(ctx context.Context, key string) (ObjectInfo, error)
	DeleteObject(ctx context.Context, key string) error
	// ListPage asks for one page of ListObjectsV2.
	ListPage(ctx context.Context, q S3Query) (S3Page, error)
	Failure(err error) S3Failure
}

// S3Query is one ListObjectsV2 request (Token "" for the first page).
type S3Query struct {
	Prefix, Delimiter, StartAfter, Token string
	MaxKeys                              int
}

// S3Page is one ListObjectsV2 answer: its keys and common prefixes (full
// keys, in any order) and the token of the next page when Truncated.
type S3Page struct {
	Items     []ObjectInfo
	Truncated bool
	Next      string
}

// s3PageSize is the number of entries asked for per listing page (S3's maximum).
const s3PageSize = 1000

// S3Client is the remote Client of both S3 drivers: the checks, ranges,
// paging and error mapping S3 needs whatever the library.
type S3Client struct {
	api    S3API
	cfg    S3Config
	prefix string // "" or "p/"
}

var _ Client = (*S3Client)(nil)

// NewS3Client returns the client storing through api into cfg's bucket
// under prefix (S3Config.Check's).
func NewS3Client(api S3API, cfg S3Config, prefix string) *S3Client {
	return &S3Client{api: api, cfg: cfg, prefix: prefix}
}

// Put uploads data in one request with its checksums.
func (c *S3Client) Put(ctx context.Context, key string, data []byte, opts PutOptions) error {
	if err := CheckOp(ctx, "put", key); err != nil {
		return err
	}
	sums := Sums{MD5: md5.Sum(data), held: true, withMD5: true}
	if c.api.SignsSHA256() {
		sums.SHA256 = sha256.Sum256(data)
	}
	return c.fail(ctx, "put", key, c.api.PutObject(ctx, c.prefix+key, bytes.NewReader(data), int64(len(data)), sums, opts))
}

// PutReader uploads size bytes of r in one request with their checksums,
// from a first pass over r. The library may read the body again to sign
// it, and rewind it to send it.
func (c *S3Client) PutReader(ctx context.Context, key string, r io.ReaderAt, size int64, opts PutOptions) error {
	if err := CheckOp(ctx, "put", key); err != nil {
		return err
	}
	sums, err := SumsFor(ctx, r, size, true, opts.Sums)
	if err != nil {
		return &Error{Op: "put", Key: key, Err: err}
	}
	return c.fail(ctx, "put", key, c.api.PutObject(ctx, c.prefix+key, CheckedReader(r, size, sums), size, sums, opts))
}

// Get opens a byte range of key. Reading past the end yields no bytes; a
// zero length (which HTTP cannot ask for) reads none but still reports a
// missing key.
func (c *S3Client) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := CheckOp(ctx, "get", key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, &Error{Op: "get", Key: key, Err: errors.New("negative offset")}
	}
	empty := io.NopCloser(strings.NewReader(""))
	if length == 0 {
		if _, err := c.Stat(ctx, key); err != nil {
			return nil, c.fail(ctx, "get", key, err) // Stat's *Error, as get's
		}
		return empty, nil
	}
	rng := ""
	if offset > 0 || length > 0 {
		rng = "bytes=" + strconv.FormatInt(offset, 10) + "-"
		if length > 0 {
			rng += strconv.FormatInt(offset+length-1, 10)
		}
	}
	body, err := c.api.GetObject(ctx, c.prefix+key, rng)
	if err != nil {
		if f := c.api.Failure(err); f.Status == http.StatusRequestedRangeNotSatisfiable || f.Code == "InvalidRange" {
			return empty, nil // the object exists but ends before offset
		}
		return nil, c.fail(ctx, "get", key, err)
	}
	return ContextBody(ctx, body), nil
}

// Stat returns key's size, modification time and ETag.
func (c *S3Client) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := CheckOp(ctx, "stat", key); err != nil {
		return ObjectInfo{}, err
	}
	info, err := c.api.HeadObject(ctx, c.prefix+key)
	if err != nil {
		return ObjectInfo{}, c.fail(ctx, "stat", key, err)
	}
	info.Key = key
	return info, nil
}

// Delete removes key; a missing key is not an error.
func (c *S3Client) Delete(ctx context.Context, key string) error {
	if err := CheckOp(ctx, "delete", key); err != nil {
		return err
	}
	if err := c.fail(ctx, "delete", key, c.api.DeleteObject(ctx, c.prefix+key)); !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// List pages through ListObjectsV2, merging each page's keys and common
// prefixes into one lexical order. A confused or hostile server may answer
// with keys outside the prefix asked for: they never reach the caller.
func (c *S3Client) List(ctx context.Context, prefix string, opts ListOptions) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		if err := CheckOp(ctx, "list", prefix); err != nil {
			yield(ObjectInfo{}, err)
			return
		}
		q := S3Query{Prefix: c.prefix + prefix, Delimiter: opts.Delimiter, MaxKeys: s3PageSize}
		if opts.StartAfter != "" {
			q.StartAfter = c.prefix + opts.StartAfter
		}
		if opts.FirstPage > 0 {
			q.MaxKeys = min(opts.FirstPage, s3PageSize)
		}
		for {
			page, err := c.api.ListPage(ctx, q)
			if err != nil {
				yield(ObjectInfo{}, c.fail(ctx, "list", prefix, err))
				return
			}
			items := slices.DeleteFunc(page.Items, func(it ObjectInfo) bool { return !strings.HasPrefix(it.Key, q.Prefix) })
			slices.SortFunc(items, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
			for _, it := range items {
				it.Key = it.Key[len(c.prefix):]
				if !yield(it, nil) {
					return
				}
			}
			if !page.Truncated {
				return
			}
			if page.Next == "" || page.Next == q.Token {
				yield(ObjectInfo{}, &Error{Op: "list", Key: prefix, Err: ErrEndlessListing})
				return
			}
			q.Token, q.StartAfter, q.MaxKeys = page.Next, "", s3PageSize
		}
	}
}

// fail maps a library's error (nil: none) onto remote's errors; an *Error
// the driver made itself is kept, with op and key.
func (c *S3Client) fail(ctx context.Context, op, key string, err error) error {
	var re *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re):
		return &Error{Op: op, Key: key, Transient: re.Transient, Err: re.Err}
	}
	return c.cfg.Fail(ctx, op, key, err, c.api.Failure(err))
}
