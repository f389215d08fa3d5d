package iggy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
)

// SDKName and SDKVersion are what the client reports in Register unless
// WithSDK says otherwise.
const (
	SDKName    = "ferry-go"
	SDKVersion = "0.1.0"
)

// Option configures a Client. Options are applied in order after the
// settings taken from a connection string, so an explicit option wins.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Dialer opens the network connection to the server; see WithDialer.
type Dialer func(ctx context.Context, network, address string) (net.Conn, error)

type config struct {
	addr string

	username, password string
	token              string

	tlsEnabled bool
	tlsCAFile  string
	tlsDomain  string
	tlsConfig  *tls.Config // from WithTLSConfig, or built by validate

	heartbeat      time.Duration
	reconnect      bool
	backoffMin     time.Duration
	backoffMax     time.Duration
	maxReconnects  int // 0 = unlimited
	requestTimeout time.Duration
	dialTimeout    time.Duration
	logger         *slog.Logger
	sdkName        string
	sdkVersion     string
	dialer         Dialer
	maxFrameSize   int
	replayLimit    int
	replayDelay    time.Duration
	// protocolVersion is what Register sends; tests change it.
	protocolVersion uint32
}

func defaultConfig() config {
	return config{
		heartbeat:      5 * time.Second,
		reconnect:      true,
		backoffMin:     100 * time.Millisecond,
		backoffMax:     5 * time.Second,
		requestTimeout: 30 * time.Second,
		dialTimeout:    10 * time.Second,
		sdkName:        SDKName,
		sdkVersion:     SDKVersion,
		replayLimit:    100,
		replayDelay:    50 * time.Millisecond,

		protocolVersion: wire.ProtocolVersion,
	}
}

// errConfig is wrapped by every configuration error.
var errConfig = errors.New("iggy: invalid configuration")

// validate checks every setting once and fills in what depends on others
// (the TLS configuration, the logger).
func (c *config) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{errConfig}, args...)...))
	}
	if _, _, err := net.SplitHostPort(c.addr); err != nil || c.addr == "" {
		bad("address %q is not host:port", c.addr)
	}
	if c.token != "" && c.username != "" {
		bad("both a username and a personal access token are set; use one")
	}
	if c.username != "" && c.password == "" {
		bad("username %q has no password", c.username)
	}
	// The server refuses credentials outside these bounds, and the wire
	// has one length byte for each: check here rather than send a login
	// that cannot succeed (or a cut string).
	if n := len(c.username); c.username != "" && (n < 3 || n > 50) {
		bad("username is %d bytes; the server accepts 3..50", n)
	}
	if n := len(c.password); c.password != "" && (n < 3 || n > 100) {
		bad("password is %d bytes; the server accepts 3..100", n)
	}
	if n := len(c.token); n > 255 {
		bad("personal access token is %d bytes; at most 255", n)
	}
	if c.heartbeat < 0 {
		bad("heartbeat interval %s is negative", c.heartbeat)
	}
	if c.reconnect && (c.backoffMin <= 0 || c.backoffMax < c.backoffMin) {
		bad("reconnect backoff must satisfy 0 < min <= max, got min %s max %s", c.backoffMin, c.backoffMax)
	}
	if c.requestTimeout <= 0 {
		bad("request timeout %s must be positive", c.requestTimeout)
	}
	if c.dialTimeout <= 0 {
		bad("dial timeout %s must be positive", c.dialTimeout)
	}
	if len(c.sdkName) == 0 || len(c.sdkName) > 255 || len(c.sdkVersion) > 255 {
		bad("SDK name and version must be 1..255 and 0..255 bytes")
	}
	if c.maxFrameSize == 0 {
		c.maxFrameSize = maxFrameSize
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.dialer == nil {
		d := &net.Dialer{KeepAlive: 15 * time.Second}
		c.dialer = d.DialContext
	}
	if c.tlsConfig == nil && c.tlsEnabled {
		cfg, err := buildTLS(c.addr, c.tlsCAFile, c.tlsDomain)
		if err != nil {
			return err
		}
		c.tlsConfig = cfg
	}
	return nil
}

