package connector

import "log/slog"

// Config is what a connector's constructor receives.
type Config struct {
	// Key is the connector's key from its configuration file.
	Key string
	// Name is the connector's display name.
	Name string
	// Plugin is the connector's [plugin_config] table.
	Plugin PluginConfig
	// Logger logs with the connector's key attached.
	Logger *slog.Logger
	// Verbose asks the connector to log each message it handles (upstream's
	// `verbose = true`).
	Verbose bool
	// Paths says which files the connector may read and write: a
	// connector that opens files named by its configuration checks each
	// path with Paths.Check first.
	Paths Paths
	// StateDir is a directory of the connector's own under the runtime's
	// state directory (<[state] path>/data/<kind>-<key>), for what it must
	// keep beyond the state the runtime saves for it (the derive sink's
	// checkpoints). It may not exist yet: the connector creates it. Empty
	// when the runtime gives none (tests).
	StateDir string
}

// PluginConfig holds a connector's [plugin_config] table as it was parsed,
// with where each key came from. A connector reads it through its Spec:
// Spec.Parse checks it and returns the Settings.
type PluginConfig struct {
	// Values are the table's keys and values (string, int64, float64,
	// bool, []any, map[string]any; a value an environment variable set
	// may be a config.EnvValue, which Parse reads by the field's type).
	Values map[string]any
	// Source names where the table came from, for error messages, such as
	// "connectors/postgres.toml".
	Source string
	// Table is the table's dotted name in errors; empty means
	// "plugin_config".
	Table string
	// Lines are the 1-based lines in Source of the keys, by key path
	// within the table ("timeout", "headers.Authorization", "tables[1]");
	// "" is the line of the [plugin_config] header. Keys without a line
	// (JSON bodies, variables) are missing.
	Lines map[string]int
	// Vars name the environment variable that set a key, by key path.
	Vars map[string]string
}
