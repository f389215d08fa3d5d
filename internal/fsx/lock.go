package fsx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ErrLocked is wrapped by the error of LockDir when the directory's lock
// is held: by another process, or by another LockDir of the directory in
// this one. Stop the other user, or use another directory.
var ErrLocked = errors.New("directory is in use")

// DirLock is a held directory lock; Close releases it.
type DirLock struct {
	f *os.File
}

// LockDir takes an exclusive lock on dir through its lock file dir/name,
// created with permissions perm (before the umask) if missing (and left in place after
// Close). On systems with flock(2) the lock is advisory and held by the
// open file: the kernel drops it when the process dies, so a crash never
// leaves a directory locked; elsewhere LockDir only creates the file and
// the caller must not open a directory twice.
//
// A lock just released can look held for a moment: a child this process
// forks (the exec sink runs commands) holds a copy of every descriptor
// until it execs, and with it the lock. So a held lock is tried again
// every 20ms for up to a second before LockDir gives up with an error
// matching ErrLocked.
func LockDir(dir, name string, perm os.FileMode) (*DirLock, error) {
	return lockDir(dir, name, perm, lockWait, nil)
}

const (
	lockWait  = time.Second
	lockRetry = 20 * time.Millisecond
)

// lockDir is LockDir retrying for up to wait; busy, if not nil, is called
// before each retry (tests release a holder there).
func lockDir(dir, name string, perm os.FileMode, wait time.Duration, busy func()) (*DirLock, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	for waited := time.Duration(0); ; waited += lockRetry {
		err = lockFile(f)
		if err == nil {
			return &DirLock{f: f}, nil
		}
		if !errors.Is(err, errWouldBlock) || waited >= wait {
			break
		}
		if busy != nil {
			busy()
		}
		time.Sleep(lockRetry)
	}
	_ = f.Close()
	if errors.Is(err, errWouldBlock) {
		return nil, fmt.Errorf("%w: %s is locked by another process (or another open of the directory in this one)", ErrLocked, path)
	}
	return nil, fmt.Errorf("lock %s: %w", path, err)
}

// Close releases the lock by closing the lock file. It is idempotent.
func (l *DirLock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("release lock: %w", err)
	}
	return nil
}
