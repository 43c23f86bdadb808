package remote

import "errors"

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

// Setup returns the setup error in err's chain, if any.
func Setup(err error) (*SetupError, bool) {
	var se *SetupError
	ok := errors.As(err, &se)
	return se, ok
}
