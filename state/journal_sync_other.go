//go:build !linux

package state

import "os"

// datasync flushes f to stable storage (fsync: systems without fdatasync
// in the syscall package).
func datasync(f *os.File) error { return f.Sync() }
