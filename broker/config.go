package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
)

// FsyncPolicy says when partition logs and consumer offsets are flushed to
// stable storage. Topics created with enforce_fsync fsync every write
// whatever the policy. Metadata is always fsynced before its reply.
type FsyncPolicy int

const (
	// FsyncInterval (the default) flushes every Config.FsyncInterval.
	// Acknowledged writes survive a killed process at once (they are in the
	// kernel) and an operating-system crash after at most one interval.
	FsyncInterval FsyncPolicy = iota
	// FsyncAlways fsyncs every send and every offset write before replying.
	FsyncAlways
	// FsyncNever leaves flushing to the operating system (and Close).
	FsyncNever
)

func (p FsyncPolicy) String() string {
	switch p {
	case FsyncInterval:
		return "interval"
	case FsyncAlways:
		return "always"
	case FsyncNever:
		return "never"
	}
	return fmt.Sprintf("fsync policy %d", int(p))
}

// ParseFsyncPolicy parses a policy name as String prints it: "interval"
// (or ""), "always" or "never", in any case.
func ParseFsyncPolicy(s string) (FsyncPolicy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "interval":
		return FsyncInterval, nil
	case "always":
		return FsyncAlways, nil
	case "never":
		return FsyncNever, nil
	}
	return 0, fmt.Errorf("unknown fsync policy %q (want interval, always or never)", s)
}

// Config configures a Broker. The zero value is valid: an in-memory broker
// on 127.0.0.1:8090 with root credentials iggy/iggy.
type Config struct {
	// Addr is the TCP listen address. "127.0.0.1:0" picks a free port.
	// Default "127.0.0.1:8090", the upstream server's.
	Addr string
	// DataDir holds metadata, partition logs and consumer offsets. "" keeps
	// everything in memory.
	DataDir string
	// RootUsername and RootPassword are the root user's credentials when
	// the broker starts without users (a new DataDir, or in memory); a
	// DataDir's stored root is kept otherwise, as upstream does.
	// Default: $IGGY_ROOT_USERNAME / $IGGY_ROOT_PASSWORD, else "iggy"/"iggy".
	RootUsername, RootPassword string
	// ResetRoot sets the stored root user's username and password from
	// RootUsername and RootPassword at every start, not only the first:
	// for a broker whose credentials belong to its owner's configuration
	// (ferry run's embedded broker).
	ResetRoot bool
	// TLS, when set, serves TLS on Addr instead of plain TCP.
	TLS *tls.Config
	// MetricsAddr, when set, is the TCP address of an HTTP listener that
	// serves the broker's Prometheus metrics at /metrics (plain HTTP, no
	// authentication: bind it to a trusted interface). "127.0.0.1:0"
	// picks a free port; Broker.MetricsAddr reports it. Default "": none
	// (Broker.MetricsHandler still serves them).
	MetricsAddr string
	// Fsync is the server-wide flush policy; default FsyncInterval.
	Fsync FsyncPolicy
	// FsyncInterval is the period of FsyncInterval; default 1s.
	FsyncInterval time.Duration
	// HeartbeatInterval: a connection holding a consumer-group membership
	// that sends nothing for 1.2 × this is evicted as stale. Default 30s.
	HeartbeatInterval time.Duration
	// RebalancingTimeout bounds how long a partition waits in a pending
	// revocation for its old owner to commit. Default 30s.
	RebalancingTimeout time.Duration
	// LoginTimeout closes a connection that has not logged in this long
	// after it connected (or logged out). Requests before login (pings,
	// say) do not extend it. Logged-in connections may stay idle.
	// Default 30s.
	LoginTimeout time.Duration
	// MaxConns caps the connections the broker keeps open. A connection
	// over the cap closes the oldest one that has not logged in, or is
	// itself closed at once if every connection has logged in. Keep it
	// below the process's file-descriptor limit (RLIMIT_NOFILE) minus what
	// partition logs need. Default 10000.
	MaxConns int
	// MaxUnauthConns caps the connections that have not logged in: a new
	// connection over the cap closes the oldest of them, so sockets that
	// never log in cannot keep a client that does from connecting.
	// Default 1000, or MaxConns if that is smaller; at most MaxConns.
	MaxUnauthConns int
	// Dedup turns on message deduplication by id (see dedup.go); default
	// off, as upstream's.
	Dedup Dedup
	// Events publishes the broker's events (streams, topics, segments
	// deleted by retention, groups, offsets, clients, failed logins) to
	// the system stream ferry.events (events.go, package sysevents).
	// Default off; ferry run and ferry serve turn it on.
	Events Events
	// RetentionInterval is the period of the sweep that applies
	// message_expiry and max_topic_size. Default 10s.
	RetentionInterval time.Duration
	// CompactionInterval is the period of the compaction pass over the
	// compacted topics (the topic option ferry.compact; compact.go).
	// Default 1m.
	CompactionInterval time.Duration
	// CompactTombstoneRetention is how long a compacted topic keeps a
	// deletion marker after it was appended, unless the topic sets
	// ferry.compact_tombstone_retention. Default 24h.
	CompactTombstoneRetention time.Duration
	// Logger receives the broker's logs. Default: discard.
	Logger *slog.Logger

	// Seams for internal tests. clock times the login backoff (default
	// the system clock); writeMeta replaces metadata.json (default
	// writeFileAtomic), so a test can make it fail as a full disk does.
	clock     clock
	writeMeta func(path string, data []byte) error
}

