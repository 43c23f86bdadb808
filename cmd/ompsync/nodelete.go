package main

import (
	"errors"

	"github.com/ompsync/ompsync/remote"
)

// errNoDelete is what compact and prune say when the remote refuses this
// machine's key a delete (a key made unable to destroy the backup).
var errNoDelete = errors.New("this machine's key may not delete objects on the remote: run this on a machine whose key may (s3:DeleteObject); nothing was lost, the backup is whole")

// noDelete returns errNoDelete when err is a refused delete, else err.
func noDelete(err error) error {
	if remote.DeleteDenied(err) {
		return errNoDelete
	}
	return err
}
