package all_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// checkFile loads a connector file as the runtime does and checks its
// plugin_config against the connector's spec (connector.Spec.Parse).
func checkFile(t *testing.T, file, doc string, env map[string]string) (*connector.Settings, error) {
	t.Helper()
	c, err := config.ParseConnector(file, []byte(doc), config.WithEnv(config.MapEnv(env)))
	require.NoError(t, err, "the runtime's own keys are fine:\n%s", doc)
	info, ok := connector.Default.Lookup(connector.Kind(c.Type), c.Path)
	require.True(t, ok, c.Path)
	require.NotNil(t, info.Spec, "%s %s declares its settings", c.Type, info.Name)
	return info.Spec.Parse(connector.PluginConfig{Values: c.PluginConfig, Source: file,
		Lines: c.PluginConfigLines, Vars: c.PluginConfigVars})
}

// head is a connector file up to its [plugin_config] header, which is
// line 7, so the table's first key is on line 8.
func head(kind, path string) string {
	streams := "topic = \"t\""
	if kind == "sink" {
		streams = "topics = [\"t\"]"
	}
	return fmt.Sprintf("type = %q\nkey = \"k\"\npath = %q\n[[streams]]\nstream = \"s\"\n%s\n[plugin_config]\n", kind, path, streams)
}

