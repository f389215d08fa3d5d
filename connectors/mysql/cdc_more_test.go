package mysql

import (
	"context"
	"fmt"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/mysqltest"
	"github.com/stretchr/testify/require"
)

// A batch whose send fails (Nack) leaves the acknowledged position where
// it was, and a source restarted from the last saved state delivers the
// same changes again with the same ids; a large transaction split over
// batches resumes after the last delivered change of it.
func TestCDCNackedBatchIsDeliveredAgain(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY)")
	values := cdcValues(dsn, map[string]any{"snapshot": "never", "batch_size": int64(4)})
	src := openCDC(t, values, nil)
	ctx := context.Background()
	start, err := src.Poll(ctx)
	require.NoError(t, err)
	require.Empty(t, start.Messages)
	require.NoError(t, src.Ack(ctx, start))
	saved := start.State
	before := src.ackedState()

	mustExec(t, db, "INSERT INTO t VALUES (1), (2), (3), (4), (5), (6)") // one transaction, two batches
	b1, err := src.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, b1.Messages, 4)
	src.Nack(ctx, b1, fmt.Errorf("send failed"))
	require.Equal(t, before, src.ackedState(), "a nacked batch does not move the position")
	require.NoError(t, src.Close(ctx))

	again := openCDC(t, values, saved)
	r1, err := again.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, r1.Messages, 4)
	for i := range r1.Messages {
		require.Equal(t, b1.Messages[i].ID, r1.Messages[i].ID)
		require.Equal(t, b1.Messages[i].Payload, r1.Messages[i].Payload)
	}
	require.NoError(t, again.Ack(ctx, r1))
	st := again.ackedState()
	require.NotEmpty(t, st.Txn, "the state says how far into the transaction delivery got")
	require.Equal(t, uint64(4), st.Seq)
	require.NoError(t, again.Close(ctx))

	// Restarted mid-transaction: the last two changes, not the first four.
	third := openCDC(t, values, r1.State)
	rest, _ := pollN(t, third, 2)
	require.Len(t, rest, 2)
	require.JSONEq(t, `{"id":5}`, string(decodeEvent(t, rest[0]).Data))
	require.JSONEq(t, `{"id":6}`, string(decodeEvent(t, rest[1]).Data))
}

// Hostile table and column names and values come through as JSON
// strings, and nothing of them reaches a statement.
func TestCDCHostileNamesAndValues(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	table := "we`ird \"t'able\" ünï"
	q, err := tableName(table)
	require.NoError(t, err)
	mustExec(t, db, "CREATE TABLE "+q+" (`id` INT PRIMARY KEY, `co``l \"x\"'; DROP TABLE x; --` TEXT, `\\n` VARCHAR(50)) DEFAULT CHARSET=utf8mb4")
	mustExec(t, db, "INSERT INTO "+q+" VALUES (1, ?, ?)", "'); DROP TABLE t; -- \"\\\x01\u2028", "snapshot")
	src := openCDC(t, cdcValues(dsn, map[string]any{"tables": []any{table}}), nil)
	snap, _ := pollN(t, src, 1)
	e := decodeEvent(t, snap[0])
	require.Equal(t, table, e.Table)
	require.JSONEq(t, `{"id":1,"co`+"`"+`l \"x\"'; DROP TABLE x; --":"'); DROP TABLE t; -- \"\\\u0001\u2028","\\n":"snapshot"}`, string(e.Data))
	mustExec(t, db, "UPDATE "+q+" SET `\\n` = ? WHERE id = 1", "}\"{ \x00 ✓")
	got, _ := pollN(t, src, 1)
	e = decodeEvent(t, got[0])
	require.Equal(t, "UPDATE", e.Op)
	require.Equal(t, table, e.Table)
	var row map[string]any
	require.NoError(t, decodeInto(e.Data, &row))
	require.Equal(t, "}\"{ \x00 ✓", row[`\n`])
	require.Equal(t, "'); DROP TABLE t; -- \"\\\x01\u2028", row["co`l \"x\"'; DROP TABLE x; --"])
}

// The server going away mid-stream (a private server halted and
// resumed): the source reports it and then reads on from where it was,
// every change once, in order.
func TestCDCSurvivesAServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a MariaDB of its own")
	}
	t.Parallel()
	srv := mysqltest.Private(t)
	dsn := mysqltest.DatabaseOn(t, srv.URL)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE orders (id BIGINT PRIMARY KEY, body TEXT)")
	add := rowAdder(db, "orders", "row %[1]d")
	want := add(t, 3)
	run := connectortest.Start(t, map[string]string{"in.toml": fmt.Sprintf(`type = "source"
key = "from_mysql"
path = "mysql"
[[streams]]
stream = "shop"
topic = "orders"
schema = "json"
[plugin_config]
dsn = %q
mode = "cdc"
tables = ["orders"]
retry_delay = "20ms"
connect_timeout = "1s"
`, dsn)})
	rows := func() []string {
		var out []string
		for _, m := range run.Messages(t, "shop", "orders") {
			var row struct{ ID int64 }
			require.NoError(t, decodeInto(decodeEvent(t, connector.Message{Payload: m.Payload}).Data, &row))
			out = append(out, fmt.Sprintf("row %d", row.ID))
		}
		return out
	}
	connectortest.Eventually(t, "3 snapshot rows", func() bool { return len(rows()) >= 3 })
	want = append(want, add(t, 2)...)
	connectortest.Eventually(t, "5 messages", func() bool { return len(rows()) >= 5 })
	srv.Halt()
	connectortest.Eventually(t, "the source to notice the outage", func() bool {
		for _, info := range run.Runtime.Connectors(connector.KindSource) {
			if info.LastError != "" {
				return true
			}
		}
		return false
	})
	srv.Resume(t)
	want = append(want, add(t, 4)...)
	connectortest.Eventually(t, "9 messages", func() bool { return len(rows()) >= 9 })
	require.Equal(t, want, rows(), "every row once, in order")
}

func TestCDCBadConfigNamesTheKey(t *testing.T) {
	base := map[string]any{"dsn": "root@tcp(127.0.0.1:1)/d", "mode": "cdc"}
	with := func(k string, v any) map[string]any {
		out := map[string]any{}
		for a, b := range base {
			out[a] = b
		}
		out[k] = v
		return out
	}
	for key, values := range map[string]map[string]any{
		"tracking_column":    with("tracking_column", "x"),
		"delete_after_read":  with("delete_after_read", true),
		"server_id":          with("server_id", int64(0)),
		"snapshot":           with("snapshot", "sometimes"),
		"capture_operations": with("capture_operations", []any{"TRUNCATE"}),
		"mode":               with("mode", "binlog"),
	} {
		_, err := NewSource(connector.Config{Key: "my", Plugin: connector.PluginConfig{Source: "my.toml", Values: values}})
		require.Error(t, err, key)
		require.Contains(t, err.Error(), key)
	}
	_, err := NewSource(connector.Config{Key: "my", Plugin: connector.PluginConfig{Source: "my.toml",
		Values: map[string]any{"dsn": "root@tcp(127.0.0.1:1)/d", "table": "t", "snapshot": "never"}}})
	require.ErrorContains(t, err, "snapshot", "a cdc key in polling mode")
	_, err = NewSource(connector.Config{Key: "my", Plugin: connector.PluginConfig{Source: "my.toml", Values: base}})
	require.NoError(t, err, "cdc needs no tables: every table of the database")
}
