package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/ferryhq/ferry/api"
	"github.com/ferryhq/ferry/config"
	_ "github.com/ferryhq/ferry/connectors/all" // built-in connectors
	"github.com/ferryhq/ferry/internal/gcfloor"
	"github.com/ferryhq/ferry/runtime"
	"github.com/spf13/cobra"
)

func newRunCmd() *cobra.Command {
	var configPath string
	var shutdown time.Duration
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the connector runtime",
		Long: `Run the connectors of a configuration: sources pull from external systems
into Iggy topics, sinks push topics into external systems.

The configuration is the Apache Iggy connector runtime's config.toml, read
unchanged, from --config or IGGY_CONNECTORS_CONFIG_PATH. With no [iggy]
address (or address = "embedded"), Ferry starts its embedded broker.`,
		Example: "  ferry run --config examples/quickstart/config.toml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if config.ConfigPath(configPath, config.OSEnv()) == "" {
				return usageError{fmt.Errorf("no configuration: pass --config FILE (for example --config examples/quickstart/config.toml) " +
					"or set " + config.EnvConfigPath)}
			}
			cfg, err := config.Load(configPath)
			if err != nil {
				return err
			}
			log := runtimeLogger(cfg)
			for _, w := range cfg.Warnings {
				log.Warn(w)
			}
			rt, err := runtime.New(cfg, runtime.Options{Logger: log, ShutdownTimeout: shutdown})
			if err != nil {
				return err
			}
			gcfloor.Start(cmd.Context(), gcfloor.DefaultFloor, time.Second)
			if err := rt.Start(cmd.Context()); err != nil {
				return err
			}
			log = rt.Logger() // with [telemetry] enabled, to OTLP as well
			log.Info("runtime started", "iggy", rt.IggyAddress())
			srv, stopAPI, err := startAPI(cmd.Context(), rt, cfg, log)
			if err != nil {
				_ = rt.Stop(context.Background())
				return err
			}
			printWhere(cmd.ErrOrStderr(), rt, cfg, srv)
			<-cmd.Context().Done()
			exitOnSecondSignal(cmd.ErrOrStderr())
			fmt.Fprintf(cmd.ErrOrStderr(), "ferry: stopping: %s; up to %s (--shutdown-timeout). Press Ctrl-C again to exit at once "+
				"(nothing acknowledged is lost; batches in flight are read again at the next start).\n", waitingFor(rt), shutdown)
			ctx, cancel := context.WithTimeout(context.Background(), shutdown)
			defer cancel()
			stopAPI(ctx)
			return rt.Stop(ctx)
		},
	}
	cmd.Flags().StringVarP(&configPath, "config", "c", "", "runtime config.toml (default: $IGGY_CONNECTORS_CONFIG_PATH)")
	cmd.Flags().DurationVar(&shutdown, "shutdown-timeout", 30*time.Second, "how long to drain in-flight batches on SIGINT/SIGTERM")
	return cmd
}

func runtimeLogger(cfg *config.Runtime) *slog.Logger {
	level := slog.LevelInfo
	switch cfg.Logging.Level {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	return newLogger(os.Stderr, cfg.Logging.Format == "json", level)
}

// startAPI starts the management API when [http] enabled is set, and
// returns it (nil when disabled) and the function that shuts it down.
func startAPI(ctx context.Context, rt *runtime.Runtime, cfg *config.Runtime, log *slog.Logger) (*api.Server, func(context.Context), error) {
	if !cfg.HTTP.Enabled {
		return nil, func(context.Context) {}, nil
	}
	srv, err := api.New(rt, cfg.HTTP, log, api.WithVersion(version))
	if err != nil {
		return nil, nil, err
	}
	if err := srv.Start(ctx); err != nil {
		return nil, nil, fmt.Errorf("management API on %s ([http] address): %w", cfg.HTTP.Address, err)
	}
	return srv, func(ctx context.Context) { _ = srv.Shutdown(ctx) }, nil
}
