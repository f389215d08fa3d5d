// Package redistest gives tests a Redis server through servertest: the
// server scripts/test.sh started (FERRY_TEST_REDIS_URL, a
// redis://127.0.0.1:PORT/0 URL), or one the test binary starts for
// itself; FERRY_REQUIRE_REDIS=1 turns a skip for want of it into a
// failure.
//
// The server is the program FERRY_REDIS_SERVER names, or redis-server on
// PATH (Debian 12's redis-server 7.0), on a free loopback port with its
// data in a temporary directory, no RDB snapshots and an append-only file
// fsynced on every write, so a server killed with SIGKILL and started
// again (Own.Halt, Own.Resume) keeps every write it acknowledged.
//
// Tests share the server and keep apart by key prefixes (Prefix). A test
// that takes the server down gets one of its own with Private.
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
package redistest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/servertest"
	"github.com/redis/go-redis/v9"
)

// Server is the Redis kind of test server.
var Server = &servertest.Server{
	Name:       "Redis",
	URLEnv:     "FERRY_TEST_REDIS_URL",
	RequireEnv: "FERRY_REQUIRE_REDIS",
	Start:      start,
}

var prefixes atomic.Int64

// Main runs the tests and stops a server they started.
func Main(m *testing.M) { servertest.Main(m, Server) }

// URL returns the redis:// URL of the shared test server.
func URL(tb testing.TB) string { tb.Helper(); return Server.URL(tb) }

// Own is a server only one test uses (Private), with Halt and Resume.
type Own = servertest.Own

// Private starts a server only the calling test uses; it is stopped at
// the end of the test.
func Private(tb testing.TB) *Own { tb.Helper(); return Server.Private(tb) }

// Client returns a client of the server at url, closed when the test
// ends.
func Client(tb testing.TB, url string) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	c := redis.NewClient(opt)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Prefix returns a key prefix ("ferrytest:<pid>:<n>:") only the calling
// test uses on the shared server; its keys are deleted when the test
// ends.
func Prefix(tb testing.TB) string {
	tb.Helper()
	p := fmt.Sprintf("ferrytest:%d:%d:", os.Getpid(), prefixes.Add(1))
	url := URL(tb)
	tb.Cleanup(func() {
		c := Client(tb, url)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, escape(p)+"*", 1000).Iterator()
		for iter.Next(ctx) {
			_ = c.Del(ctx, iter.Val()).Err()
		}
	})
	return p
}

// escape quotes the glob characters of a literal prefix.
func escape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

// start runs redis-server on a free loopback port and waits until it
// answers PING.
func start() (*servertest.Process, string, error) {
	bin, err := servertest.Find("FERRY_REDIS_SERVER", "redis-server")
	if err != nil {
		return nil, "", fmt.Errorf("%w; install Debian's redis-server", err)
	}
	dir, err := servertest.TempDir("redis")
	if err != nil {
		return nil, "", err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := servertest.FreePort()
		if err != nil {
			return nil, "", err
		}
		url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
		p, err := servertest.Start(servertest.Command{
			Args: []string{bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir,
				"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no",
				"--protected-mode", "no", "--loglevel", "warning"},
			Dir:     dir,
			Timeout: 30 * time.Second,
			Ready:   ping(url),
		})
		if err == nil {
			return p, url, nil
		}
		lastErr = err
	}
	_ = os.RemoveAll(dir)
	return nil, "", lastErr
}

// ping is a Ready check: the server answers PING (and has loaded its
// append-only file: a loading server answers -LOADING).
func ping(url string) func() error {
	return func() error {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return err
		}
		opt.MaxRetries = -1
		c := redis.NewClient(opt)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return c.Ping(ctx).Err()
	}
}
