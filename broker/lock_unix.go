//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package broker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockDataDir takes an exclusive advisory lock on DataDir/LOCK so that two
// brokers never share a data directory. The kernel drops it when the
// process dies. A just-released lock can look held for a moment (a forked
// child holds the descriptor until it execs), so it retries for a second.
func lockDataDir(dir string) (io.Closer, error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker: open %s: %w", path, err)
	}
	for wait := time.Duration(0); ; wait += 20 * time.Millisecond {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || wait >= time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("broker: data directory %s is in use by another broker", dir)
	}
	return nil, fmt.Errorf("broker: lock %s: %w", path, err)
}
