package mysql

import (
	"context"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/mysqltest"
	"github.com/stretchr/testify/require"
)

// connection_string is dsn under the postgres connectors' name: it
// connects the source and the sink.
func TestConnectionStringConnects(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE cs (id INT PRIMARY KEY, body TEXT)")
	mustExec(t, db, "INSERT INTO cs VALUES (1, 'one')")
	src := openWith(t, map[string]any{"connection_string": dsn, "table": "cs", "poll_interval": "10ms"}, nil)
	b := pollOne(t, src)
	require.JSONEq(t, `{"id":1,"body":"one"}`, string(b.Messages[0].Payload))

	sink := newSink(t, map[string]any{"connection_string": dsn, "table": "cs_out", "auto_create_table": true})
	ctx := context.Background()
	require.NoError(t, sink.Open(ctx))
	defer sink.Close(ctx)
	require.Equal(t, 0, countRows(t, db, "cs_out"), "the sink connected and created its table")
}

// A connection_string that cannot be parsed is reported under
// connection_string (the key the user wrote), without its password, by
// the source and the sink alike.
func TestConnectionStringErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"connection_string": "root:hunter2@tcp(127.0.0.1:3306/app"}, "plugin_config.connection_string: cannot be parsed"},
		{map[string]any{"connection_string": "root:hunter2@tcp(127.0.0.1:3306)app"}, "plugin_config.connection_string: cannot be parsed"},
		{map[string]any{"connection_string": "root:hunter2@tcp(127.0.0.1:3306)/app?x=%zz"}, "plugin_config.connection_string: cannot be parsed"},
		{map[string]any{"connection_string": "root:hunter2@tcp(127.0.0.1:3306)/"}, "plugin_config.database: required key is missing (or name the database in connection_string)"},
		{map[string]any{"dsn": "root:hunter2@tcp(127.0.0.1:3306/app"}, "plugin_config.dsn: cannot be parsed"},
		{map[string]any{"dsn": "root@tcp(127.0.0.1:3306)/app", "connection_string": "root:hunter2@tcp(127.0.0.1:3306)/app"},
			"plugin_config.connection_string: cannot be set with dsn"},
		{map[string]any{}, "plugin_config.dsn: required key is missing (or set connection_string, or host)"},
	} {
		src := map[string]any{"table": "t"}
		for k, v := range c.values {
			src[k] = v
		}
		_, err := NewSource(connector.Config{Key: "my", Plugin: connector.PluginConfig{Source: "my.toml", Values: src}})
		require.Error(t, err, "%v", c.values)
		require.Contains(t, err.Error(), c.want)
		require.NotContains(t, err.Error(), "hunter2")
		_, err = NewSink(connector.Config{Key: "my", Plugin: connector.PluginConfig{Source: "my.toml", Values: src}})
		require.Error(t, err, "sink: %v", c.values)
		require.Contains(t, err.Error(), c.want, "sink")
		require.NotContains(t, err.Error(), "hunter2", "sink")
	}
}