// Connection caps used when Config leaves them 0.
const (
	DefaultMaxConns       = 10000
	DefaultMaxUnauthConns = 1000
)

// ServerVersion is the version string the broker reports at login and in
// stats: the upstream server release whose protocol it speaks.
const ServerVersion = "0.9.0-edge.5"

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:8090"
	}
	if c.RootUsername == "" {
		c.RootUsername = os.Getenv("IGGY_ROOT_USERNAME")
	}
	if c.RootUsername == "" {
		c.RootUsername = "iggy"
	}
	if c.RootPassword == "" {
		c.RootPassword = os.Getenv("IGGY_ROOT_PASSWORD")
	}
	if c.RootPassword == "" {
		c.RootPassword = "iggy"
	}
	if c.FsyncInterval == 0 {
		c.FsyncInterval = time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 30 * time.Second
	}
	if c.RebalancingTimeout == 0 {
		c.RebalancingTimeout = 30 * time.Second
	}
	if c.LoginTimeout == 0 {
		c.LoginTimeout = 30 * time.Second
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxUnauthConns == 0 {
		c.MaxUnauthConns = min(DefaultMaxUnauthConns, c.MaxConns)
	}
	if c.clock == nil {
		c.clock = systemClock{}
	}
	if c.writeMeta == nil {
		c.writeMeta = writeFileAtomic
	}
	if c.RetentionInterval == 0 {
		c.RetentionInterval = 10 * time.Second
	}
	if c.CompactionInterval == 0 {
		c.CompactionInterval = time.Minute
	}
	if c.CompactTombstoneRetention == 0 {
		c.CompactTombstoneRetention = 24 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Events = c.Events.withDefaults()
	return c
}

func (c Config) validate() error {
	var errs []error
	if n := len(c.RootUsername); n < 3 || n > 50 {
		errs = append(errs, fmt.Errorf("root username is %d bytes, want 3..50", n))
	}
	if n := len(c.RootPassword); n < 3 || n > 100 {
		errs = append(errs, fmt.Errorf("root password is %d bytes, want 3..100", n))
	}
	if c.Fsync < FsyncInterval || c.Fsync > FsyncNever {
		errs = append(errs, fmt.Errorf("unknown fsync policy %d", int(c.Fsync)))
	}
	for name, d := range map[string]time.Duration{
		"fsync interval": c.FsyncInterval, "heartbeat interval": c.HeartbeatInterval,
		"rebalancing timeout": c.RebalancingTimeout, "retention interval": c.RetentionInterval,
		"login timeout": c.LoginTimeout, "compaction interval": c.CompactionInterval,
		"compact tombstone retention": c.CompactTombstoneRetention,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative", name, d))
		}
	}
	if c.MaxConns < 0 || c.MaxUnauthConns < 0 {
		errs = append(errs, fmt.Errorf("connection caps %d (total) and %d (not logged in) must not be negative",
			c.MaxConns, c.MaxUnauthConns))
	} else if c.MaxUnauthConns > c.MaxConns {
		errs = append(errs, fmt.Errorf("the cap on connections not logged in (%d) is above the cap on all connections (%d)",
			c.MaxUnauthConns, c.MaxConns))
	}
	if c.Events.Enabled {
		if err := c.Events.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("broker config: %w", err)
	}
	return nil
}
