package host

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// ApplyLimits sets the address-space limit of a started process (when
// Command could not put it in the command).
func ApplyLimits(pid int, memoryLimit int64) error {
	if memoryLimit <= 0 {
		return nil
	}
	lim := &unix.Rlimit{Cur: uint64(memoryLimit), Max: uint64(memoryLimit)}
	return unix.Prlimit(pid, unix.RLIMIT_AS, lim, nil)
}

// killGroup kills the process group of a plugin process.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
