package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	var (
		addr, dataDir, fsync        string
		fsyncInterval, loginTimeout time.Duration
		maxConns, maxUnauthConns    int
		jsonLogs, verbose           bool
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the embedded Iggy-compatible broker as a server",
		Long: `Run Ferry's embedded broker: it speaks Apache Iggy's binary protocol 0.11
over TCP, so the Iggy CLI, the official SDKs and ferry's own commands can use it.

The root user comes from IGGY_ROOT_USERNAME / IGGY_ROOT_PASSWORD (default iggy/iggy).`,
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
			b, err := broker.Start(cmd.Context(), broker.Config{
				Addr:           addr,
				DataDir:        dataDir,
				Fsync:          policy,
				FsyncInterval:  fsyncInterval,
				LoginTimeout:   loginTimeout,
				MaxConns:       maxConns,
				MaxUnauthConns: maxUnauthConns,
				Logger:         log,
			})
			if err != nil {
				return err
			}
			log.Info("broker listening", "addr", b.Addr(), "data_dir", dataDir)
			fmt.Fprintf(cmd.OutOrStdout(), "ferry broker listening on %s (data: %s)\n", b.Addr(), orMemory(dataDir))
			<-cmd.Context().Done()
			log.Info("shutting down")
			return b.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8090", "TCP address to listen on")
	f.StringVar(&dataDir, "data-dir", defaultDataDir(), `directory for streams, topics and messages ("" keeps everything in memory)`)
	f.StringVar(&fsync, "fsync", "interval", "when to fsync partition logs: always, interval or never (topics with enforce_fsync always fsync)")
	f.DurationVar(&fsyncInterval, "fsync-interval", time.Second, "fsync period for --fsync=interval")
	f.IntVar(&maxConns, "max-conns", broker.DefaultMaxConns,
		"most connections held open; over it the oldest connection that has not logged in is closed, or the new one if all have (keep below the file-descriptor limit)")
	f.IntVar(&maxUnauthConns, "max-unauth-conns", broker.DefaultMaxUnauthConns,
		"most connections that have not logged in; over it the oldest of them is closed (lowered to --max-conns when not given)")
	f.DurationVar(&loginTimeout, "login-timeout", 30*time.Second,
		"close a connection that has not logged in this long after connecting; requests before login do not extend it")
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
