package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/go-sql-driver/mysql"
)

// connectionFields are the keys both connectors connect with.
func connectionFields() []connector.Field {
	return []connector.Field{
		connector.NewStringField("dsn").AsSecret().WithExample("iggy:secret@tcp(localhost:3306)/app").
			WithDoc("a go-sql-driver/mysql DSN (user:password@tcp(host:port)/database?param=value); required unless host is set"),
		connector.NewStringField("connection_string").AsSecret().WithDoc("the same as dsn"),
		connector.NewStringField("host").WithDoc("the server's host; overrides the DSN's"),
		connector.NewIntField("port").Between(1, 65535).WithDoc("the server's port (default 3306); overrides the DSN's"),
		connector.NewStringField("user").WithDoc("overrides the DSN's user"),
		connector.NewStringField("username").WithDoc("the same as user"),
		connector.NewStringField("password").AsSecret().WithDoc("overrides the DSN's password"),
		connector.NewStringField("database").WithDoc("overrides the DSN's database"),
		connector.NewEnumField("tls", "false", "true", "skip-verify", "preferred").
			WithDoc("TLS to the server, as the DSN's tls parameter"),
		connector.NewDurationField("connect_timeout").WithDefault(10 * time.Second).WithDoc("dial timeout"),
		connector.NewIntField("max_connections").Between(1, math.MaxInt32).WithDefault(4).WithDoc("connections in the pool"),
		connector.NewIntField("max_retries").Between(0, 100).WithDefault(3).
			WithDoc("retries of a failed statement (server down, deadlock) inside one call"),
		connector.NewDurationField("retry_delay").WithDefault(time.Second).WithDoc("wait before the first retry, growing linearly"),
	}
}

// dsnOf is dsn, or connection_string.
func dsnOf(s *connector.Settings) string {
	if d := s.String("dsn"); d != "" {
		return d
	}
	return s.String("connection_string")
}

// dsnKey is the key dsnOf's value came from, for errors about it.
func dsnKey(s *connector.Settings) string {
	if s.String("dsn") == "" && s.String("connection_string") != "" {
		return "connection_string"
	}
	return "dsn"
}

func lintConnection(s *connector.Settings, fail connector.FailFunc) {
	if s.String("dsn") != "" && s.String("connection_string") != "" {
		fail("connection_string", "cannot be set with dsn")
	}
	if s.String("user") != "" && s.String("username") != "" {
		fail("username", "cannot be set with user")
	}
	if dsnOf(s) == "" && s.String("host") == "" {
		fail("dsn", `required key is missing (or set connection_string, or host); expected a DSN such as "user:password@tcp(localhost:3306)/app"`)
	}
	if dsnOf(s) != "" {
		if _, err := mysql.ParseDSN(dsnOf(s)); err != nil {
			fail(dsnKey(s), "cannot be parsed: %s", scrubDSN(err.Error()))
		}
	}
}

// conn is how to connect, with the retry policy.
type conn struct {
	cfg        *mysql.Config
	maxConns   int
	maxRetries int
	retryDelay time.Duration
}

// connFrom reads the connection keys of a linted set.
func connFrom(s *connector.Settings) (*conn, error) {
	cfg := mysql.NewConfig()
	if d := dsnOf(s); d != "" {
		var err error
		if cfg, err = mysql.ParseDSN(d); err != nil {
			return nil, s.Errorf(dsnKey(s), "cannot be parsed: %s", scrubDSN(err.Error()))
		}
	}
	if h := s.String("host"); h != "" || s.Has("port") {
		host, port := h, s.Int("port")
		if host == "" {
			host, _, _ = net.SplitHostPort(cfg.Addr)
		}
		if port == 0 {
			port = 3306
		}
		cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(host, fmt.Sprint(port))
	}
	if u := s.String("user") + s.String("username"); u != "" {
		cfg.User = u
	}
	if p := s.String("password"); p != "" {
		cfg.Passwd = p
	}
	if d := s.String("database"); d != "" {
		cfg.DBName = d
	}
	if t := s.String("tls"); t != "" {
		cfg.TLSConfig = t
	}
	if cfg.DBName == "" {
		return nil, s.Errorf("database", "required key is missing (or name the database in %s)", dsnKey(s))
	}
	cfg.Timeout = s.Duration("connect_timeout")
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	// Strict mode: a value the column cannot hold is an error, not a
	// silent truncation (the row is then dead-lettered with the reason).
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["sql_mode"]; !ok {
		cfg.Params["sql_mode"] = "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'"
	}
	if _, ok := cfg.Params["time_zone"]; !ok {
		cfg.Params["time_zone"] = "'+00:00'"
	}
	return &conn{cfg: cfg, maxConns: s.Int("max_connections"), maxRetries: s.Int("max_retries"),
		retryDelay: s.Duration("retry_delay")}, nil
}

