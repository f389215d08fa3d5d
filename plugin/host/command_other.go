//go:build !linux

package host

import (
	"errors"
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// ApplyLimits sets the address-space limit of a started process; only
// Linux can.
func ApplyLimits(pid int, memoryLimit int64) error {
	if memoryLimit <= 0 {
		return nil
	}
	return errors.New("memory_limit needs Linux (or util-linux's prlimit)")
}

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
