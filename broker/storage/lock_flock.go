//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package storage

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockDir takes an exclusive advisory lock (flock) on the partition's lock
// file, against other processes (openDirs guards this one). The kernel
// drops it when the process dies, so a crash never leaves it locked.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("storage: open lock file: %w", err)
	}
	// A child process forked by this one holds a copy of the descriptor,
	// and so the lock, until it execs: a lock just released can look held
	// for a moment. Retry for up to lockWait before giving up.
	for wait := time.Duration(0); ; wait += lockRetry {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || wait >= lockWait {
			break
		}
		time.Sleep(lockRetry)
	}
	_ = f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("%w: %s is locked by another process", ErrLocked, path)
	}
	return nil, fmt.Errorf("storage: lock %s: %w", path, err)
}

const (
	lockWait  = time.Second
	lockRetry = 20 * time.Millisecond
)

func unlockDir(f *os.File) error {
	// Closing the file releases the lock.
	if err := f.Close(); err != nil {
		return fmt.Errorf("storage: release lock: %w", err)
	}
	return nil
}