// describe names the server for logs, without the password.
func (c *conn) describe() string { return c.cfg.User + "@" + c.cfg.Addr + "/" + c.cfg.DBName }

// open connects and pings.
func (c *conn) open(ctx context.Context) (*sql.DB, error) {
	connector, err := mysql.NewConnector(c.cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql config: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(c.maxConns)
	db.SetMaxIdleConns(c.maxConns)
	db.SetConnMaxLifetime(time.Hour)
	err = c.retry(ctx, func() error { return db.PingContext(ctx) })
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to %s: %w", c.describe(), err)
	}
	return db, nil
}

// retry runs fn again on errors that say the server is down or busy.
func (c *conn) retry(ctx context.Context, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt > c.maxRetries || !transient(err) || ctx.Err() != nil {
			return err
		}
		if backoff.Sleep(ctx, c.retryDelay*time.Duration(attempt)) != nil {
			return err
		}
	}
}

// transientCodes are server errors that say nothing about the data: too
// many connections, lock wait timeout, deadlock, shutdown, killed
// connection, out of memory, read-only.
var transientCodes = map[uint16]bool{1040: true, 1041: true, 1053: true, 1205: true, 1213: true,
	1290: true, 1836: true, 1927: true, 2006: true, 2013: true, 1317: true, 1043: true, 1129: true, 1203: true}

// transient reports whether err says the server is unavailable rather
// than that a row is bad.
func transient(err error) bool {
	if err == nil {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return transientCodes[me.Number]
	}
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, sql.ErrConnDone)
}

// schemaCodes are server errors about the table or the account, not a
// row: no such table, database or column, access denied, read-only
// table. Every row would fail alike, so none is dead-lettered for them.
var schemaCodes = map[uint16]bool{1044: true, 1045: true, 1046: true, 1049: true, 1054: true, 1109: true,
	1142: true, 1143: true, 1146: true, 1036: true, 1099: true, 1100: true, 1227: true, 1370: true, 1792: true}

// dataError reports whether err is the server refusing a statement for
// what it holds (a value, a constraint), which another row may not share.
func dataError(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && !transientCodes[me.Number] && !schemaCodes[me.Number]
}

// orUnavailable marks err Unavailable when it says the server is down.
func orUnavailable(err error) error {
	if transient(err) {
		return connector.Unavailable(err)
	}
	return err
}

var dsnPassword = regexp.MustCompile(`^([^:@/]*):[^@]*@`)

// scrubDSN hides a password in text that may quote a DSN.
func scrubDSN(s string) string { return dsnPassword.ReplaceAllString(s, "$1:***@") }

// ident is a validated identifier: any name MySQL allows except NUL, at
// most 64 characters, no trailing space, no character beyond U+FFFF
// (MariaDB refuses those with error 1300), quoted with backticks (a
// backtick doubled).
func ident(name string) (string, error) {
	switch {
	case name == "":
		return "", errors.New("is empty")
	case len([]rune(name)) > 64:
		return "", fmt.Errorf("%q is longer than 64 characters", name)
	case strings.ContainsRune(name, 0):
		return "", fmt.Errorf("%q holds a NUL character", name)
	case strings.TrimRight(name, " ") != name:
		return "", fmt.Errorf("%q ends with a space, which MySQL refuses", name)
	case strings.IndexFunc(name, func(r rune) bool { return r > 0xFFFF }) >= 0:
		return "", fmt.Errorf("%q holds a character outside Unicode's Basic Multilingual Plane (an emoji?), which MySQL refuses in names", name)
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`", nil
}

// tableName quotes "table" or "database.table": the first dot separates
// the database, so a table whose name holds a dot cannot be named.
func tableName(name string) (string, error) {
	parts := strings.SplitN(name, ".", 2)
	out := make([]string, len(parts))
	for i, p := range parts {
		q, err := ident(p)
		if err != nil {
			return "", err
		}
		out[i] = q
	}
	return strings.Join(out, "."), nil
}

func checkTable(v any) error {
	_, err := tableName(v.(string))
	return err
}

func checkIdent(v any) error {
	_, err := ident(v.(string))
	return err
}
