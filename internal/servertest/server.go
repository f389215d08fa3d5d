package servertest

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// Server is one kind of real server the tests use (RabbitMQ, ClickHouse,
// S3 ...): the one named by an environment variable, or else one the
// test binary starts for itself and shares among its tests.
type Server struct {
	// Name is what messages call it: "RabbitMQ".
	Name string
	// URLEnv names the variable holding a running server's address;
	// scripts/test.sh sets it (FERRY_TEST_AMQP_URL).
	URLEnv string
	// RequireEnv, when "1", makes an unavailable server fail the test
	// rather than skip it; scripts/test.sh sets it (FERRY_REQUIRE_RABBITMQ).
	RequireEnv string
	// Start starts a server of this kind in a directory of its own and
	// returns it with the address tests connect to.
	Start func() (*Process, string, error)

	once sync.Once
	proc *Process
	url  string
	err  error
}

// URL returns the address of the shared server, starting it on first use
// unless URLEnv names one. Without a server the test is skipped, or
// failed under RequireEnv.
func (s *Server) URL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv(s.URLEnv); u != "" {
		return u
	}
	s.once.Do(func() { s.proc, s.url, s.err = s.start() })
	if s.err != nil {
		s.Unavailable(tb, s.err)
	}
	return s.url
}

// Private starts a server only the calling test uses (one it may kill and
// restart); it is stopped when the test ends.
func (s *Server) Private(tb testing.TB) *Own {
	tb.Helper()
	p, u, err := s.start()
	if err != nil {
		s.Unavailable(tb, err)
	}
	tb.Cleanup(p.Stop)
	return &Own{URL: u, proc: p, name: s.Name}
}

// start is Start, tried again (up to three times) when the server could
// not bind its port: FreePort's port can be taken by another process
// between the check and the server's bind, and each try picks a new one.
func (s *Server) start() (*Process, string, error) {
	var err error
	for range 3 {
		var p *Process
		var u string
		if p, u, err = s.Start(); err == nil || !portTaken(err) {
			return p, u, err
		}
	}
	return nil, "", err
}

// portTaken reports whether a failed start says the port was in use, as
// the servers' logs word it.
func portTaken(err error) bool {
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"address already in use", "eaddrinuse", "port is already", "address in use", "bind:"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// Own is a server only one test uses, which it may crash and start again.
type Own struct {
	URL  string
	proc *Process
	name string
}

// Halt stops the server abruptly (SIGKILL), as a crash does.
func (o *Own) Halt() { o.proc.Kill() }

// Resume starts a halted server again on the same port with its data.
func (o *Own) Resume(tb testing.TB) {
	tb.Helper()
	if err := o.proc.Restart(); err != nil {
		tb.Fatalf("resume %s: %v", o.name, err)
	}
}

// Unavailable skips the test for want of the server, or fails it when
// RequireEnv is "1".
func (s *Server) Unavailable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv(s.RequireEnv) == "1" {
		tb.Fatalf("%s is required (%s=1) but unavailable: %v", s.Name, s.RequireEnv, err)
	}
	tb.Skipf("no %s: %v", s.Name, err)
}

// Stop stops the shared server if this binary started it.
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Stop()
		s.proc = nil
	}
}

// Main runs the tests and then stops the shared servers they started:
//
//	func TestMain(m *testing.M) { servertest.Main(m, amqptest.Server) }
func Main(m *testing.M, servers ...*Server) {
	code := m.Run()
	for _, s := range servers {
		s.Stop()
	}
	os.Exit(code)
}

// StartShared starts the server for a whole test run (scripts/test.sh,
// through cmd/testservers) and returns the environment that points tests
// at it.
func (s *Server) StartShared() (*Process, []string, error) {
	p, u, err := s.start()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	return p, []string{s.URLEnv + "=" + u, s.RequireEnv + "=1"}, nil
}
