package remote

import (
	"errors"
	"fmt"
	"net/http"
)

// SetupError is a failure that means the remote's settings are wrong (an
// unknown key, a server that is not S3, an untrusted certificate):
// retrying cannot help, and the message says what to change. It never
// holds a secret.
type SetupError struct{ msg string }

func (e *SetupError) Error() string { return e.msg }

// Setup errors the drivers return, wrapped in an *Error.
var (
	ErrUnknownAccessKey = &SetupError{"the server does not know this access key id: check s3.access_key_id / AWS_ACCESS_KEY_ID"}
	ErrWrongSecret      = &SetupError{"the server does not accept this secret access key for the access key id: check s3.secret_access_key / AWS_SECRET_ACCESS_KEY"}
	ErrNoCredentials    = &SetupError{"no S3 credentials found: set s3.access_key_id/s3.secret_access_key, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"}
)

// AuthError maps the S3 error codes that mean the credentials are wrong
// (versitygw says XAdminUserNotFound, with HTTP 404) onto setup errors.
func AuthError(code string) error {
	switch code {
	case "InvalidAccessKeyId", "XAdminUserNotFound":
		return ErrUnknownAccessKey
	case "SignatureDoesNotMatch":
		return ErrWrongSecret
	}
	return nil
}

// Denied reports whether an S3 error answer refuses the operation to the
// credentials (a policy without it): AccessDenied, or a 403 with no code
// of its own (a HEAD answer has no body: the aws SDK names it Forbidden,
// minio-go AccessDenied, so there a wrong secret looks the same). Wrong
// keys are otherwise AuthError's; a skewed clock (RequestTimeTooSkewed,
// also 403) is neither.
func Denied(status int, code string) bool {
	return code == "AccessDenied" || status == http.StatusForbidden && (code == "" || code == "Forbidden")
}

// NotS3 is the setup error for an endpoint whose answer is not S3's, such
// as a web server's HTML page.
func NotS3(endpoint string, status int, contentType string) error {
	if contentType == "" {
		contentType = "no content type"
	}
	return &SetupError{fmt.Sprintf("%s did not answer like an S3 server (HTTP %d, %s): check s3.endpoint", endpoint, status, contentType)}
}

// Setup returns the setup error in err's chain, if any.
func Setup(err error) (*SetupError, bool) {
	var se *SetupError
	ok := errors.As(err, &se)
	return se, ok
}
