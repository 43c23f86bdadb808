package crypt

import "errors"

// Fingerprint is the fingerprint of a recipient as written.
func Fingerprint(recipient string) (string, error) {
	_, canon, err := ParseRecipient(recipient)
	if err != nil {
		return "", err
	}
	return fingerprint(canon), nil
}

// IsWrongPassphrase reports whether New failed because the passphrase does
// not open the repository's key.
func IsWrongPassphrase(err error) bool { return errors.Is(err, errWrongPassphrase) }
