// Package mongotest gives tests a MongoDB-compatible server through
// servertest: the server scripts/test.sh started (FERRY_TEST_MONGODB_URL),
// or one the test binary starts for itself; FERRY_REQUIRE_MONGODB=1 turns
// a skip for want of it into a failure.
//
// No MongoDB server can be installed on the machines Ferry is tested on,
// so the server is FerretDB v1.24.2 (the MongoDB wire protocol over
// SQLite), with its SQLite files in a temporary directory: the program
// FERRY_FERRETDB_SERVER names, or ferretdb on PATH. FerretDB's release
// check refuses a binary built by `go install ...@v1.24.2` (its
// build/version/version.txt is empty in the module zip): build it from a
// copy of the module with that file holding "v1.24.2".
//
// Tests share the server and keep apart by their own databases
// (Database). A test that takes the server down gets one of its own with
// Private, and stops and starts it with Halt and Resume (same port, same
// data).
//
//	func TestMain(m *testing.M) { mongotest.Main(m) }
package mongotest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/servertest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Server is the MongoDB (FerretDB) kind of test server.
var Server = &servertest.Server{
	Name:       "MongoDB (FerretDB)",
	URLEnv:     "FERRY_TEST_MONGODB_URL",
	RequireEnv: "FERRY_REQUIRE_MONGODB",
	Start:      start,
}

var dbs atomic.Int64

// Main runs the tests and stops a server they started.
func Main(m *testing.M) { servertest.Main(m, Server) }

// URL returns the mongodb:// URI of the shared test server (no
// authentication).
func URL(tb testing.TB) string { tb.Helper(); return Server.URL(tb) }

// Connect returns a client of the server at uri, disconnected when the
// test ends.
func Connect(tb testing.TB, uri string) *mongo.Client {
	tb.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		tb.Fatalf("mongotest: connect: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Disconnect(ctx)
	})
	return c
}

// Database returns the name of a database only the calling test uses on
// the shared server; it is dropped when the test ends.
func Database(tb testing.TB) string {
	tb.Helper()
	return DatabaseOn(tb, URL(tb))
}

// DatabaseOn is Database on the server at uri.
func DatabaseOn(tb testing.TB, uri string) string {
	tb.Helper()
	name := fmt.Sprintf("ferry_test_%d_%d", os.Getpid(), dbs.Add(1))
	c := Connect(tb, uri)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Database(name).Drop(ctx)
	})
	return name
}

// Own is a server only one test uses (Private), with Halt and Resume.
type Own = servertest.Own

// Private starts a server only the calling test uses; it is stopped at
// the end of the test.
func Private(tb testing.TB) *Own { tb.Helper(); return Server.Private(tb) }

// start runs FerretDB with its SQLite backend on a free loopback port,
// telemetry off and no debug listener, and waits until it answers ping.
func start() (*servertest.Process, string, error) {
	bin, err := servertest.Find("FERRY_FERRETDB_SERVER", "ferretdb")
	if err != nil {
		return nil, "", fmt.Errorf("%w; build it from github.com/FerretDB/FerretDB@v1.24.2 (cmd/ferretdb)", err)
	}
	dir, err := servertest.TempDir("ferretdb")
	if err != nil {
		return nil, "", err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, "", fmt.Errorf("server dir: %w", err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := servertest.FreePort()
		if err != nil {
			return nil, "", err
		}
		uri := fmt.Sprintf("mongodb://127.0.0.1:%d/", port)
		p, err := servertest.Start(servertest.Command{
			Args: []string{bin, "--handler=sqlite", "--sqlite-url=file:" + data + "/",
				fmt.Sprintf("--listen-addr=127.0.0.1:%d", port), "--telemetry=disable", "--state-dir=" + dir,
				"--debug-addr=-", "--log-level=warn", "--no-log-uuid"},
			Env:     []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")},
			Dir:     dir,
			Timeout: 60 * time.Second,
			Ready:   ping(uri),
		})
		if err == nil {
			return p, uri, nil
		}
		lastErr = err
	}
	_ = os.RemoveAll(dir)
	return nil, "", lastErr
}

// ping is a Ready check: the server answers the ping command.
func ping(uri string) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(time.Second))
		if err != nil {
			return err
		}
		defer c.Disconnect(ctx)
		return c.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
	}
}
