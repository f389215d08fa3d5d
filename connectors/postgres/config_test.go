package postgres

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// Upstream's connector files (their documented keys) load unchanged.
func TestUpstreamFilesLoad(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"testdata/upstream_source_polling.toml", "testdata/upstream_source_cdc.toml", "testdata/upstream_sink.toml"} {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		c, err := config.ParseConnector(file, data, config.WithEnv(config.MapEnv(nil)))
		require.NoError(t, err, file)
		info, ok := connector.Default.Lookup(connector.Kind(c.Type), c.Path)
		require.True(t, ok, "%s: path %q", file, c.Path)
		require.Equal(t, "postgres", info.Name)
		cfg := connector.Config{Key: c.Key, Plugin: connector.PluginConfig{Values: c.PluginConfig, Source: file}}
		if c.Type == "source" {
			_, err = info.NewSource(cfg)
		} else {
			_, err = info.NewSink(cfg)
		}
		require.NoError(t, err, file)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	dsn := "postgres://u@127.0.0.1:1/db"
	sources := []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"tables": []any{"t"}}, `plugin_config.connection_string: required key is missing (or set host); expected a string such as "postgres://user@host:5432/db"`},
		{map[string]any{"connection_string": dsn}, `plugin_config.tables: required in polling mode (or set custom_query); expected a list of tables such as ["users"]`},
		{map[string]any{"connection_string": dsn, "tables": []any{"t"}, "mode": "stream"}, `plugin_config.mode: expected one of "polling", "cdc", got "stream"`},
		{map[string]any{"connection_string": dsn, "tables": []any{"t"}, "batch_size": int64(0)}, "plugin_config.batch_size: expected an integer from 1 to 4294967295, got 0"},
		{map[string]any{"connection_string": dsn, "tables": []any{"t"}, "payload_format": "xml"}, `plugin_config.payload_format: expected one of "bytea", "text", "json_direct", got "xml"`},
		{map[string]any{"connection_string": dsn, "tables": []any{"t"}, "poll_interval": "soon"}, `plugin_config.poll_interval: expected a duration such as "5s", "250ms" or "1h 30m", got "soon"`},
		{map[string]any{"connection_string": dsn, "tables": []any{"t"}, "tabels": []any{"x"}}, `plugin_config.tabels: unknown key; did you mean "tables"?`},
		{map[string]any{"connection_string": dsn, "tables": []any{"t"}, "custom_query": "SELECT * FROM t WHERE id > $offset"}, "plugin_config.initial_offset: required when custom_query uses $offset"},
		{map[string]any{"connection_string": dsn, "custom_query": "SELECT * FROM $table"}, "plugin_config.custom_query: uses $table but tables is empty"},
		{map[string]any{"connection_string": dsn, "tables": []any{"t"}, "max_connections": int64(0)}, "plugin_config.max_connections: expected an integer from 1 to 2147483647, got 0"},
		{map[string]any{"connection_string": dsn, "mode": "cdc", "replication_slot": "Bad-Slot"}, `plugin_config.replication_slot: expected 1 to 63 characters of a-z, 0-9 and _, got "Bad-Slot"`},
		{map[string]any{"connection_string": dsn, "mode": "cdc", "publication": "x;y"}, `plugin_config.publication: expected 1 to 63 characters of a-z, 0-9 and _, got "x;y"`},
		{map[string]any{"connection_string": dsn, "mode": "cdc", "cdc_backend": "pg_replicate"}, `plugin_config.cdc_backend: "pg_replicate" is not supported by Ferry`},
		{map[string]any{"connection_string": dsn, "mode": "cdc", "capture_operations": []any{"INSERT", "MERGE"}}, `plugin_config.capture_operations[1]: expected one of "INSERT", "UPDATE", "DELETE", "TRUNCATE", got "MERGE"`},
		{map[string]any{"connection_string": dsn, "mode": "cdc", "snapshot": "always"}, `plugin_config.snapshot: expected one of "initial", "never", got "always"`},
		{map[string]any{"connection_string": "postgres://u@h:port/db", "tables": []any{"t"}}, "plugin_config.connection_string: cannot be parsed"},
	}
	for i, c := range sources {
		_, err := NewSource(connector.Config{Plugin: plugin(c.values)})
		require.ErrorContains(t, err, c.want, "source case %d", i)
		require.ErrorContains(t, err, "connectors/pg.toml", "source case %d", i)
	}
	sinks := []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"connection_string": dsn}, "plugin_config.target_table: required key is missing; expected a string"},
		{map[string]any{"connection_string": dsn, "target_table": "t", "payload_format": "xml"}, `plugin_config.payload_format: expected one of "bytea", "json", "text", got "xml"`},
		{map[string]any{"connection_string": dsn, "target_table": "t", "batch_size": int64(10000)}, "plugin_config.batch_size: expected an integer from 1 to 5000, got 10000"},
		{map[string]any{"connection_string": dsn, "target_table": "t", "dedupe_by": "hash"}, `plugin_config.dedupe_by: expected one of "id", "offset", got "hash"`},
		{map[string]any{"connection_string": dsn, "target_table": "t", "dedupe_by": "offset", "include_metadata": false}, `plugin_config.dedupe_by: "offset" needs include_metadata = true`},
		{map[string]any{"connection_string": dsn, "target_table": "t", "insert_method": "magic"}, `plugin_config.insert_method: expected one of "copy", "values", got "magic"`},
		{map[string]any{"connection_string": dsn, "target_table": "t", "include_payload": false}, "plugin_config.include_payload: is false and field_mappings is empty"},
		{map[string]any{"connection_string": dsn, "target_table": "t", "field_mappings": map[string]any{"a": "x"},
			"field_types": map[string]any{"a": "int; DROP TABLE t"}}, `plugin_config.field_types.a: expected a type name such as bigint, text or numeric(10, 2), got "int; DROP TABLE t"`},
		{map[string]any{"connection_string": dsn, "target_table": "t", "field_types": map[string]any{"b": "int"}}, "plugin_config.field_types.b: names no column of field_mappings"},
		{map[string]any{"connection_string": dsn, "target_table": "t", "auto_create_table": "yes"}, `plugin_config.auto_create_table: expected true or false, got "yes"`},
	}
	for i, c := range sinks {
		_, err := NewSink(connector.Config{Plugin: plugin(c.values)})
		require.ErrorContains(t, err, c.want, "sink case %d", i)
	}
}

