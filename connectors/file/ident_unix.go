//go:build unix

package file

import (
	"os"
	"syscall"
)

// identOf is a file's identity: its device and inode numbers, which stay
// the same when the file is renamed.
func identOf(_ string, fi os.FileInfo) ident {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return ident{Dev: uint64(st.Dev), Ino: uint64(st.Ino)} //nolint:unconvert // narrower types on some systems
	}
	return ident{}
}
