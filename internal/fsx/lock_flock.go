//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package fsx

import (
	"errors"
	"os"
	"syscall"
)

var errWouldBlock = syscall.EWOULDBLOCK

// lockFile takes an exclusive, non-blocking flock on f; an interrupted
// call is made again.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
