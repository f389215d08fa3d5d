//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package storage

import (
	"fmt"
	"os"
)

// lockDir only creates the lock file on this platform: there is no
// advisory lock, so the caller must not open a directory twice.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("storage: open lock file: %w", err)
	}
	return f, nil
}

func unlockDir(f *os.File) error {
	if err := f.Close(); err != nil {
		return fmt.Errorf("storage: release lock: %w", err)
	}
	return nil
}