func buildTLS(addr, caFile, domain string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: domain}
	if cfg.ServerName == "" {
		host, _, _ := net.SplitHostPort(addr)
		cfg.ServerName = host
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: reading TLS CA file: %w", errConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: TLS CA file %s holds no PEM certificate", errConfig, caFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// WithCredentials logs in with a username and password after connecting
// and after every reconnect. By default the client does not log in, and
// only Ping works. The password is never logged or shown in errors. The
// username must be 3..50 bytes and the password 3..100, as the server
// requires; Dial refuses others.
func WithCredentials(username, password string) Option {
	return optionFunc(func(c *config) { c.username, c.password, c.token = username, password, "" })
}

// WithToken logs in with a personal access token (1..255 bytes) instead
// of a password.
func WithToken(pat string) Option {
	return optionFunc(func(c *config) { c.token, c.username, c.password = pat, "", "" })
}

// WithTLS turns TLS on. caFile is a PEM file of the CA to trust (empty:
// the system roots); domain is the server name to verify (empty: the host
// of the address). TLS is off by default.
func WithTLS(caFile, domain string) Option {
	return optionFunc(func(c *config) { c.tlsEnabled, c.tlsCAFile, c.tlsDomain = true, caFile, domain })
}

// WithTLSConfig turns TLS on with a configuration of the caller's; it takes
// precedence over WithTLS. The client clones cfg.
func WithTLSConfig(cfg *tls.Config) Option {
	return optionFunc(func(c *config) {
		c.tlsEnabled = cfg != nil
		if cfg != nil {
			c.tlsConfig = cfg.Clone()
		}
	})
}

// WithHeartbeat sets how often an idle connection is pinged; 0 turns
// heartbeats off. Default 5s, as the Go SDK. The server evicts a group
// member after 1.2 × its own heartbeat interval (30s) of silence.
func WithHeartbeat(interval time.Duration) Option {
	return optionFunc(func(c *config) { c.heartbeat = interval })
}

// WithReconnect sets the backoff between reconnect attempts: it starts at
// min, doubles on each failure up to max, and each wait is drawn from
// [0.8, 1] of that (jitter), so it never exceeds max. Reconnecting
// is on by default with min 100ms and max 5s.
func WithReconnect(min, max time.Duration) Option {
	return optionFunc(func(c *config) { c.reconnect, c.backoffMin, c.backoffMax = true, min, max })
}

// WithReconnectLimit gives up reconnecting after n failed attempts in a
// row; calls then fail with the last error. Default 0: never give up.
func WithReconnectLimit(n int) Option {
	return optionFunc(func(c *config) { c.maxReconnects = max(n, 0) })
}

// WithoutReconnect turns reconnecting off: once the connection breaks,
// every call fails with a *NetError.
func WithoutReconnect() Option {
	return optionFunc(func(c *config) { c.reconnect = false })
}

// WithRequestTimeout bounds a call whose context has no deadline,
// including its wait for a reconnect. Default 30s, as the Go SDK.
func WithRequestTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.requestTimeout = d })
}

// WithDialTimeout bounds one connection attempt (TCP, TLS and login).
// Default 10s.
func WithDialTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.dialTimeout = d })
}

// WithLogger sets where the client logs connects, reconnects and
// redirections. Default: nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) { c.logger = l })
}

// WithSDK sets the SDK name and version sent in Register. Default
// SDKName and SDKVersion.
func WithSDK(name, version string) Option {
	return optionFunc(func(c *config) { c.sdkName, c.sdkVersion = name, version })
}

// WithDialer replaces the TCP dialer. Default: net.Dialer with a 15s
// keep-alive. TLS, if on, is layered over the returned connection.
func WithDialer(d Dialer) Option {
	return optionFunc(func(c *config) { c.dialer = d })
}
