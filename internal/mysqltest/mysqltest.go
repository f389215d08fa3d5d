// Package mysqltest gives tests a MySQL-compatible server through
// servertest: the server scripts/test.sh started (FERRY_TEST_MYSQL_URL, a
// go-sql-driver DSN such as root@tcp(127.0.0.1:3306)/), or one the test
// binary starts for itself; FERRY_REQUIRE_MYSQL=1 turns a skip for want
// of it into a failure.
//
// The server is MariaDB (Debian's 10.11 was tested): mariadbd and
// mariadb-install-db from FERRY_MARIADB_SERVER and
// FERRY_MARIADB_INSTALL_DB, or on PATH or in /usr/sbin. Each Start
// initialises a data directory of its own (a second or so) and runs the
// server on a free loopback port with --skip-name-resolve, so root@127.0.0.1
// (created by install-db without a password) is the account tests use.
//
// The server writes a binary log for change data capture: server_id 1,
// log_bin, binlog_format=ROW, binlog_row_image=FULL and
// binlog_row_metadata=FULL (column names in every TABLE_MAP event).
//
// Tests share the server and keep apart by their own databases
// (Database). A test that takes the server down gets one of its own with
// Private, and stops and starts it with Halt and Resume (same port, same
// data).
//
//	func TestMain(m *testing.M) { mysqltest.Main(m) }
package mysqltest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/servertest"
	_ "github.com/go-sql-driver/mysql" // the driver
)

// Server is the MySQL (MariaDB) kind of test server.
var Server = &servertest.Server{
	Name:       "MySQL (MariaDB)",
	URLEnv:     "FERRY_TEST_MYSQL_URL",
	RequireEnv: "FERRY_REQUIRE_MYSQL",
	Start:      start,
}

var dbs atomic.Int64

// Main runs the tests and stops a server they started.
func Main(m *testing.M) { servertest.Main(m, Server) }

// URL returns the DSN of the shared test server (root, no password, no
// database).
func URL(tb testing.TB) string { tb.Helper(); return Server.URL(tb) }

// Open returns a pool on the server at dsn, closed when the test ends.
func Open(tb testing.TB, dsn string) *sql.DB {
	tb.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		tb.Fatalf("mysqltest: open: %v", err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// Database creates a database only the calling test uses on the shared
// server and returns a DSN naming it; it is dropped when the test ends.
func Database(tb testing.TB) string {
	tb.Helper()
	return DatabaseOn(tb, URL(tb))
}

// DatabaseOn is Database on the server at dsn (which names no database).
func DatabaseOn(tb testing.TB, dsn string) string {
	tb.Helper()
	name := fmt.Sprintf("ferry_test_%d_%d", os.Getpid(), dbs.Add(1))
	db := Open(tb, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		tb.Fatalf("mysqltest: create database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
	})
	return WithDatabase(dsn, name)
}

// WithDatabase returns dsn (user@tcp(host:port)/[db][?params]) naming db.
func WithDatabase(dsn, db string) string {
	i := strings.LastIndex(dsn, "/")
	if i < 0 {
		return dsn + "/" + db
	}
	rest := dsn[i+1:]
	params := ""
	if j := strings.Index(rest, "?"); j >= 0 {
		params = rest[j:]
	}
	return dsn[:i+1] + db + params
}

// Own is a server only one test uses (Private), with Halt and Resume.
type Own = servertest.Own

// Private starts a server only the calling test uses; it is stopped at
// the end of the test.
func Private(tb testing.TB) *Own { tb.Helper(); return Server.Private(tb) }

func find(env, name string) (string, error) {
	p, err := servertest.Find(env, name, "/usr/sbin/"+name, "/usr/bin/"+name)
	if err != nil {
		return "", fmt.Errorf("%w; install mariadb-server", err)
	}
	return p, nil
}

// start initialises a data directory and runs mariadbd on a free
// loopback port, waiting until a ping over TCP succeeds.
func start() (*servertest.Process, string, error) {
	server, err := find("FERRY_MARIADB_SERVER", "mariadbd")
	if err != nil {
		return nil, "", err
	}
	install, err := find("FERRY_MARIADB_INSTALL_DB", "mariadb-install-db")
	if err != nil {
		return nil, "", err
	}
	dir, err := servertest.TempDir("mariadb")
	if err != nil {
		return nil, "", err
	}
	data := filepath.Join(dir, "data")
	args := []string{install, "--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=mysql")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", fmt.Errorf("mariadb-install-db: %w: %s", err, tail(string(out)))
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := servertest.FreePort()
		if err != nil {
			return nil, "", err
		}
		dsn := fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port)
		p, err := servertest.Start(servertest.Command{
			Args: []string{server, "--no-defaults", "--datadir=" + data, "--socket=" + filepath.Join(dir, "sock"),
				fmt.Sprintf("--port=%d", port), "--bind-address=127.0.0.1", "--skip-name-resolve",
				"--pid-file=" + filepath.Join(dir, "pid"), "--log-error=" + filepath.Join(dir, "error.log"),
				"--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M",
				// The binary log for the mysql source's CDC mode: row events
				// with whole images and column names, GTIDs in domain 0.
				"--server-id=1", "--log-bin=" + filepath.Join(data, "binlog"), "--binlog-format=ROW",
				"--binlog-row-image=FULL", "--binlog-row-metadata=FULL", "--expire-logs-days=1"},
			Env:     []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")},
			Dir:     dir,
			User:    "mysql",
			Timeout: 60 * time.Second,
			Ready:   ping(dsn),
			Log:     "error.log",
		})
		if err == nil {
			return p, dsn, nil
		}
		lastErr = err
	}
	_ = os.RemoveAll(dir)
	return nil, "", lastErr
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// ping is a Ready check: the server answers a ping over TCP.
func ping(dsn string) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		db, err := sql.Open("mysql", dsn+"?timeout=1s")
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	}
}
