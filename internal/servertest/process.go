package servertest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Command says how to run a server and how to tell it is ready.
type Command struct {
	// Args is the program and its arguments.
	Args []string
	// Env is the whole environment of the server (nil: this process's).
	Env []string
	// Dir is the server's own directory: its working directory, where
	// its output goes (server.out), and what is removed by Stop.
	Dir string
	// User, when the caller is root and the user exists, owns Dir and
	// runs the server (database servers refuse root or want their own).
	User string
	// Ready reports nil once the server serves; it is called every
	// 100 ms until Timeout (default 90 s) or the server exits.
	Ready   func() error
	Timeout time.Duration
	// Log names a file under Dir whose tail explains a failed start
	// (default server.out).
	Log string
}

// Process is a running server: its own process group, killed as one.
type Process struct {
	Command
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs c and waits until it is ready. A server that exits or does
// not become ready is killed and the error carries the tail of its log.
func Start(c Command) (*Process, error) {
	p := &Process{Command: c}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Process) start() error {
	args, env := p.Args, p.Env
	if env == nil {
		env = os.Environ()
	}
	if os.Geteuid() == 0 && p.User != "" {
		if u, err := user.Lookup(p.User); err == nil {
			if err := chownAll(p.Dir, u); err != nil {
				return err
			}
			// runuser starts a fresh environment only with -l; env keeps
			// exactly the one given.
			args = append(append([]string{"runuser", "-u", p.User, "--", "env", "-i"}, env...), args...)
		}
	}
	out, err := os.OpenFile(filepath.Join(p.Dir, "server.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("server output: %w", err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env, cmd.Dir = env, p.Dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %w", p.Args[0], err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); close(p.done) }()
	timeout := p.Timeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	deadline := time.Now().Add(timeout)
	last := errors.New("not checked")
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			p.cmd = nil
			return fmt.Errorf("%s exited at start: %s", filepath.Base(p.Args[0]), p.Tail(10))
		default:
		}
		if last = p.Ready(); last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.Kill()
	return fmt.Errorf("%s not ready within %s (%v): %s", filepath.Base(p.Args[0]), timeout, last, p.Tail(10))
}

// Tail returns the last n lines of the server's log, joined by " | ".
func (p *Process) Tail(n int) string {
	name := p.Log
	if name == "" {
		name = "server.out"
	}
	b, _ := os.ReadFile(filepath.Join(p.Dir, name))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// Kill stops the server at once (SIGKILL to its group), as a crash does,
// and waits for it to be gone. Its directory stays, for Restart.
func (p *Process) Kill() {
	if p.cmd == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	p.cmd = nil
}

// Restart starts a killed server again, same command, same data.
func (p *Process) Restart() error { p.Kill(); return p.start() }

// Stop kills the server and removes its directory.
func (p *Process) Stop() {
	p.Kill()
	_ = os.RemoveAll(p.Dir)
}

// FreePort returns a loopback TCP port nothing listens on now.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Dial is a Ready check: the server accepts TCP connections on addr.
func Dial(addr string) func() error {
	return func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// TempDir makes a directory for a server's files, readable by the user
// the server may run as.
func TempDir(name string) (string, error) {
	dir, err := os.MkdirTemp("", "ferry-"+name+"-")
	if err != nil {
		return "", fmt.Errorf("server dir: %w", err)
	}
	return dir, os.Chmod(dir, 0o755)
}

// Find returns the first of names found (a path, or a program on PATH),
// after the one named by the environment variable env when it is set.
func Find(env string, names ...string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("none of %s found (set %s to the program)", strings.Join(names, ", "), env)
}

func chownAll(dir string, u *user.User) error {
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
