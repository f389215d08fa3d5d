// Package chtest gives tests a real ClickHouse: the server named by
// FERRY_TEST_CLICKHOUSE_URL (scripts/test.sh starts one), or else a
// throwaway server of its own (Debian's clickhouse-server on a free
// loopback port, in a temporary directory, as the clickhouse user when
// the caller is root), one per test binary. When none can be had, tests
// are skipped with the reason, unless FERRY_REQUIRE_CLICKHOUSE=1 (set by
// scripts/test.sh), in which case they fail. Tests keep apart by their
// own databases (Database).
//
//	func TestMain(m *testing.M) { chtest.Main(m) }
package chtest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
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

// Server is a ClickHouse server run from a temporary directory.
type Server struct {
	URL  string // the HTTP interface, user default without a password
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

var (
	shared     *Server
	sharedErr  error
	sharedOnce sync.Once
	dbs        atomic.Int64
)

// Main runs the tests and stops a server they started.
func Main(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}

// URL returns the HTTP URL of the shared test server.
func URL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv("FERRY_TEST_CLICKHOUSE_URL"); u != "" {
		return u
	}
	sharedOnce.Do(func() { shared, sharedErr = Start() })
	if sharedErr != nil {
		if os.Getenv("FERRY_REQUIRE_CLICKHOUSE") == "1" {
			tb.Fatalf("ClickHouse is required (FERRY_REQUIRE_CLICKHOUSE=1) but unavailable: %v", sharedErr)
		}
		tb.Skipf("no ClickHouse: %v", sharedErr)
	}
	return shared.URL
}

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

// FindServer returns the clickhouse-server binary.
func FindServer() (string, error) {
	if p := os.Getenv("FERRY_CLICKHOUSE_SERVER"); p != "" {
		return p, nil
	}
	for _, p := range []string{"clickhouse-server", "/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"} {
		if q, err := exec.LookPath(p); err == nil {
			return q, nil
		}
	}
	return "", errors.New("clickhouse-server not found: install it (Debian: apt-get install clickhouse-server) or set FERRY_CLICKHOUSE_SERVER")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
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

// Start starts a server on free loopback ports and waits until it answers.
func Start() (*Server, error) {
	bin, err := FindServer()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ferry-clickhouse-")
	if err != nil {
		return nil, err
	}
	httpPort, err := freePort()
	if err != nil {
		return nil, err
	}
	tcpPort, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := Config(dir, httpPort, tcpPort); err != nil {
		return nil, err
	}
	args := []string{bin, "--config-file=" + filepath.Join(dir, "config.xml")}
	if os.Geteuid() == 0 {
		if u, err := user.Lookup("clickhouse"); err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			_ = filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
				if err == nil {
					_ = os.Lchown(p, uid, gid)
				}
				return nil
			})
			_ = os.Chmod(dir, 0o755)
			args = append([]string{"runuser", "-u", "clickhouse", "--"}, args...)
		}
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", httpPort), dir: dir, done: make(chan struct{})}
	s.cmd = exec.Command(args[0], args[1:]...)
	out, err := os.Create(filepath.Join(dir, "server.out"))
	if err != nil {
		return nil, err
	}
	s.cmd.Stdout, s.cmd.Stderr = out, out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { _ = s.cmd.Wait(); out.Close(); close(s.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			b, _ := os.ReadFile(filepath.Join(dir, "log", "error.log"))
			return nil, fmt.Errorf("clickhouse-server exited at start: %s", strings.TrimSpace(string(b)))
		default:
		}
		if resp, err := http.Get(s.URL + "/ping"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Stop()
	return nil, fmt.Errorf("clickhouse-server did not answer on %s within 60s", s.URL)
}

// Stop stops the server and removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	os.RemoveAll(s.dir)
}
