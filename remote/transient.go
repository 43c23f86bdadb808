package remote

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"
)

// NetworkTransient reports whether err is a network failure that a later try
// may not hit: a timeout, a refused, reset or aborted connection, a response
// cut short, or a failed name lookup (a laptop that lost its network).
// Certificate and TLS configuration errors are permanent. Drivers use it to
// set Error.Transient for errors that carry no HTTP status.
func NetworkTransient(err error) bool {
	if err == nil {
		return false
	}
	var (
		certInvalid   x509.CertificateInvalidError
		unknownAuth   x509.UnknownAuthorityError
		hostname      x509.HostnameError
		tlsRecord     tls.RecordHeaderError
		tlsCertVerify *tls.CertificateVerificationError
	)
	if errors.As(err, &certInvalid) || errors.As(err, &unknownAuth) || errors.As(err, &hostname) ||
		errors.As(err, &tlsRecord) || errors.As(err, &tlsCertVerify) {
		return false
	}
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.ENETDOWN):
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return errors.As(err, &opErr) || errors.As(err, &dnsErr)
}

// Unanswered reports whether err says only that the remote could not be
// asked: it is down or unreachable, it kept failing or throttling past the
// retries, or the caller stopped waiting (a cancelled or expired context).
// Such an error says nothing about what the remote holds, so it is never
// to be reported as damage, a refusal or "not there".
func Unanswered(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || IsTransient(err) {
		return true
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return errors.As(err, &opErr) || errors.As(err, &dnsErr)
}

// HTTPTransient reports whether an S3 error answer is worth retrying: any
// 5xx, 429, and the throttling, timeout and concurrent-update codes S3 and
// compatible servers send (some with a 4xx status).
func HTTPTransient(status int, code string) bool {
	if status >= 500 || status == 429 {
		return true
	}
	switch code {
	case "SlowDown", "RequestTimeout", "RequestTimeoutException", "Throttling",
		"ThrottlingException", "RequestThrottled", "RequestThrottledException",
		"TooManyRequestsException", "RequestLimitExceeded", "BandwidthLimitExceeded",
		"InternalError", "ServiceUnavailable", "ConditionalRequestConflict", "OperationAborted":
		return true
	}
	return false
}
