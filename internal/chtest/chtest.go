// Package chtest gives tests a real ClickHouse (Debian's
// clickhouse-server), through servertest: the server scripts/test.sh
// started (FERRY_TEST_CLICKHOUSE_URL), or one the test binary starts for
// itself; FERRY_REQUIRE_CLICKHOUSE=1 turns a skip for want of it into a
// failure. Tests keep apart by their own databases (Database).
//
//	func TestMain(m *testing.M) { chtest.Main(m) }
package chtest

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

// Server is the ClickHouse kind of test server.
var Server = &servertest.Server{
	Name:       "ClickHouse",
	URLEnv:     "FERRY_TEST_CLICKHOUSE_URL",
	RequireEnv: "FERRY_REQUIRE_CLICKHOUSE",
	Start:      start,
}

var dbs atomic.Int64

// Main runs the tests and stops a server they started.
func Main(m *testing.M) { servertest.Main(m, Server) }

// URL returns the HTTP URL of the shared test server (user default, no
// password).
func URL(tb testing.TB) string { tb.Helper(); return Server.URL(tb) }

// Database creates a database only the calling test uses and returns
// its name; it is dropped when the test ends.
func Database(tb testing.TB) string {
	tb.Helper()
	u := URL(tb)
	name := fmt.Sprintf("ferry_test_%d_%d", os.Getpid(), dbs.Add(1))
	if _, err := Query(u, "CREATE DATABASE "+name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _, _ = Query(u, "DROP DATABASE IF EXISTS "+name) })
	return name
}

// Query runs one statement over HTTP and returns the answer.
func Query(base, query string) (string, error) {
	resp, err := http.Post(base+"/?query="+url.QueryEscape(query), "text/plain", nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %d %s", query, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// Config writes a server configuration for dir and the two ports.
func Config(dir string, httpPort, tcpPort int) error {
	for _, d := range []string{"data", "tmp", "log", "user_files", "format_schemas"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	conf := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>%[1]s/log/server.log</log><errorlog>%[1]s/log/error.log</errorlog><console>0</console></logger>
  <http_port>%[2]d</http_port>
  <tcp_port>%[3]d</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>%[1]s/data/</path>
  <tmp_path>%[1]s/tmp/</tmp_path>
  <user_files_path>%[1]s/user_files/</user_files_path>
  <format_schema_path>%[1]s/format_schemas/</format_schema_path>
  <users_config>%[1]s/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>5368709</mark_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
</yandex>
`, dir, httpPort, tcpPort)
	users := `<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>1000000000</max_memory_usage></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`
	if err := os.WriteFile(filepath.Join(dir, "config.xml"), []byte(conf), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "users.xml"), []byte(users), 0o644)
}

// start runs clickhouse-server on free loopback ports and waits until it
// answers.
func start() (*servertest.Process, string, error) {
	bin, err := servertest.Find("FERRY_CLICKHOUSE_SERVER", "clickhouse-server", "/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server")
	if err != nil {
		return nil, "", fmt.Errorf("%w; Debian: apt-get install clickhouse-server", err)
	}
	dir, err := servertest.TempDir("clickhouse")
	if err != nil {
		return nil, "", err
	}
	httpPort, err := servertest.FreePort()
	if err != nil {
		return nil, "", err
	}
	tcpPort, err := servertest.FreePort()
	if err != nil {
		return nil, "", err
	}
	if err := Config(dir, httpPort, tcpPort); err != nil {
		return nil, "", err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	p, err := servertest.Start(servertest.Command{
		Args:    []string{bin, "--config-file=" + filepath.Join(dir, "config.xml")},
		Dir:     dir,
		User:    "clickhouse",
		Log:     "log/error.log",
		Timeout: 60 * time.Second,
		Ready: func() error {
			resp, err := http.Get(base + "/ping")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("ping: %s", resp.Status)
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
