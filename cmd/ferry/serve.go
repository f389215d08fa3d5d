package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/internal/gcfloor"
	"github.com/ferryhq/ferry/internal/units"
	"github.com/ferryhq/ferry/sysevents"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Upstream's environment names for the TCP listener and its TLS, from the
// [tcp] and [tcp.tls] sections of the server's config.toml (any key is
// IGGY_<SECTION>_<KEY>). A flag given on the command line wins.
const (
	envTCPAddress = "IGGY_TCP_ADDRESS"
	// Upstream's [system.message_deduplication].
	envDedupEnabled    = "IGGY_SYSTEM_MESSAGE_DEDUPLICATION_ENABLED"
	envDedupMaxEntries = "IGGY_SYSTEM_MESSAGE_DEDUPLICATION_MAX_ENTRIES"
	envDedupExpiry     = "IGGY_SYSTEM_MESSAGE_DEDUPLICATION_EXPIRY"
	envTCPTLSEnabled   = "IGGY_TCP_TLS_ENABLED"
	envTCPTLSCertFile  = "IGGY_TCP_TLS_CERT_FILE"
	envTCPTLSKeyFile   = "IGGY_TCP_TLS_KEY_FILE"
)

// serveListener is the TCP listener part of ferry serve's configuration.
type serveListener struct {
	addr              string
	tlsCert, tlsKey   string
	warnings          []string // environment settings that have no effect
	tlsFromFlags, tls bool
}

// resolveListener merges the --addr, --tls-cert and --tls-key flags with
// upstream's environment names: a flag given wins over its variable; the
// certificate and key variables count only with IGGY_TCP_TLS_ENABLED true,
// as upstream reads them only then ([tcp.tls] enabled defaults to false).
// Either flag turns TLS on. TLS needs both files.
func resolveListener(f *pflag.FlagSet, addr, cert, key string, getenv func(string) string) (serveListener, error) {
	l := serveListener{addr: addr, tlsCert: cert, tlsKey: key}
	if v := getenv(envTCPAddress); v != "" && !f.Changed("addr") {
		l.addr = v
	}
	l.tlsFromFlags = f.Changed("tls-cert") || f.Changed("tls-key")
	enabled := false
	if v := getenv(envTCPTLSEnabled); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return l, usageError{fmt.Errorf("%s=%q: want true or false", envTCPTLSEnabled, v)}
		}
		enabled = on
	}
	envCert, envKey := getenv(envTCPTLSCertFile), getenv(envTCPTLSKeyFile)
	if enabled {
		if !f.Changed("tls-cert") {
			l.tlsCert = envCert
		}
		if !f.Changed("tls-key") {
			l.tlsKey = envKey
		}
	} else if !l.tlsFromFlags && (envCert != "" || envKey != "") {
		l.warnings = append(l.warnings, fmt.Sprintf("%s or %s is set but %s is not true: serving plain TCP, as upstream does",
			envTCPTLSCertFile, envTCPTLSKeyFile, envTCPTLSEnabled))
	}
	l.tls = enabled || l.tlsFromFlags
	if l.tls && (l.tlsCert == "" || l.tlsKey == "") {
		return l, usageError{errors.New("TLS needs a certificate and a key: --tls-cert and --tls-key (or " +
			envTCPTLSCertFile + " and " + envTCPTLSKeyFile + " with " + envTCPTLSEnabled + "=true)")}
	}
	return l, nil
}

