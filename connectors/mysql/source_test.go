package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/mysqltest"
	"github.com/stretchr/testify/require"
)

func sourceWith(values map[string]any) func(t *testing.T) connector.Source {
	return func(t *testing.T) connector.Source {
		s, err := NewSource(connector.Config{Key: "my", Plugin: connector.PluginConfig{Source: "my.toml", Values: values}})
		require.NoError(t, err)
		return s
	}
}

// rowAdder inserts rows (id, 'row <id>') into table and returns each as
// want formats its id (%[1]d).
func rowAdder(db *sql.DB, table, want string) func(t *testing.T, count int) []string {
	var mu sync.Mutex
	n := 0
	return func(t *testing.T, count int) []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for range count {
			n++
			_, err := db.Exec("INSERT INTO "+table+" (id, body) VALUES (?, ?)", n, fmt.Sprintf("row %d", n))
			require.NoError(t, err)
			out = append(out, fmt.Sprintf(want, n))
		}
		return out
	}
}

func TestSourceConformance(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	_, err := db.Exec("CREATE TABLE conf_items (id BIGINT PRIMARY KEY, body TEXT)")
	require.NoError(t, err)
	connectortest.Source(t, connectortest.SourceSuite{
		New:       sourceWith(map[string]any{"dsn": dsn, "tables": []any{"conf_items"}, "poll_interval": "20ms", "batch_size": int64(5)}),
		Add:       rowAdder(db, "conf_items", `{"id":%[1]d,"body":"row %[1]d"}`),
		StableIDs: true,
	})
}

// Ties of the tracking column are broken by the primary key, and
// delete_after_read deletes rows only in Ack.
func TestSourceTiesAndDeleteAfterAck(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	_, err := db.Exec("CREATE TABLE `we``ird` (id INT PRIMARY KEY, at INT NOT NULL, body JSON, bin VARBINARY(8))")
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO `we``ird` VALUES (3, 1, '{\"a\":1}', x'00ff'), (1, 1, NULL, NULL), (2, 2, '[1]', NULL)")
	require.NoError(t, err)
	src := sourceWith(map[string]any{"dsn": dsn, "table": "we`ird", "tracking_column": "at", "primary_key_column": "id",
		"batch_size": int64(2), "poll_interval": "10ms", "delete_after_read": true})(t)
	ctx := context.Background()
	require.NoError(t, src.Open(ctx, nil))
	defer src.Close(ctx)
	b, err := src.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, b.Messages, 2)
	require.JSONEq(t, `{"id":1,"at":1,"body":null,"bin":null}`, string(b.Messages[0].Payload))
	// MariaDB's JSON is LONGTEXT: the driver cannot tell it from text.
	require.JSONEq(t, `{"id":3,"at":1,"body":"{\"a\":1}","bin":"AP8="}`, string(b.Messages[1].Payload))
	require.Equal(t, 3, countRows(t, db, "`we``ird`"), "nothing deleted before Ack")
	require.NoError(t, src.(connector.Acker).Ack(ctx, b))
	require.Equal(t, 1, countRows(t, db, "`we``ird`"))
	b2, err := src.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, b2.Messages, 1)
	require.JSONEq(t, `{"id":2,"at":2,"body":"[1]","bin":null}`, string(b2.Messages[0].Payload))

	// A restart from the first batch's state reads the second row again
	// with the same id.
	again := sourceWith(map[string]any{"dsn": dsn, "table": "we`ird", "tracking_column": "at", "primary_key_column": "id",
		"poll_interval": "10ms"})(t)
	require.NoError(t, again.Open(ctx, b.State))
	defer again.Close(ctx)
	b3, err := again.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, b3.Messages, 1)
	require.Equal(t, b2.Messages[0].ID, b3.Messages[0].ID)
}

