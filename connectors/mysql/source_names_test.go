package mysql

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/mysqltest"
	"github.com/stretchr/testify/require"
)

// hostileNames are names MySQL accepts in backticks and that break SQL
// built by pasting them.
var hostileNames = []string{
	"we`ird",
	"it's",
	`say "hi"`,
	"with space",
	"ünïcødé 表",
	"select",
	"x; DROP TABLE victims; --",
	"q?mark",
	"t$offset",
	"``",
	"a\\b",
}

// The polling source, in table mode and with a custom query on $table,
// reads tables and columns of every such name, marks them after Ack, and
// their names come back as the record's keys.
func TestSourceHostileNames(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE victims (id INT)")
	mustExec(t, db, "INSERT INTO victims VALUES (1)")
	ctx := context.Background()
	for i, name := range hostileNames {
		// table, tracking and key, processed and payload columns all
		// named after it
		q, err := ident(name)
		require.NoError(t, err)
		trk, pk, done, pay := name+" t", name+" k", name+" d", name+" p"
		qt, _ := ident(trk)
		qk, _ := ident(pk)
		qd, _ := ident(done)
		qp, _ := ident(pay)
		mustExec(t, db, "CREATE TABLE "+q+" ("+qk+" VARCHAR(20) PRIMARY KEY, "+qt+" INT, "+qd+" BOOLEAN NOT NULL DEFAULT FALSE, "+qp+" TEXT)")
		mustExec(t, db, "INSERT INTO "+q+" VALUES ('b', 2, FALSE, 'two'), ('a', 1, FALSE, 'one'), ('c', 2, FALSE, 'three')")
		base := map[string]any{"dsn": dsn, "table": name, "tracking_column": trk, "primary_key_column": pk,
			"processed_column": done, "poll_interval": "10ms", "batch_size": int64(2)}

		src := openWith(t, base, nil)
		b := pollOne(t, src)
		require.Len(t, b.Messages, 2, name)
		var rec map[string]any
		require.NoError(t, json.Unmarshal(b.Messages[0].Payload, &rec), name)
		require.Equal(t, map[string]any{pk: "a", trk: float64(1), done: float64(0), pay: "one"}, rec, name)
		require.NoError(t, src.(connector.Acker).Ack(ctx, b), name)
		b = pollOne(t, src)
		require.Equal(t, []string{"c"}, field(t, b, pk), "%s: the tie at 2 broken by the key", name)
		require.NoError(t, src.(connector.Acker).Ack(ctx, b), name)
		require.Equal(t, 3, countRows(t, db, q+" WHERE "+qd), name)

		// payload_column, and a custom query with $table, delete_after_read
		mustExec(t, db, "UPDATE "+q+" SET "+qd+" = FALSE")
		custom := map[string]any{"dsn": dsn, "tables": []any{name}, "tracking_column": trk, "primary_key_column": pk,
			"payload_column": pay, "delete_after_read": true, "initial_offset": "0", "poll_interval": "10ms",
			"custom_query": "SELECT * FROM $table WHERE " + qt + " > $offset OR (" + qt + " = $offset AND " + qk + " > $key) ORDER BY " + qt + ", " + qk + " LIMIT $limit"}
		src = openWith(t, custom, nil)
		b = pollOne(t, src)
		require.Equal(t, connector.SchemaRaw, b.Schema)
		var got []string
		for _, m := range b.Messages {
			got = append(got, string(m.Payload))
		}
		require.Equal(t, []string{"one", "two", "three"}, got, name)
		require.NoError(t, src.(connector.Acker).Ack(ctx, b), name)
		require.Equal(t, 0, countRows(t, db, q), "%s: deleted after Ack", name)
		require.Equal(t, 1, countRows(t, db, "victims"), "case %d: victims untouched", i)
	}
}

// Names the source cannot quote, or MySQL refuses, are refused at start
// with the key named.
func TestSourceRefusedNamesNameTheKey(t *testing.T) {
	dsn := "root@tcp(127.0.0.1:1)/d"
	for _, c := range []struct {
		key, value string
		want       string
	}{
		{"table", "", "plugin_config.table"},
		{"table", "trailing ", "plugin_config.table: \"trailing \" ends with a space"},
		{"table", "nul\x00byte", "holds a NUL character"},
		{"table", strings.Repeat("x", 65), "longer than 64 characters"},
		{"table", "db.trailing ", "ends with a space"},
		{"table", "emoji 🦀", "outside Unicode's Basic Multilingual Plane"},
		{"tracking_column", "nul\x00", "plugin_config.tracking_column"},
		{"primary_key_column", "k ", "plugin_config.primary_key_column"},
		{"processed_column", strings.Repeat("é", 65), "plugin_config.processed_column"},
		{"payload_column", "🦀", "plugin_config.payload_column"},
	} {
		values := map[string]any{"dsn": dsn, "table": "t", c.key: c.value}
		_, err := NewSource(connector.Config{Key: "my", Plugin: connector.PluginConfig{Source: "my.toml", Values: values}})
		require.Error(t, err, "%s = %q", c.key, c.value)
		require.Contains(t, err.Error(), c.want)
	}
	_, err := NewSource(connector.Config{Key: "my", Plugin: connector.PluginConfig{Source: "my.toml",
		Values: map[string]any{"dsn": dsn, "tables": []any{"ok", "bad "}}}})
	require.ErrorContains(t, err, "plugin_config.tables[1]")
}