// Bad plugin_config values of every built-in connector are reported with
// the file, the line, the key path, what was expected and, for unknown
// keys, the closest key.
func TestBadPluginConfigs(t *testing.T) {
	t.Parallel()
	pg := "connection_string = \"postgres://u@h/db\"\n"
	for i, tc := range []struct {
		kind, path, body string
		want             string
	}{
		{"source", "random", "interval = \"often\"\n",
			`r.toml:8: plugin_config.interval: expected a duration such as "5s", "250ms" or "1h 30m", got "often"`},
		{"source", "random", "intervall = \"1s\"\n",
			`r.toml:8: plugin_config.intervall: unknown key; did you mean "interval"?`},
		{"source", "random", "messages_range = [5]\n",
			`r.toml:8: plugin_config.messages_range: expected a list of 2 integers from 1 to 4294967295, got 1 items`},
		{"source", "random", "messages_range = [9, 3]\n",
			`r.toml:8: plugin_config.messages_range: expected [min, max] with min <= max, got [9, 3]`},
		{"source", "libiggy_connector_random_source", "payload_size = -1\n",
			`r.toml:8: plugin_config.payload_size: expected an integer from 0 to 1048576, got -1`},
		{"sink", "stdout", "print_payload = \"true\"\n",
			`r.toml:8: plugin_config.print_payload: expected true or false, got the string "true"; write it without quotes`},
		{"sink", "stdout", "print_payloads = true\n",
			`r.toml:8: plugin_config.print_payloads: unknown key; did you mean "print_payload"?`},
		{"sink", "exec", "shell = \"/bin/sh\"\n",
			`r.toml:7: plugin_config.command: required key is missing; expected a string`},
		{"sink", "exec", "command = \"true\"\ntimeout = \"soon\"\n",
			`r.toml:9: plugin_config.timeout: expected a duration such as "5s", "250ms" or "1h 30m", got "soon"`},
		{"sink", "exec", "command = \"true\"\nordering = \"partiton\"\n",
			`r.toml:9: plugin_config.ordering: expected one of "partition", "none", got "partiton"; did you mean "partition"?`},
		{"sink", "exec", "command = \"true\"\nconcurrency = 0\n",
			`r.toml:9: plugin_config.concurrency: expected an integer from 1 to 1024, got 0`},
		{"sink", "exec", "command = \"true\"\n[plugin_config.env]\nA = 1\n",
			`r.toml:10: plugin_config.env.A: expected a string, got an integer (1)`},
		{"source", "file", "paths = \"logs/*.ndjson\"\n",
			`r.toml:8: plugin_config.paths: expected a non-empty list of strings, got the string "logs/*.ndjson"; write ["logs/*.ndjson"]`},
		{"source", "file", "paths = [\"a\", \"[b\"]\n",
			`r.toml:8: plugin_config.paths[1]: expected a path or a glob such as "logs/*.ndjson"`},
		{"source", "file", "paths = [\"a\"]\nmax_batch_bytes = \"lots\"\n",
			`r.toml:9: plugin_config.max_batch_bytes: expected a byte size such as 1048576 or "64MiB" from 1B to 1GiB, got "lots"`},
		{"sink", "file", "path = \"out.ndjson\"\nrotate_size = \"-1MB\"\n",
			`r.toml:9: plugin_config.rotate_size: expected a byte size such as 1048576 or "64MiB" of at least 0B, got "-1MB"`},
		{"sink", "file", "path = \"out.ndjson\"\nformat = \"whole_file\"\n",
			`r.toml:9: plugin_config.format: expected one of "ndjson", "lines", "raw", got "whole_file"`},
		{"sink", "http", "url = \"http://x\"\nbatch_mode = \"ndjsn\"\n",
			`r.toml:9: plugin_config.batch_mode: expected one of "individual", "ndjson", "json_array", "raw", got "ndjsn"; did you mean "ndjson"?`},
		{"sink", "http", "url = \"http://x\"\nretries = 2\n",
			`r.toml:9: plugin_config.retries: unknown key; did you mean "max_retries"?`},
		{"sink", "http", "url = \"http://x\"\nsuccess_status_codes = [200, 2000]\n",
			`r.toml:9: plugin_config.success_status_codes[1]: expected an integer from 100 to 599, got 2000`},
		{"sink", "libiggy_connector_http_sink", "url = \"http://x\"\nsigning_secret = 42\n",
			`r.toml:9: plugin_config.signing_secret: expected a string, got an integer`},
		{"sink", "http", "url = \"http://x\"\n[plugin_config.headers]\n\"Bad Name\" = \"v\"\n",
			`r.toml:9: plugin_config.headers: "Bad Name" is not a valid header name`},
		{"source", "postgres", pg + "tabels = [\"users\"]\n",
			`r.toml:9: plugin_config.tabels: unknown key; did you mean "tables"?`},
		{"source", "postgres", pg + "tables = [\"t\"]\nmode = \"stream\"\n",
			`r.toml:10: plugin_config.mode: expected one of "polling", "cdc", got "stream"`},
		{"source", "postgres", pg + "mode = \"cdc\"\nreplication_slot = \"Bad-Slot\"\n",
			`r.toml:10: plugin_config.replication_slot: expected 1 to 63 characters of a-z, 0-9 and _, got "Bad-Slot"`},
		{"source", "postgres", pg + "mode = \"cdc\"\ncapture_operations = [\"INSERT\", \"MERGE\"]\n",
			`r.toml:10: plugin_config.capture_operations[1]: expected one of "INSERT", "UPDATE", "DELETE", "TRUNCATE", got "MERGE"`},
		{"source", "postgres", "tables = [\"t\"]\n",
			`r.toml:7: plugin_config.connection_string: required key is missing (or set host); expected a string such as "postgres://user@host:5432/db"`},
		{"sink", "postgres", pg + "target_table = \"t\"\nbatch_size = 10000\n",
			`r.toml:10: plugin_config.batch_size: expected an integer from 1 to 5000, got 10000`},
		{"sink", "libiggy_connector_postgres_sink", pg + "target_table = \"t\"\ndedupe_by = \"offset\"\ninclude_metadata = false\n",
			`r.toml:10: plugin_config.dedupe_by: "offset" needs include_metadata = true`},
		{"sink", "postgres", pg + "target_table = \"t\"\n[plugin_config.field_types]\nb = \"int\"\n",
			`r.toml:11: plugin_config.field_types.b: names no column of field_mappings`},
		{"sink", "postgres", pg + "password = 42\ntarget_table = \"t\"\n",
			`r.toml:9: plugin_config.password: expected a string, got an integer`},
	} {
		_, err := checkFile(t, "r.toml", head(tc.kind, tc.path)+tc.body, nil)
		require.Error(t, err, "case %d", i)
		require.Equal(t, tc.want, err.Error(), "case %d", i)
		var se *connector.SettingError
		require.True(t, errors.As(err, &se), "case %d", i)
	}
}

