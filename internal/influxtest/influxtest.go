// Package influxtest gives tests a real InfluxDB (1.8, built from the Go
// module proxy: github.com/influxdata/influxdb/cmd/influxd@v1.8.10),
// through servertest: the server scripts/test.sh started
// (FERRY_TEST_INFLUXDB_URL), or one the test binary starts for itself
// (the program FERRY_INFLUXD_SERVER names, else influxd on PATH);
// FERRY_REQUIRE_INFLUXDB=1 turns a skip for want of it into a failure.
//
// InfluxDB 1.8 serves its v1 API and the v2-compatible /api/v2/write and
// (flux-enabled) /api/v2/query; with authentication off, as here, it takes
// any token, and a v2 bucket is "database" or "database/retention-policy".
// Tests keep apart by their own databases (Database). A test that takes
// the server down gets one of its own with Private.
//
//	func TestMain(m *testing.M) { influxtest.Main(m) }
package influxtest

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/servertest"
)

// Server is the InfluxDB kind of test server.
var Server = &servertest.Server{
	Name:       "InfluxDB",
	URLEnv:     "FERRY_TEST_INFLUXDB_URL",
	RequireEnv: "FERRY_REQUIRE_INFLUXDB",
	Start:      start,
}

var dbs atomic.Int64

// Main runs the tests and stops a server they started.
func Main(m *testing.M) { servertest.Main(m, Server) }

// URL returns the HTTP URL of the shared test server.
func URL(tb testing.TB) string { tb.Helper(); return Server.URL(tb) }

// Database creates a database (a v2 bucket) only the calling test uses
// on the server at base and returns its name; it is dropped when the
// test ends.
func Database(tb testing.TB, base string) string {
	tb.Helper()
	name := fmt.Sprintf("ferry_test_%d_%d", os.Getpid(), dbs.Add(1))
	if _, err := Query(base, "", "CREATE DATABASE "+name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _, _ = Query(base, "", "DROP DATABASE "+name) })
	return name
}

// Query runs an InfluxQL statement through the v1 /query endpoint and
// returns the JSON answer.
func Query(base, db, q string) (string, error) {
	form := url.Values{"q": {q}}
	if db != "" {
		form.Set("db", db)
	}
	resp, err := http.PostForm(base+"/query", form)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.Contains(string(b), `"error"`) {
		return "", fmt.Errorf("%s: %d %s", q, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// Write writes line protocol to db through the v1 /write endpoint, in
// nanoseconds.
func Write(base, db, lines string) error {
	resp, err := http.Post(base+"/write?db="+url.QueryEscape(db), "text/plain", strings.NewReader(lines))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("write: %d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

// Own is a server only one test uses (Private), with Halt and Resume.
type Own = servertest.Own

// Private starts a server only the calling test uses; it is stopped at
// the end of the test.
func Private(tb testing.TB) *Own { tb.Helper(); return Server.Private(tb) }

// Config writes an influxd configuration for dir: its files under dir,
// HTTP and RPC on the given loopback ports, Flux on, no reporting, quiet
// logs.
func Config(dir string, httpPort, rpcPort int) error {
	conf := fmt.Sprintf(`reporting-disabled = true
bind-address = "127.0.0.1:%[3]d"
[meta]
  dir = "%[1]s/meta"
[data]
  dir = "%[1]s/data"
  wal-dir = "%[1]s/wal"
  query-log-enabled = false
[monitor]
  store-enabled = false
[continuous_queries]
  enabled = false
[http]
  bind-address = "127.0.0.1:%[2]d"
  log-enabled = false
  flux-enabled = true
[logging]
  level = "warn"
  suppress-logo = true
`, dir, httpPort, rpcPort)
	return os.WriteFile(filepath.Join(dir, "influxdb.conf"), []byte(conf), 0o644)
}

// start runs influxd on free loopback ports and waits until /health
// passes.
func start() (*servertest.Process, string, error) {
	bin, err := servertest.Find("FERRY_INFLUXD_SERVER", "influxd")
	if err != nil {
		return nil, "", fmt.Errorf("%w; go install github.com/influxdata/influxdb/cmd/influxd@v1.8.10", err)
	}
	dir, err := servertest.TempDir("influxdb")
	if err != nil {
		return nil, "", err
	}
	httpPort, err := servertest.FreePort()
	if err != nil {
		return nil, "", err
	}
	rpcPort, err := servertest.FreePort()
	if err != nil {
		return nil, "", err
	}
	if err := Config(dir, httpPort, rpcPort); err != nil {
		return nil, "", err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	client := &http.Client{Timeout: 2 * time.Second}
	p, err := servertest.Start(servertest.Command{
		Args:    []string{bin, "-config", filepath.Join(dir, "influxdb.conf")},
		Dir:     dir,
		Timeout: 60 * time.Second,
		Ready: func() error {
			resp, err := client.Get(base + "/health")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("health: %s", resp.Status)
			}
			return nil
		},
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", err
	}
	return p, base, nil
}