func TestSourceBadConfigNamesTheKey(t *testing.T) {
	for key, values := range map[string]map[string]any{
		"tables":           {"dsn": "root@tcp(127.0.0.1:1)/d"},
		"tracking_column":  {"dsn": "root@tcp(127.0.0.1:1)/d", "table": "t", "tracking_column": ""},
		"processed_column": {"dsn": "root@tcp(127.0.0.1:1)/d", "table": "t", "delete_after_read": true, "processed_column": "p"},
	} {
		_, err := NewSource(connector.Config{Key: "my", Plugin: connector.PluginConfig{Source: "my.toml", Values: values}})
		require.Error(t, err, key)
		require.Contains(t, err.Error(), key)
	}
}

// Through the embedded broker: rows reach the topic as JSON records, and
// delete_after_read removes them only once they are in Iggy.
func TestSourceRuntime(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	_, err := db.Exec("CREATE TABLE orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, body TEXT)")
	require.NoError(t, err)
	for i := range 25 {
		_, err := db.Exec("INSERT INTO orders (body) VALUES (?)", fmt.Sprintf("order %d", i))
		require.NoError(t, err)
	}
	run := connectortest.Start(t, map[string]string{"in.toml": fmt.Sprintf(`type = "source"
key = "from_mysql"
path = "mysql"
[[streams]]
stream = "shop"
topic = "orders"
schema = "json"
[plugin_config]
dsn = %q
table = "orders"
batch_size = 10
poll_interval = "20ms"
delete_after_read = true
`, dsn)})
	connectortest.Eventually(t, "25 messages", func() bool { return len(run.Messages(t, "shop", "orders")) >= 25 })
	msgs := run.Messages(t, "shop", "orders")
	require.Len(t, msgs, 25)
	require.JSONEq(t, `{"id":1,"body":"order 0"}`, string(msgs[0].Payload))
	require.JSONEq(t, `{"id":25,"body":"order 24"}`, string(msgs[24].Payload))
	connectortest.Eventually(t, "the rows deleted after the ack", func() bool { return countRows(t, db, "orders") == 0 })
}

// A server that is down for a while: the source reports it, and once the
// server is back reads on from where it was, nothing lost.
func TestSourceSurvivesAServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a MariaDB of its own")
	}
	t.Parallel()
	srv := mysqltest.Private(t)
	dsn := mysqltest.DatabaseOn(t, srv.URL)
	db := mysqltest.Open(t, dsn)
	_, err := db.Exec("CREATE TABLE orders (id BIGINT PRIMARY KEY, body TEXT)")
	require.NoError(t, err)
	add := rowAdder(db, "orders", `{"id":%[1]d,"body":"row %[1]d"}`)
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
table = "orders"
poll_interval = "20ms"
retry_delay = "20ms"
connect_timeout = "1s"
`, dsn)})
	connectortest.Eventually(t, "3 messages", func() bool { return len(run.Messages(t, "shop", "orders")) >= 3 })
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
	connectortest.Eventually(t, "7 messages", func() bool { return len(run.Messages(t, "shop", "orders")) >= 7 })
	var got []string
	for _, m := range run.Messages(t, "shop", "orders") {
		got = append(got, string(m.Payload))
	}
	require.Equal(t, want, got, "every row once, in order")
}

// processed_column: rows are marked in Ack and marked rows are not read,
// even by a source with no saved state.
func TestSourceProcessedColumn(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	_, err := db.Exec("CREATE TABLE jobs (id INT PRIMARY KEY, done BOOLEAN NOT NULL DEFAULT FALSE)")
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO jobs (id) VALUES (1), (2), (3)")
	require.NoError(t, err)
	cfg := map[string]any{"dsn": dsn, "table": "jobs", "processed_column": "done", "batch_size": int64(2), "poll_interval": "10ms"}
	ctx := context.Background()
	src := sourceWith(cfg)(t)
	require.NoError(t, src.Open(ctx, nil))
	b, err := src.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, b.Messages, 2)
	require.NoError(t, src.(connector.Acker).Ack(ctx, b))
	require.NoError(t, src.Close(ctx))
	fresh := sourceWith(cfg)(t)
	require.NoError(t, fresh.Open(ctx, nil))
	defer fresh.Close(ctx)
	b, err = fresh.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, b.Messages, 1)
	require.JSONEq(t, `{"id":3,"done":0}`, string(b.Messages[0].Payload))
}
