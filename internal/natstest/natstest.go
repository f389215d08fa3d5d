// Package natstest gives tests a real NATS server with JetStream
// (Debian's nats-server 2.9.10), through servertest: the server
// scripts/test.sh started (FERRY_TEST_NATS_URL), or one the test binary
// starts for itself; FERRY_REQUIRE_NATS=1 turns a skip for want of it
// into a failure. The program is the one FERRY_NATS_SERVER names, or
// nats-server on PATH.
//
// The server runs with `-js -sd DIR -a 127.0.0.1 -p PORT` (no monitoring
// port), so JetStream keeps its streams in DIR: a server killed with
// Halt and started again with Resume has them all.
//
// Tests share the server and keep apart by naming their own subjects and
// streams (Names).
//
//	func TestMain(m *testing.M) { natstest.Main(m) }
package natstest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/servertest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server is the NATS kind of test server.
var Server = &servertest.Server{
	Name:       "NATS",
	URLEnv:     "FERRY_TEST_NATS_URL",
	RequireEnv: "FERRY_REQUIRE_NATS",
	Start:      start,
}

var seq atomic.Int64

// Main runs the tests and stops a server they started.
func Main(m *testing.M) { servertest.Main(m, Server) }

// URL returns the nats:// URL of the shared test server.
func URL(tb testing.TB) string { tb.Helper(); return Server.URL(tb) }

// Own is a server only one test uses (Private), with Halt and Resume.
type Own = servertest.Own

// Private starts a server only the calling test uses; it is stopped at
// the end of the test.
func Private(tb testing.TB) *Own { tb.Helper(); return Server.Private(tb) }

// Names are a subject prefix and a JetStream stream name no other test
// uses: Subject is "ferry.test.<pid>.<n>" (subscribe to Subject+".>"),
// Stream is "FERRY_TEST_<pid>_<n>".
type Names struct {
	Subject, Stream string
}

// NewNames returns names for the calling test.
func NewNames(tb testing.TB) Names {
	n := seq.Add(1)
	return Names{
		Subject: fmt.Sprintf("ferry.test.%d.%d", os.Getpid(), n),
		Stream:  fmt.Sprintf("FERRY_TEST_%d_%d", os.Getpid(), n),
	}
}

// Connect returns a connection to url, closed when the test ends.
func Connect(tb testing.TB, url string) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(url, nats.Timeout(10*time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		tb.Fatalf("natstest: connect to %s: %v", url, err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// Stream creates a file-backed JetStream stream named n.Stream taking
// n.Subject+".>" on the server at url (with cfg's other fields, when
// given) and returns the JetStream context. The stream is deleted when
// the test ends.
func Stream(tb testing.TB, url string, n Names, cfg ...jetstream.StreamConfig) jetstream.JetStream {
	tb.Helper()
	js, err := jetstream.New(Connect(tb, url))
	if err != nil {
		tb.Fatalf("natstest: jetstream: %v", err)
	}
	c := jetstream.StreamConfig{}
	if len(cfg) > 0 {
		c = cfg[0]
	}
	c.Name, c.Storage = n.Stream, jetstream.FileStorage
	if len(c.Subjects) == 0 {
		c.Subjects = []string{n.Subject + ".>"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, c); err != nil {
		tb.Fatalf("natstest: create stream %s: %v", n.Stream, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, n.Stream)
	})
	return js
}

// start runs nats-server with JetStream on a free loopback port, its
// store in a directory of its own, and waits until JetStream answers.
func start() (*servertest.Process, string, error) {
	bin, err := servertest.Find("FERRY_NATS_SERVER", "nats-server")
	if err != nil {
		return nil, "", fmt.Errorf("%w; Debian: apt-get install nats-server", err)
	}
	dir, err := servertest.TempDir("nats")
	if err != nil {
		return nil, "", err
	}
	store := filepath.Join(dir, "jetstream")
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := servertest.FreePort()
		if err != nil {
			return nil, "", err
		}
		url := fmt.Sprintf("nats://127.0.0.1:%d", port)
		p, err := servertest.Start(servertest.Command{
			Args:    []string{bin, "-js", "-sd", store, "-a", "127.0.0.1", "-p", fmt.Sprint(port)},
			Env:     []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")},
			Dir:     dir,
			Timeout: 60 * time.Second,
			Ready:   ready(url),
		})
		if err == nil {
			return p, url, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, "", lastErr
}

// ready is a Ready check: JetStream answers an account info request.
func ready(url string) func() error {
	return func() error {
		nc, err := nats.Connect(url, nats.Timeout(time.Second), nats.NoReconnect())
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = js.AccountInfo(ctx)
		return err
	}
}