// A file with three mistakes reports all three at once, in file order.
func TestThreeMistakesAtOnce(t *testing.T) {
	t.Parallel()
	doc := head("sink", "http") + "url = \"http://example.com\"\ntimeout = \"often\"\nmethd = \"PUT\"\nmax_connections = 0\n"
	_, err := checkFile(t, "r2.toml", doc, nil)
	require.EqualError(t, err, `3 configuration errors:
  r2.toml:9: plugin_config.timeout: expected a duration such as "5s", "250ms" or "1h 30m", got "often"
  r2.toml:10: plugin_config.methd: unknown key; did you mean "method"?
  r2.toml:11: plugin_config.max_connections: expected an integer of at least 1, got 0`)
	var all connector.SettingErrors
	require.True(t, errors.As(err, &all))
	require.Len(t, all, 3)
}

// IGGY_CONNECTORS_*_PLUGIN_CONFIG_* variables are read by the field's
// type, and a bad one names the variable.
func TestEnvironmentOverridesAreChecked(t *testing.T) {
	t.Parallel()
	doc := head("sink", "postgres") + "connection_string = \"postgres://u@h/db\"\ntarget_table = \"t\"\n"
	set, err := checkFile(t, "pg.toml", doc, map[string]string{
		"IGGY_CONNECTORS_SINK_K_PLUGIN_CONFIG_PASSWORD":    "0042",
		"IGGY_CONNECTORS_SINK_K_PLUGIN_CONFIG_BATCH_SIZE":  "250",
		"IGGY_CONNECTORS_SINK_K_PLUGIN_CONFIG_RETRY_DELAY": "0",
	})
	require.NoError(t, err)
	require.Equal(t, "0042", set.String("password"), "a string field gets the text exactly")
	require.Equal(t, 250, set.Int("batch_size"))
	require.Zero(t, set.Duration("retry_delay"))

	_, err = checkFile(t, "pg.toml", doc, map[string]string{"IGGY_CONNECTORS_SINK_K_PLUGIN_CONFIG_BATCH_SIZE": "lots"})
	require.EqualError(t, err, "pg.toml: environment variable IGGY_CONNECTORS_SINK_K_PLUGIN_CONFIG_BATCH_SIZE (plugin_config.batch_size): expected an integer from 1 to 5000, got \"lots\"")
	_, err = checkFile(t, "pg.toml", doc, map[string]string{"IGGY_CONNECTORS_SINK_K_PLUGIN_CONFIG_BATCH_SIZ": "5"})
	require.ErrorContains(t, err, `environment variable IGGY_CONNECTORS_SINK_K_PLUGIN_CONFIG_BATCH_SIZ (plugin_config.batch_siz): unknown key; did you mean "batch_size"?`)
}

// A duration of "0" needs no unit.
func TestZeroDurationNeedsNoUnit(t *testing.T) {
	t.Parallel()
	set, err := checkFile(t, "h.toml", head("sink", "exec")+"command = \"true\"\ntimeout = \"0\"\n", nil)
	require.NoError(t, err)
	require.Zero(t, set.Duration("timeout"))
}

// Secret fields are never echoed in errors.
func TestSecretsStayOutOfErrors(t *testing.T) {
	t.Parallel()
	_, err := checkFile(t, "h.toml", head("sink", "http")+"url = \"http://x\"\nsigning_secret = [\"hunter2\"]\n", nil)
	require.Error(t, err)
	require.False(t, strings.Contains(err.Error(), "hunter2"), err.Error())
}