const secret = "s3cr3t-Pa55w0rd"

// Passwords work from fields and from the environment, and never appear
// in errors or logs.
func TestPasswordNeverShown(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	role := db.name + "_user"
	db.exec(fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, quoteIdent(role), secret))
	db.exec(fmt.Sprintf(`GRANT ALL ON SCHEMA public TO %s`, quoteIdent(role)))
	db.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	db.exec(fmt.Sprintf(`GRANT SELECT ON t TO %s`, quoteIdent(role)))
	db.exec(`INSERT INTO t VALUES (1)`)
	cc := db.pool.Config().ConnConfig

	// The password comes from IGGY_CONNECTORS_SOURCE_<KEY>_PLUGIN_CONFIG_PASSWORD.
	toml := fmt.Sprintf("type = \"source\"\nkey = \"pg\"\npath = \"postgres\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n"+
		"[plugin_config]\nhost = %q\nport = %d\nuser = %q\ndatabase = %q\ntables = [\"t\"]\npoll_interval = \"10ms\"\n",
		cc.Host, cc.Port, role, cc.Database)
	c, err := config.ParseConnector("pg.toml", []byte(toml), config.WithEnv(config.MapEnv(map[string]string{
		"IGGY_CONNECTORS_SOURCE_PG_PLUGIN_CONFIG_PASSWORD": secret})))
	require.NoError(t, err)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	src, err := NewSource(connector.Config{Key: "pg", Plugin: connector.PluginConfig{Values: c.PluginConfig, Source: "pg.toml"}, Logger: log})
	require.NoError(t, err)
	require.NoError(t, src.Open(context.Background(), nil))
	b, err := src.Poll(context.Background())
	require.NoError(t, err)
	require.Len(t, b.Messages, 1)
	require.NoError(t, src.Close(context.Background()))

	// Failures, in every form of configuration, keep the password out.
	u := &url.URL{Scheme: "postgres", User: url.UserPassword(role, secret), Host: fmt.Sprintf("%s:%d", cc.Host, cc.Port), Path: "/no_such_db"}
	for i, values := range []map[string]any{
		{"connection_string": u.String(), "tables": []any{"t"}},
		{"connection_string": fmt.Sprintf("host=%s port=%d user=%s password='%s' dbname=no_such_db", cc.Host, cc.Port, role, secret), "tables": []any{"t"}},
		{"host": cc.Host, "port": int64(cc.Port), "user": role, "password": secret, "database": "no_such_db", "tables": []any{"t"}},
		{"host": cc.Host, "port": int64(cc.Port), "user": role, "password": secret + "-wrong", "database": cc.Database, "tables": []any{"t"}},
		{"connection_string": "postgres://" + role + ":" + secret + "@" + cc.Host + ":notaport/db", "tables": []any{"t"}},
		{"connection_string": "host=" + cc.Host + " password=" + secret + " port=x", "tables": []any{"t"}},
	} {
		logs.Reset()
		err := openErr(values, log)
		if i == 3 && err == nil {
			t.Log("this server does not check passwords (trust); the wrong-password case proves nothing here")
			continue
		}
		require.Error(t, err, "case %d", i)
		require.NotContains(t, err.Error(), secret, "case %d", i)
		require.NotContains(t, logs.String(), secret, "case %d", i)
		require.False(t, strings.Contains(fmt.Sprintf("%+v", err), secret), "case %d", i)
	}
}

