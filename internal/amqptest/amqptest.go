// Package amqptest gives tests a real RabbitMQ: the server named by
// FERRY_TEST_AMQP_URL (scripts/test.sh starts one), or else a throwaway
// server of its own (Debian's rabbitmq-server on a free loopback port, in
// a temporary directory, run as the rabbitmq user when the caller is
// root), one per test binary. When none can be had, tests are skipped
// with the reason, unless FERRY_REQUIRE_RABBITMQ=1 (set by
// scripts/test.sh, so CI never skips), in which case they fail.
//
// Tests share the server and keep apart by naming their own exchanges and
// queues (Name). A test that takes the server down gets one of its own
// with Private, and stops and starts it with Halt and Resume (same port,
// same data).
//
// A test binary that uses the package runs its tests through Main, so a
// server it started is stopped when the tests end:
//
//	func TestMain(m *testing.M) { amqptest.Main(m) }
package amqptest

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
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Server is a RabbitMQ server run from a temporary directory.
type Server struct {
	// URL connects as guest (allowed from loopback).
	URL  string
	Port int

	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

var (
	shared     *Server
	sharedErr  error
	sharedOnce sync.Once
	names      atomic.Int64
)

// Main runs the tests and stops a server they started.
func Main(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}

// URL returns the AMQP URL of the shared test server.
func URL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv("FERRY_TEST_AMQP_URL"); u != "" {
		return u
	}
	sharedOnce.Do(func() { shared, sharedErr = Start() })
	if sharedErr != nil {
		unavailable(tb, sharedErr)
	}
	return shared.URL
}

// Name returns a name for an exchange or queue no other test uses.
func Name(tb testing.TB, what string) string {
	return fmt.Sprintf("ferry-test-%s-%d-%d", what, os.Getpid(), names.Add(1))
}

func unavailable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv("FERRY_REQUIRE_RABBITMQ") == "1" {
		tb.Fatalf("RabbitMQ is required (FERRY_REQUIRE_RABBITMQ=1) but unavailable: %v", err)
	}
	tb.Skipf("no RabbitMQ: %v", err)
}

// Private starts a server only the calling test uses; it is stopped at
// the end of the test.
func Private(tb testing.TB) *Server {
	tb.Helper()
	s, err := Start()
	if err != nil {
		unavailable(tb, err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// FindServer returns the rabbitmq-server script: $FERRY_RABBITMQ_SERVER,
// else rabbitmq-server on PATH, else Debian's /usr/lib/rabbitmq/bin.
func FindServer() (string, error) {
	if p := os.Getenv("FERRY_RABBITMQ_SERVER"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("rabbitmq-server"); err == nil {
		return p, nil
	}
	if p := "/usr/lib/rabbitmq/bin/rabbitmq-server"; fileExists(p) {
		return p, nil
	}
	return "", errors.New("rabbitmq-server not found: install RabbitMQ (Debian: apt-get install rabbitmq-server) or set FERRY_RABBITMQ_SERVER")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Start starts a server on a free loopback port and waits until it
// accepts connections.
func Start() (*Server, error) {
	bin, err := FindServer()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ferry-rabbitmq-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s.Port = port
		if err = s.start(bin); err == nil {
			s.URL = fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", port)
			return s, nil
		}
		if attempt == 2 {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	return nil, errors.New("unreachable")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start runs the server on s.Port with its data in s.dir.
func (s *Server) start(bin string) error {
	conf := fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\nloopback_users = none\nlog.console = false\nlog.file.level = warning\nmax_message_size = 1048576\n", s.Port)
	if err := os.WriteFile(filepath.Join(s.dir, "rabbitmq.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	dist, err := freePort()
	if err != nil {
		return err
	}
	env := []string{
		"HOME=" + s.dir, "PATH=" + os.Getenv("PATH"),
		"RABBITMQ_NODENAME=ferrytest" + strconv.Itoa(s.Port) + "@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1", "RABBITMQ_DIST_PORT=" + strconv.Itoa(dist),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(s.dir, "mnesia"), "RABBITMQ_LOG_BASE=" + filepath.Join(s.dir, "log"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(s.dir, "rabbitmq.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(s.dir, "enabled_plugins"),
		"ERL_EPMD_ADDRESS=127.0.0.1",
	}
	args := []string{bin}
	if os.Geteuid() == 0 {
		// The server refuses nothing as root, but its files and the
		// Erlang cookie belong to the rabbitmq user when it exists.
		if u, err := user.Lookup("rabbitmq"); err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			if err := chownAll(s.dir, uid, gid); err != nil {
				return err
			}
			args = append([]string{"runuser", "-u", "rabbitmq", "--", "env"}, append(env, bin)...)
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.Dir = s.dir
	out, err := os.Create(filepath.Join(s.dir, "server.out"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %w", bin, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); close(s.done) }()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("rabbitmq-server exited at start: %s", s.tail())
		default:
		}
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port), time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.kill()
	return fmt.Errorf("rabbitmq-server did not listen on port %d within 90s: %s", s.Port, s.tail())
}

func chownAll(dir string, uid, gid int) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

func (s *Server) tail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.out"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return strings.Join(lines, " | ")
}

func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// Halt stops the server abruptly (SIGKILL), as a crash does.
func (s *Server) Halt() { s.kill() }

// Resume starts a halted server again on the same port with its data.
func (s *Server) Resume(tb testing.TB) {
	tb.Helper()
	bin, err := FindServer()
	if err == nil {
		err = s.start(bin)
	}
	if err != nil {
		tb.Fatalf("resume RabbitMQ: %v", err)
	}
}

// Stop stops the server and removes its directory.
func (s *Server) Stop() {
	s.kill()
	os.RemoveAll(s.dir)
}
