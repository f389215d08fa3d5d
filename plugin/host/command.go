package host

import (
	"os"
	"os/exec"
	"strconv"

	"github.com/ferryhq/ferry/plugin"
)

// Command is the command that starts a plugin of m, whatever its
// transport: m's command and arguments, run in m's directory, with the
// environment plugin.Environ allows, in a process group of its own (so a
// kill reaches what it started) that dies with the runtime where the
// system can say so, and with m's memory limit as its address-space
// limit (RLIMIT_AS) when there is one: through util-linux's prlimit,
// which sets it before it executes the plugin, when it is installed;
// otherwise ApplyLimits sets it on the process just after it started.
//
// limited reports whether the limit is already in the command.
func Command(m *plugin.Manifest) (cmd *exec.Cmd, limited bool) {
	name, args := m.Command, m.Args
	if m.Limits.MemoryLimit > 0 {
		if p, err := exec.LookPath("prlimit"); err == nil {
			args = append([]string{"--as=" + strconv.FormatInt(m.Limits.MemoryLimit, 10), "--", name}, args...)
			name, limited = p, true
		}
	}
	cmd = exec.Command(name, args...)
	cmd.Dir = m.Dir
	cmd.Env = plugin.Environ(m, os.Environ())
	cmd.SysProcAttr = sysProcAttr()
	return cmd, limited || m.Limits.MemoryLimit <= 0
}