func openErr(values map[string]any, log *slog.Logger) error {
	src, err := NewSource(connector.Config{Plugin: plugin(values), Logger: log})
	if err != nil {
		return err
	}
	defer src.Close(context.Background())
	return src.Open(context.Background(), nil)
}

// Fields override the connection string's parts.
func TestConnectionFieldsOverride(t *testing.T) {
	t.Parallel()
	pool := func(values map[string]any) *pgxpool.Config {
		values["tables"] = []any{"t"}
		set, err := SourceSpec.Parse(plugin(values))
		require.NoError(t, err)
		c := connectionFrom(set)
		cfg, err := c.poolConfig(set)
		require.NoError(t, err)
		return cfg
	}
	for i, cs := range []string{"postgres://a:b@h1:5432/d1?sslmode=disable", "host=h1 user=a password=b dbname=d1 sslmode=disable", ""} {
		cc := pool(map[string]any{"connection_string": cs, "host": "h2", "port": int64(6543), "username": "u'2", "password": "p2", "dbname": `d\2`}).ConnConfig
		require.Equal(t, []any{"h2", uint16(6543), "u'2", "p2", `d\2`}, []any{cc.Host, cc.Port, cc.User, cc.Password, cc.Database}, "case %d", i)
	}
	cfg := pool(map[string]any{"connection_string": "postgres://a:b@h1:5432/d1", "host": "h2", "password": "p2"})
	require.Equal(t, "ISO", cfg.ConnConfig.RuntimeParams["DateStyle"])
	require.Equal(t, int32(4), cfg.MaxConns, "the source's default")

	for i, cs := range []string{"postgres://a@h/d", "host=h user=a", ""} {
		cfg := pool(map[string]any{"connection_string": cs, "host": "h", "sslmode": "require"})
		require.NotNil(t, cfg.ConnConfig.TLSConfig, "case %d: sslmode from the field", i)
	}
}
