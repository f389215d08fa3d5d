// Package amqptest gives tests a real RabbitMQ (Debian's rabbitmq-server),
// through servertest: the server scripts/test.sh started
// (FERRY_TEST_AMQP_URL), or one the test binary starts for itself;
// FERRY_REQUIRE_RABBITMQ=1 turns a skip for want of it into a failure.
//
// Tests share the server and keep apart by naming their own exchanges and
// queues (Name). A test that takes the server down gets one of its own
// with Private, and stops and starts it with Halt and Resume (same port,
// same data).
//
//	func TestMain(m *testing.M) { amqptest.Main(m) }
package amqptest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/ferryhq/ferry/internal/servertest"
)

// Server is the RabbitMQ kind of test server.
var Server = &servertest.Server{
	Name:       "RabbitMQ",
	URLEnv:     "FERRY_TEST_AMQP_URL",
	RequireEnv: "FERRY_REQUIRE_RABBITMQ",
	Start:      start,
}

var names atomic.Int64

// Main runs the tests and stops a server they started.
func Main(m *testing.M) { servertest.Main(m, Server) }

// URL returns the AMQP URL of the shared test server.
func URL(tb testing.TB) string { tb.Helper(); return Server.URL(tb) }

// Name returns a name for an exchange or queue no other test uses.
func Name(tb testing.TB, what string) string {
	return fmt.Sprintf("ferry-test-%s-%d-%d", what, os.Getpid(), names.Add(1))
}

// Own is a server only one test uses (Private), with Halt and Resume.
type Own = servertest.Own

// Private starts a server only the calling test uses; it is stopped at
// the end of the test.
func Private(tb testing.TB) *Own { tb.Helper(); return Server.Private(tb) }

// start runs rabbitmq-server on a free loopback port with its data in a
// directory of its own.
func start() (*servertest.Process, string, error) {
	bin, err := servertest.Find("FERRY_RABBITMQ_SERVER", "rabbitmq-server", "/usr/lib/rabbitmq/bin/rabbitmq-server")
	if err != nil {
		return nil, "", fmt.Errorf("%w; Debian: apt-get install rabbitmq-server", err)
	}
	dir, err := servertest.TempDir("rabbitmq")
	if err != nil {
		return nil, "", err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := servertest.FreePort()
		if err != nil {
			return nil, "", err
		}
		dist, err := servertest.FreePort()
		if err != nil {
			return nil, "", err
		}
		conf := fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\nloopback_users = none\nlog.console = false\nlog.file.level = warning\nmax_message_size = 1048576\n", port)
		if err := os.WriteFile(filepath.Join(dir, "rabbitmq.conf"), []byte(conf), 0o644); err != nil {
			return nil, "", err
		}
		p, err := servertest.Start(servertest.Command{
			Args: []string{bin},
			Env: []string{
				"HOME=" + dir, "PATH=" + os.Getenv("PATH"),
				"RABBITMQ_NODENAME=ferrytest" + strconv.Itoa(port) + "@localhost",
				"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1", "RABBITMQ_DIST_PORT=" + strconv.Itoa(dist),
				"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"), "RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
				"RABBITMQ_CONFIG_FILE=" + filepath.Join(dir, "rabbitmq.conf"),
				"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(dir, "enabled_plugins"),
				"ERL_EPMD_ADDRESS=127.0.0.1",
			},
			Dir:   dir,
			User:  "rabbitmq",
			Ready: servertest.Dial(fmt.Sprintf("127.0.0.1:%d", port)),
		})
		if err == nil {
			return p, fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", port), nil
		}
		lastErr = err
	}
	_ = os.RemoveAll(dir)
	return nil, "", lastErr
}
