//go:build !windows

package atomicfile

import "os"

// replace renames tmp over name: atomic, whoever has name open.
func replace(tmp, name string) error { return os.Rename(tmp, name) }
