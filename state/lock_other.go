//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package state

import "os"

// lockFile is a no-op where flock(2) is not available: the caller must make
// sure only one FileStore uses a directory at a time.
func lockFile(*os.File) error { return nil }
