package remote

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
)

// HTTPRange is the Range header that reads length bytes from offset (to the
// end when length < 0); "" when the whole object is wanted.
func HTTPRange(offset, length int64) string {
	if offset <= 0 && length < 0 {
		return ""
	}
	r := "bytes=" + strconv.FormatInt(offset, 10) + "-"
	if length > 0 {
		r += strconv.FormatInt(offset+length-1, 10)
	}
	return r
}

// CheckGetRange handles the Get arguments HTTP cannot express: a negative
// offset is an error, and a zero length (no HTTP range means zero bytes)
// reads nothing but still reports a missing key. It returns a nil reader
// when the driver should go on with the request.
func CheckGetRange(ctx context.Context, c Client, key string, offset, length int64) (io.ReadCloser, error) {
	if offset < 0 {
		return nil, &Error{Op: "get", Key: key, Err: errors.New("negative offset")}
	}
	if length != 0 {
		return nil, nil
	}
	if _, err := c.Stat(ctx, key); err != nil {
		var re *Error
		if errors.As(err, &re) {
			e := *re // keep Transient
			e.Op = "get"
			return nil, &e
		}
		return nil, err
	}
	return io.NopCloser(strings.NewReader("")), nil
}
