package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key S3 accepts, in bytes.
const MaxKeyLen = 1024

// ValidateKey reports whether key is a well-formed object key: 1 to
// MaxKeyLen bytes of valid UTF-8, slash-separated segments that are neither
// empty nor "." or "..", no leading or trailing slash, no backslash and no
// control characters. Every driver enforces the same rules, so a key that
// works on one backend works on all of them and can never escape a folder.
// Control characters are refused because S3's XML listings cannot carry them.
func ValidateKey(key string) error {
	if key == "" {
		return errors.New("empty key")
	}
	return validate(key, "key", "leading, trailing or double slash", 0)
}

// ValidatePrefix checks a listing prefix. It follows ValidateKey's rules
// except that it may be empty, end in a slash, and end in a partial segment.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return validate(prefix, "prefix", "leading or double slash", 1)
}

// validate checks s's characters and its segments, but for the last open
// ones (a prefix's last one may be partial or empty); what names s in errors.
func validate(s, what, empty string, open int) error {
	if err := validateChars(s); err != nil {
		return err
	}
	segs := strings.Split(s, "/")
	for _, seg := range segs[:len(segs)-open] {
		switch seg {
		case "":
			return fmt.Errorf("%s has an empty segment (%s)", what, empty)
		case ".", "..":
			return fmt.Errorf("%s has a '.' or '..' segment", what)
		}
	}
	return nil
}

func validateChars(s string) error {
	if len(s) > MaxKeyLen {
		return errors.New("key longer than 1024 bytes")
	}
	if !utf8.ValidString(s) {
		return errors.New("key is not valid UTF-8")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == 0x7f:
			return errors.New("key contains a control character")
		case c == '\\':
			return errors.New("key contains a backslash")
		}
	}
	return nil
}

// CheckOp is what every driver checks before an operation on key: that ctx
// is live and key valid (ValidateKey; for "list", ValidatePrefix), as a
// *Error naming op and key.
func CheckOp(ctx context.Context, op, key string) error {
	err := ctx.Err()
	switch {
	case err != nil:
	case op == "list":
		err = ValidatePrefix(key)
	default:
		err = ValidateKey(key)
	}
	if err != nil {
		return &Error{Op: op, Key: key, Err: err}
	}
	return nil
}
