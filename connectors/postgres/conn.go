package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/postgres/pgjson"
	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Connection is the connection part of both connectors' plugin_config:
// upstream's connection_string, or (Ferry) its parts as fields. Fields
// that are set override the connection string's, so a password can come
// from IGGY_CONNECTORS_<SOURCE|SINK>_<KEY>_PLUGIN_CONFIG_PASSWORD while
// the rest stays in the file.
type Connection struct {
	ConnectionString string
	Host             string
	Port             uint16
	User             string
	Username         string
	Password         string
	Database         string
	DBName           string
	SSLMode          string
	MaxConnections   int32
}

// connectionFields are the connection's keys in both specs; the pool
// holds up to maxConns connections by default.
func connectionFields(maxConns int) []connector.Field {
	return []connector.Field{
		connector.NewStringField("connection_string").AsSecret().WithExample("postgres://iggy@localhost:5432/app").
			WithDoc("a postgres:// URL or key=value DSN; required unless host is set"),
		connector.NewStringField("host").WithDoc("Ferry: overrides the connection string's host"),
		connector.NewIntField("port").Between(1, 65535).WithDoc("Ferry: overrides the connection string's port"),
		connector.NewStringField("user").WithDoc("Ferry: overrides the connection string's user"),
		connector.NewStringField("username").WithDoc("Ferry: the same as user"),
		connector.NewStringField("password").AsSecret().
			WithDoc("Ferry: overrides the connection string's password (set it from IGGY_CONNECTORS_*_PLUGIN_CONFIG_PASSWORD)"),
		connector.NewStringField("database").WithDoc("Ferry: overrides the connection string's database"),
		connector.NewStringField("dbname").WithDoc("Ferry: the same as database"),
		connector.NewEnumField("sslmode", "disable", "allow", "prefer", "require", "verify-ca", "verify-full").
			WithDoc("Ferry: overrides the connection string's sslmode"),
		connector.NewIntField("max_connections").Between(1, math.MaxInt32).WithDefault(maxConns).
			WithDoc("connections in the pool"),
	}
}

// lintConnection requires a connection string or a host.
func lintConnection(s *connector.Settings, fail connector.FailFunc) {
	if s.String("connection_string") == "" && s.String("host") == "" {
		fail("connection_string", "required key is missing (or set host); expected a string such as \"postgres://user@host:5432/db\"")
	}
}

// connectionFrom reads the connection keys of set.
func connectionFrom(set *connector.Settings) Connection {
	return Connection{ConnectionString: set.String("connection_string"), Host: set.String("host"),
		Port: uint16(set.Int("port")), User: set.String("user"), Username: set.String("username"),
		Password: set.String("password"), Database: set.String("database"), DBName: set.String("dbname"),
		SSLMode: set.String("sslmode"), MaxConnections: int32(set.Int("max_connections"))}
}

// poolConfig builds the pool configuration; errors name the key and never
// contain the password.
func (c *Connection) poolConfig(set *connector.Settings) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(c.withFields())
	if err != nil {
		return nil, set.Errorf("connection_string", "cannot be parsed: %s", c.scrub(parseReason(err)))
	}
	cc := cfg.ConnConfig
	if c.Password != "" {
		cc.Password = c.Password
	}
	for k, v := range pgjson.RuntimeParams() {
		cc.RuntimeParams[k] = v
	}
	cfg.MaxConns = c.MaxConnections
	return cfg, nil
}

