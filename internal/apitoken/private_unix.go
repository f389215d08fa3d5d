//go:build unix

package apitoken

import (
	"fmt"
	"os"
	"syscall"
)

// checkPrivate refuses a directory that is not the current user's own, or
// that others can write to; it narrows the mode of one the user owns
// that others can read.
func checkPrivate(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to this user (uid %d): refusing to keep a credential there", dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("%s is open to other users (mode %v) and could not be made private: %w", dir, fi.Mode().Perm(), err)
		}
	}
	return nil
}