// tlsConfig loads the listener's certificate and key (PEM), or returns nil
// without TLS.
func (l serveListener) tlsConfig() (*tls.Config, error) {
	if !l.tls {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(l.tlsCert, l.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("loading the TLS certificate %s and key %s: %w", l.tlsCert, l.tlsKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

func newServeCmd() *cobra.Command {
	var (
		addr, dataDir, fsync                   string
		tlsCert, tlsKey, metrics               string
		fsyncInterval, loginTimeout            time.Duration
		maxConns, maxUnauthConns               int
		jsonLogs, verbose                      bool
		dedupEntries                           int
		dedupExpiry                            time.Duration
		events                                 bool
		eventsMaxSize                          string
		eventsExpiry                           time.Duration
		compactionInterval, tombstoneRetention time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the embedded Iggy-compatible broker as a server",
		Long: `Run Ferry's embedded broker: it speaks Apache Iggy's binary protocol 0.11
over TCP, so the Iggy CLI, the official SDKs and ferry's own commands can use it.

The root user is made from IGGY_ROOT_USERNAME / IGGY_ROOT_PASSWORD (default
iggy/iggy) on the first start of a data directory, as upstream does; later
starts keep the stored root, whose password ` + "`ferry user password`" + ` changes.
Other users, their permissions and tokens: ` + "`ferry user`" + ` and ` + "`ferry pat`" + `.

Upstream's environment names configure the TCP listener too: IGGY_TCP_ADDRESS,
and with IGGY_TCP_TLS_ENABLED=true, IGGY_TCP_TLS_CERT_FILE and IGGY_TCP_TLS_KEY_FILE.
Message deduplication by id (upstream's [system.message_deduplication]):
--dedup-max-entries, or IGGY_SYSTEM_MESSAGE_DEDUPLICATION_ENABLED=true with
IGGY_SYSTEM_MESSAGE_DEDUPLICATION_MAX_ENTRIES and _EXPIRY; a message whose id
its partition remembers is not appended again (kept in memory, as upstream).
A flag given on the command line wins over its variable.

The broker publishes its events (streams and topics created, updated, purged,
deleted; segments deleted by retention; consumer groups joined, left,
rebalanced; offsets stored; clients connected and disconnected; failed logins)
as CloudEvents JSON to the stream ferry.events, one topic per event type
(--events=false turns this off). A hook on one of those topics runs a command
for each event: ` + "`ferry hook create NAME segment.deleted CMD --stream ferry.events`" + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			log := newLogger(os.Stderr, jsonLogs, level)
			policy, err := broker.ParseFsyncPolicy(fsync)
			if err != nil {
				return usageError{fmt.Errorf("--fsync: %w", err)}
			}
			if !cmd.Flags().Changed("max-unauth-conns") {
				maxUnauthConns = 0 // the broker's default: 1000, or --max-conns if smaller
			}
			l, err := resolveListener(cmd.Flags(), addr, tlsCert, tlsKey, os.Getenv)
			if err != nil {
				return err
			}
			dedup, err := resolveDedup(cmd.Flags(), dedupEntries, dedupExpiry, os.Getenv)
			if err != nil {
				return usageError{err}
			}
			for _, w := range l.warnings {
				log.Warn(w)
			}
			tlsCfg, err := l.tlsConfig()
			if err != nil {
				return err
			}
			maxSize, err := units.ParseSize(eventsMaxSize)
			if err != nil {
				return usageError{fmt.Errorf("--events-max-size: %w", err)}
			}
			gcfloor.Start(cmd.Context(), gcfloor.DefaultFloor, time.Second)
			b, err := broker.Start(cmd.Context(), broker.Config{
				Addr:                      l.addr,
				TLS:                       tlsCfg,
				MetricsAddr:               metrics,
				DataDir:                   dataDir,
				Fsync:                     policy,
				FsyncInterval:             fsyncInterval,
				LoginTimeout:              loginTimeout,
				MaxConns:                  maxConns,
				MaxUnauthConns:            maxUnauthConns,
				Dedup:                     dedup,
				Events:                    broker.Events{Enabled: events, MaxTopicSize: maxSize, MessageExpiry: eventsExpiry},
				CompactionInterval:        compactionInterval,
				CompactTombstoneRetention: tombstoneRetention,
				Logger:                    log,
			})
			if err != nil {
				return err
			}
			withTLS := ""
			if l.tls {
				withTLS = " with TLS"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ferry broker listening on %s%s (data: %s)\n", b.Addr(), withTLS, orMemory(dataDir))
			if b.MetricsAddr() != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "metrics at http://%s/metrics\n", b.MetricsAddr())
			}
			<-cmd.Context().Done()
			log.Info("shutting down")
			return b.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8090", "TCP address to listen on (environment: "+envTCPAddress+")")
	f.StringVar(&tlsCert, "tls-cert", "", "PEM certificate (chain) to serve TLS with; needs --tls-key (environment: "+envTCPTLSCertFile+")")
	f.StringVar(&tlsKey, "tls-key", "", "PEM private key of --tls-cert (environment: "+envTCPTLSKeyFile+")")
	f.StringVar(&metrics, "metrics-addr", "", `HTTP address to serve Prometheus metrics on at /metrics, e.g. 127.0.0.1:9090 ("" = off)`)
	f.StringVar(&dataDir, "data-dir", defaultDataDir(), `directory for streams, topics and messages ("" keeps everything in memory)`)
	f.StringVar(&fsync, "fsync", "interval", "when to fsync partition logs: always, interval or never (topics with enforce_fsync always fsync)")
	f.DurationVar(&fsyncInterval, "fsync-interval", time.Second, "fsync period for --fsync=interval")
	f.IntVar(&maxConns, "max-conns", broker.DefaultMaxConns,
		"most connections held open; over it the oldest connection that has not logged in is closed, or the new one if all have (keep below the file-descriptor limit)")
	f.IntVar(&maxUnauthConns, "max-unauth-conns", broker.DefaultMaxUnauthConns,
		"most connections that have not logged in; over it the oldest of them is closed (lowered to --max-conns when not given)")
	f.DurationVar(&loginTimeout, "login-timeout", 30*time.Second,
		"close a connection that has not logged in this long after connecting; requests before login do not extend it")
	f.IntVar(&dedupEntries, "dedup-max-entries", 0, "deduplicate messages by id: how many recent ids each partition remembers (0 = off; environment: "+
		envDedupEnabled+" and "+envDedupMaxEntries+", default 10000 when enabled)")
	f.DurationVar(&dedupExpiry, "dedup-expiry", 0, "forget a remembered id after this long (0 = never; environment: "+envDedupExpiry+")")
	f.BoolVar(&events, "events", true, "publish the broker's events to the stream "+sysevents.Stream+" (one topic per event type)")
	f.StringVar(&eventsMaxSize, "events-max-size", "8MiB", "max_topic_size of each "+sysevents.Stream+" topic (at least 1MiB)")
	f.DurationVar(&eventsExpiry, "events-expiry", sysevents.DefaultMessageExpiry, "message_expiry of each "+sysevents.Stream+" topic")
	f.DurationVar(&compactionInterval, "compaction-interval", time.Minute, "period of the compaction pass over compacted topics (ferry topic create --compact)")
	f.DurationVar(&tombstoneRetention, "compact-tombstone-retention", 24*time.Hour,
		"how long a compacted topic keeps a deletion marker, unless the topic sets its own")
	f.BoolVar(&jsonLogs, "log-json", false, "log as JSON instead of text")
	f.BoolVarP(&verbose, "verbose", "v", false, "debug logging")
	return cmd
}

func orMemory(dir string) string {
	if dir == "" {
		return "in memory"
	}
	return dir
}

func newLogger(w *os.File, json bool, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if json {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// defaultDataDir is where ferry serve keeps its data unless told:
// $XDG_DATA_HOME/ferry/broker, by default ~/.local/share/ferry/broker,
// never the working directory (often a checkout); "local_data" (upstream's
// default) only when there is no home directory.
func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "ferry", "broker")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "ferry", "broker")
	}
	return "local_data"
}

// defaultDedupEntries is upstream's max_entries when deduplication is
// enabled without one.
const defaultDedupEntries = 10000

// resolveDedup is the broker's deduplication from the flags and, for
// flags not given, upstream's environment names.
func resolveDedup(f *pflag.FlagSet, entries int, expiry time.Duration, getenv func(string) string) (broker.Dedup, error) {
	if !f.Changed("dedup-max-entries") {
		switch v := strings.TrimSpace(getenv(envDedupEnabled)); v {
		case "", "false", "0":
		case "true", "1":
			entries = defaultDedupEntries
			if n := strings.TrimSpace(getenv(envDedupMaxEntries)); n != "" {
				var err error
				if entries, err = strconv.Atoi(n); err != nil || entries <= 0 {
					return broker.Dedup{}, fmt.Errorf("%s=%q: want a count above 0", envDedupMaxEntries, n)
				}
			}
		default:
			return broker.Dedup{}, fmt.Errorf("%s=%q: want true or false", envDedupEnabled, v)
		}
	}
	if !f.Changed("dedup-expiry") {
		if v := strings.TrimSpace(getenv(envDedupExpiry)); v != "" {
			d, err := units.ParseDuration(v)
			if err != nil {
				return broker.Dedup{}, fmt.Errorf("%s=%q: %w", envDedupExpiry, v, err)
			}
			expiry = d
		}
	}
	if entries < 0 || expiry < 0 {
		return broker.Dedup{}, fmt.Errorf("--dedup-max-entries and --dedup-expiry must not be negative")
	}
	return broker.Dedup{MaxEntries: entries, Expiry: expiry}, nil
}