// withFields is the connection string with the fields that are set
// written into it (TLS settings depend on the host and sslmode, so they
// must be there before parsing); the password is set after parsing.
func (c *Connection) withFields() string {
	cs := c.ConnectionString
	user := firstNonEmpty(c.User, c.Username)
	db := firstNonEmpty(c.Database, c.DBName)
	if u, err := url.Parse(cs); err == nil && strings.Contains(cs, "://") {
		if c.Host != "" || c.Port != 0 {
			host, port := u.Hostname(), u.Port()
			if c.Host != "" {
				host = c.Host
			}
			if c.Port != 0 {
				port = fmt.Sprint(c.Port)
			}
			u.Host = host
			if port != "" {
				u.Host = net.JoinHostPort(host, port)
			}
		}
		if user != "" {
			if pw, ok := u.User.Password(); ok {
				u.User = url.UserPassword(user, pw)
			} else {
				u.User = url.User(user)
			}
		}
		if db != "" {
			u.Path = "/" + db
		}
		if c.SSLMode != "" {
			q := u.Query()
			q.Set("sslmode", c.SSLMode)
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	for _, kv := range []struct{ key, value string }{{"host", c.Host}, {"user", user}, {"dbname", db}, {"sslmode", c.SSLMode}} {
		if kv.value != "" {
			cs += " " + kv.key + "=" + quoteValue(kv.value)
		}
	}
	if c.Port != 0 {
		cs += fmt.Sprintf(" port=%d", c.Port)
	}
	return cs
}

// quoteValue quotes a keyword/value connection string value.
func quoteValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// parseReason is the cause of a connection string parse error without
// the string itself.
func parseReason(err error) string {
	if inner := errors.Unwrap(err); inner != nil {
		return inner.Error()
	}
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return "invalid connection string"
	}
	return err.Error()
}

var kvPassword = regexp.MustCompile(`(?i)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// secrets returns the password strings that must never be shown.
func (c *Connection) secrets() []string {
	var out []string
	if c.Password != "" {
		out = append(out, c.Password)
	}
	cs := c.ConnectionString
	if cs == "" {
		return out
	}
	out = append(out, cs)
	if u, err := url.Parse(cs); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			out = append(out, pw, url.QueryEscape(pw), u.User.String())
		}
	} else if i := strings.Index(cs, "://"); i >= 0 { // unparseable URL: whatever sits between ':' and '@'
		rest := cs[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if colon := strings.Index(rest[:at], ":"); colon >= 0 && colon+1 < at {
				out = append(out, rest[colon+1:at])
			}
		}
	}
	for _, m := range kvPassword.FindAllStringSubmatch(cs, -1) {
		out = append(out, strings.Trim(m[1], "'"))
	}
	return out
}

// scrub removes every secret from s.
func (c *Connection) scrub(s string) string {
	for _, sec := range c.secrets() {
		if len(sec) >= 2 {
			s = strings.ReplaceAll(s, sec, "xxxxx")
		}
	}
	return s
}

// scrubErr wraps err so that its text carries no secret; errors.Is/As
// still see the original.
func (c *Connection) scrubErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := c.scrub(msg); clean != msg {
		return &scrubbed{msg: clean, err: err}
	}
	return err
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// describe names the server for logs, without credentials.
func describe(cc *pgconn.Config) string {
	return fmt.Sprintf("%s:%d/%s user=%s", cc.Host, cc.Port, cc.Database, cc.User)
}

// connect opens the pool and checks it with a round trip.
func (c *Connection) connect(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, c.scrubErr(fmt.Errorf("connect to %s: %w", describe(&cfg.ConnConfig.Config), err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, c.scrubErr(fmt.Errorf("connect to %s: %w", describe(&cfg.ConnConfig.Config), err))
	}
	return pool, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// transient reports whether retrying err may help: a lost connection, a
// serialization failure or deadlock, a server shutting down or out of
// connections.
func transient(err error) bool {
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "40001", pe.Code == "40P01", pe.Code == "53300",
			strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "57P"):
			return true
		}
		return false
	}
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne)
}

// retryTransient runs fn, retrying transient failures up to maxRetries
// times, waiting delay×attempt in between (upstream's max_retries and
// retry_delay).
func retryTransient(ctx context.Context, maxRetries int, delay time.Duration, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt > maxRetries || !transient(err) || ctx.Err() != nil {
			return err
		}
		if backoff.Sleep(ctx, delay*time.Duration(attempt)) != nil {
			return err
		}
	}
}
