package mysql

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/mysqltest"
	"github.com/stretchr/testify/require"
)

func openWith(t *testing.T, values map[string]any, state []byte) connector.Source {
	t.Helper()
	src := sourceWith(values)(t)
	require.NoError(t, src.Open(context.Background(), state))
	t.Cleanup(func() { src.Close(context.Background()) })
	return src
}

// pollOne polls one batch; the deadline only keeps a broken source from
// hanging the test.
func pollOne(t *testing.T, src connector.Source) *connector.Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := src.Poll(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, b.Messages)
	return b
}

// field is one field of each message's JSON record, as text.
func field(t *testing.T, b *connector.Batch, name string) []string {
	t.Helper()
	var out []string
	for _, m := range b.Messages {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(m.Payload, &rec), string(m.Payload))
		out = append(out, fmt.Sprint(rec[name]))
	}
	return out
}

// Rows of a join with a filter come once each, in tracking order, in
// batches of batch_size; new rows follow; a restart from a batch's state
// (the last one acknowledged) reads on after it with the same ids.
func TestSourceQueryJoinOnceInOrder(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE customers (id INT PRIMARY KEY, name TEXT)")
	mustExec(t, db, "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id INT, status TEXT, total DECIMAL(10,2))")
	mustExec(t, db, "INSERT INTO customers VALUES (1, 'ann'), (2, 'bob')")
	var want []string
	for id := 10; id >= 1; id-- { // newest first: the query's ORDER BY is the order
		status := "paid"
		if id%4 == 0 {
			status = "cancelled"
		}
		mustExec(t, db, "INSERT INTO orders VALUES (?, ?, ?, ?)", id, 1+id%2, status, id)
	}
	for id := 1; id <= 10; id++ {
		if id%4 != 0 {
			want = append(want, fmt.Sprint(id))
		}
	}
	cfg := map[string]any{"dsn": dsn, "batch_size": int64(3), "poll_interval": "10ms", "initial_offset": int64(0),
		"custom_query": `SELECT o.id, c.name AS customer, o.total FROM orders o JOIN customers c ON c.id = o.customer_id
			WHERE o.status <> 'cancelled' AND o.id > $offset ORDER BY o.id LIMIT $limit`}
	src := openWith(t, cfg, nil)
	var got []string
	var batches []*connector.Batch
	for len(got) < len(want) {
		b := pollOne(t, src)
		require.LessOrEqual(t, len(b.Messages), 3)
		batches = append(batches, b)
		got = append(got, field(t, b, "id")...)
	}
	require.Equal(t, want, got, "each row of the join once, in id order, cancelled ones left out")
	require.JSONEq(t, `{"id":1,"customer":"bob","total":1.00}`, string(batches[0].Messages[0].Payload))

	mustExec(t, db, "INSERT INTO orders VALUES (11, 1, 'paid', 11), (12, 2, 'cancelled', 12), (13, 2, 'paid', 13)")
	b := pollOne(t, src)
	require.Equal(t, []string{"11", "13"}, field(t, b, "id"), "only the new rows")

	// Restart from the second batch's state: the third batch comes again,
	// with the same ids.
	again := openWith(t, cfg, batches[1].State)
	b3 := pollOne(t, again)
	require.Equal(t, []string{"9", "10", "11"}, field(t, b3, "id"), "after the second batch's last row (7), new row 11 included")
	require.Equal(t, field(t, batches[2], "id"), field(t, b3, "id")[:2])
	for i := range batches[2].Messages {
		require.Equal(t, batches[2].Messages[i].ID, b3.Messages[i].ID)
		require.NotZero(t, b3.Messages[i].ID)
	}
}

// Rows sharing a tracking value across batch boundaries are neither
// skipped nor repeated when the query breaks ties with $key.
func TestSourceQueryTiesByKey(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE ev (id INT PRIMARY KEY, at DATETIME(6) NOT NULL)")
	for _, id := range []int{9, 1, 5, 3, 7, 2, 8, 4, 6, 10} {
		mustExec(t, db, "INSERT INTO ev VALUES (?, TIMESTAMP '2024-01-01 00:00:00' + INTERVAL ? SECOND)", id, (id-1)/3)
	}
	src := openWith(t, map[string]any{"dsn": dsn, "batch_size": int64(2), "poll_interval": "10ms",
		"tracking_column": "at", "primary_key_column": "id", "initial_offset": "2023-12-31 23:59:59",
		"custom_query": `SELECT id, at FROM ev WHERE at > $offset OR (at = $offset AND id > $key) ORDER BY at, id LIMIT $limit`}, nil)
	var got []string
	for len(got) < 10 {
		got = append(got, field(t, pollOne(t, src), "id")...)
	}
	require.Equal(t, []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}, got)
}

// Values full of SQL metacharacters, used as the tracking value that
// $offset binds, are read as data: every row once, in order, and no
// statement is changed by them; also when the DSN asks the driver to
// interpolate parameters on the client (interpolateParams=true).
func TestSourceQueryHostileValues(t *testing.T) {
	t.Parallel()
	base := mysqltest.Database(t)
	db := mysqltest.Open(t, base)
	codes := []string{
		`a' OR '1'='1`,
		`b'; DROP TABLE victims; --`,
		`c"; DELETE FROM items; #`,
		`d\'); DROP TABLE victims; /*`,
		`e $offset $key ? ?`,
		"f`; DROP TABLE items; --",
		"g\x00h",
	}
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	for _, dsn := range []string{base, base + sep + "interpolateParams=true"} {
		mustExec(t, db, "DROP TABLE IF EXISTS victims, items")
		mustExec(t, db, "CREATE TABLE victims (id INT)")
		mustExec(t, db, "INSERT INTO victims VALUES (1)")
		mustExec(t, db, "CREATE TABLE items (code VARCHAR(100) COLLATE utf8mb4_bin PRIMARY KEY, body TEXT)")
		for i := len(codes) - 1; i >= 0; i-- {
			mustExec(t, db, "INSERT INTO items VALUES (?, ?)", codes[i], `'); DROP TABLE victims; -- `+codes[i])
		}
		cfg := map[string]any{"dsn": dsn, "batch_size": int64(1), "poll_interval": "10ms",
			"tracking_column": "code", "initial_offset": "", "delete_after_read": true, "table": "items",
			"custom_query": `SELECT code, body FROM items WHERE code > '$offset' ORDER BY code LIMIT $limit`}
		src := openWith(t, cfg, nil)
		var got []string
		for len(got) < len(codes) {
			b := pollOne(t, src)
			require.Len(t, b.Messages, 1)
			got = append(got, field(t, b, "code")...)
			require.Equal(t, []string{`'); DROP TABLE victims; -- ` + got[len(got)-1]}, field(t, b, "body"))
			require.NoError(t, src.(connector.Acker).Ack(context.Background(), b))
		}
		require.Equal(t, codes, got, dsn)
		require.Equal(t, 1, countRows(t, db, "victims"), "%s: victims untouched", dsn)
		require.Equal(t, 0, countRows(t, db, "items"), "%s: each row deleted by its key after its Ack", dsn)
	}
}

// $now is the current time as a DATETIME and $now_unix its Unix seconds,
// bound as parameters (quoted, as upstream's examples write '$now', too).
func TestSourceQueryNow(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE jobs (id INT PRIMARY KEY, due DATETIME(6), due_unix BIGINT)")
	mustExec(t, db, `INSERT INTO jobs VALUES
		(1, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, UNIX_TIMESTAMP() + 86400),
		(2, UTC_TIMESTAMP(6) + INTERVAL 1 DAY, UNIX_TIMESTAMP() - 3600),
		(3, UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, UNIX_TIMESTAMP() - 60),
		(4, UTC_TIMESTAMP(6) + INTERVAL 1 DAY, UNIX_TIMESTAMP() + 86400)`)
	for _, c := range []struct {
		where string
		want  []string
	}{
		{"due <= '$now'", []string{"1", "3"}},
		{"due <= $now", []string{"1", "3"}},
		{"due_unix <= $now_unix", []string{"2", "3"}},
	} {
		src := openWith(t, map[string]any{"dsn": dsn, "poll_interval": "10ms",
			"custom_query": "SELECT id FROM jobs WHERE " + c.where + " ORDER BY id LIMIT $limit"}, nil)
		require.Equal(t, c.want, field(t, pollOne(t, src), "id"), c.where)
	}
}

// With delete_after_read, a custom query's rows are deleted from the
// named table by primary_key_column, only in Ack; with processed_column
// they are marked in Ack, and the query's own filter skips marked rows
// (the source adds nothing to a custom query).
func TestSourceQueryDeleteAndMarkAfterAck(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE queues (name VARCHAR(10) PRIMARY KEY, paused BOOLEAN)")
	mustExec(t, db, "INSERT INTO queues VALUES ('live', FALSE), ('held', TRUE)")
	mustExec(t, db, "CREATE TABLE jobs (job_id INT PRIMARY KEY, queue VARCHAR(10), done BOOLEAN NOT NULL DEFAULT FALSE)")
	mustExec(t, db, "INSERT INTO jobs (job_id, queue) VALUES (1, 'live'), (2, 'held'), (3, 'live'), (4, 'live')")
	ctx := context.Background()

	del := openWith(t, map[string]any{"dsn": dsn, "tables": []any{"jobs"}, "primary_key_column": "job_id",
		"tracking_column": "job_id", "delete_after_read": true, "poll_interval": "10ms", "batch_size": int64(2), "initial_offset": "0",
		"custom_query": `SELECT j.job_id, j.queue FROM $table j JOIN queues q ON q.name = j.queue
			WHERE NOT q.paused AND j.job_id > $offset ORDER BY j.job_id LIMIT $limit`}, nil)
	b1 := pollOne(t, del)
	require.Equal(t, []string{"1", "3"}, field(t, b1, "job_id"))
	b2 := pollOne(t, del)
	require.Equal(t, []string{"4"}, field(t, b2, "job_id"))
	require.Equal(t, 4, countRows(t, db, "jobs"), "nothing deleted before Ack")
	del.(*Source).Nack(ctx, b1, fmt.Errorf("send failed"))
	require.Equal(t, 4, countRows(t, db, "jobs"), "nothing deleted on Nack")
	require.NoError(t, del.(connector.Acker).Ack(ctx, b1))
	require.Equal(t, 2, countRows(t, db, "jobs WHERE job_id IN (2, 4)"))
	require.Equal(t, 2, countRows(t, db, "jobs"))
	require.NoError(t, del.(connector.Acker).Ack(ctx, b2))
	require.Equal(t, 1, countRows(t, db, "jobs WHERE job_id = 2"), "the held job stays")
	require.Equal(t, 1, countRows(t, db, "jobs"))

	mustExec(t, db, "INSERT INTO jobs (job_id, queue) VALUES (5, 'live'), (6, 'live')")
	mark := map[string]any{"dsn": dsn, "table": "jobs", "primary_key_column": "job_id", "processed_column": "done",
		"poll_interval": "10ms", "custom_query": `SELECT job_id, queue FROM $table WHERE NOT done ORDER BY job_id LIMIT $limit`}
	m := openWith(t, mark, nil)
	b := pollOne(t, m)
	require.Equal(t, []string{"2", "5", "6"}, field(t, b, "job_id"))
	require.Equal(t, 0, countRows(t, db, "jobs WHERE done"), "nothing marked before Ack")
	require.NoError(t, m.(connector.Acker).Ack(ctx, b))
	require.Equal(t, 3, countRows(t, db, "jobs WHERE done"))
	mustExec(t, db, "INSERT INTO jobs (job_id, queue) VALUES (7, 'live')")
	require.Equal(t, []string{"7"}, field(t, pollOne(t, openWith(t, mark, nil)), "job_id"), "marked rows are not read again")
}

func TestSourceQueryBadConfigNamesTheKey(t *testing.T) {
	dsn := "root@tcp(127.0.0.1:1)/d"
	for _, c := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"dsn": dsn, "mode": "cdc", "custom_query": "SELECT 1"}, "plugin_config.custom_query: is a key of mode"},
		{map[string]any{"dsn": dsn, "mode": "cdc", "initial_offset": "1"}, "plugin_config.initial_offset: is a key of mode"},
		{map[string]any{"dsn": dsn, "custom_query": "SELECT * FROM $table"}, "plugin_config.custom_query: uses $table but tables is empty"},
		{map[string]any{"dsn": dsn, "custom_query": "SELECT * FROM t WHERE id > $offset"}, "plugin_config.initial_offset: required when custom_query uses $offset"},
		{map[string]any{"dsn": dsn, "custom_query": "SELECT * FROM t WHERE id > '$offset' AND k > $key", "initial_offset": "0"}, ""},
		{map[string]any{"dsn": dsn, "custom_query": "SELECT * FROM t WHERE k > $key"}, "plugin_config.custom_query: uses $key without $offset"},
		{map[string]any{"dsn": dsn, "custom_query": "SELECT * FROM t", "delete_after_read": true}, "plugin_config.custom_query: with delete_after_read or processed_column needs tables"},
		{map[string]any{"dsn": dsn, "custom_query": "SELECT * FROM t", "processed_column": "done"}, "plugin_config.custom_query: with delete_after_read or processed_column needs tables"},
		{map[string]any{"dsn": dsn, "custom_query": "SELECT * FROM t", "tables": []any{"a", "b"}}, "plugin_config.custom_query: has no $table"},
		{map[string]any{"dsn": dsn, "custom_query": "  "}, "plugin_config.custom_query: is blank"},
		{map[string]any{"dsn": dsn, "custom_query": "SELECT * FROM t"}, ""},
		{map[string]any{"dsn": dsn, "custom_query": "SELECT * FROM $table", "tables": []any{"a", "b"}}, ""},
	} {
		_, err := NewSource(connector.Config{Key: "my", Plugin: connector.PluginConfig{Source: "my.toml", Values: c.values}})
		if c.want == "" {
			require.NoError(t, err, "%v", c.values)
			continue
		}
		require.Error(t, err, "%v", c.values)
		require.Contains(t, err.Error(), c.want)
	}
}

// What a custom query's result lacks, or a query the server refuses, is
// a Poll error naming the key.
func TestSourceQueryBadResultNamesTheKey(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, seq INT)")
	mustExec(t, db, "INSERT INTO t VALUES (1, 1)")
	for _, c := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"custom_query": "SELECT id FROM t WHERE seq > $offset", "tracking_column": "seq", "initial_offset": "0"},
			"custom_query: tracking_column `seq` is not a column of the result"},
		{map[string]any{"custom_query": "SELECT seq FROM t", "table": "t", "primary_key_column": "id", "tracking_column": "seq", "delete_after_read": true},
			"custom_query for t: primary_key_column `id` is not a column of the result"},
		{map[string]any{"custom_query": "SELECT id FROM t", "payload_column": "body"}, "custom_query has no column body (payload_column)"},
		{map[string]any{"custom_query": "SELEC id FROM t"}, "read custom_query: Error 1064"},
	} {
		c.values["dsn"], c.values["poll_interval"] = dsn, "10ms"
		src := openWith(t, c.values, nil)
		_, err := src.Poll(context.Background())
		require.Error(t, err, "%v", c.values)
		require.Contains(t, err.Error(), c.want)
	}
}

// Placeholders are whole words, also in quotes; $table is substituted
// once, so a table name holding a placeholder is not scanned again.
func TestSourceQueryPlaceholders(t *testing.T) {
	set := &sourceSettings{batchSize: 7, customQuery: "SELECT '$offset', \"$key\", $now_unix, $offsets, a$now, '$limit x', $table, `$now`, `a``$now` FROM x WHERE $now_unix2 = $limit"}
	set.uses = placeholders(set.customQuery)
	require.Equal(t, map[string]bool{"$offset": true, "$key": true, "$now_unix": true, "$limit": true, "$table": true}, set.uses)
	now := time.Unix(1700000000, 0)
	q, args := set.customQueryFor("we`$offset", position{Tracking: "5", Key: "k"}, true, now)
	require.Equal(t, "SELECT ?, ?, ?, $offsets, a$now, '? x', `we``$offset`, `$now`, `a``$now` FROM x WHERE $now_unix2 = ?", q)
	require.Equal(t, []any{"5", "k", int64(1700000000), int64(7), int64(7)}, args)
	q, args = set.customQueryFor("t", position{}, false, now)
	require.True(t, strings.HasPrefix(q, "SELECT ?, ?, ?"))
	require.Equal(t, []any{nil, nil, int64(1700000000), int64(7), int64(7)}, args, "no position and no initial_offset: NULL")
}

func TestSourceQueryConformance(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE conf_q (id BIGINT PRIMARY KEY, body TEXT, hidden BOOLEAN NOT NULL DEFAULT FALSE)")
	mustExec(t, db, "INSERT INTO conf_q VALUES (-5, 'filtered out', TRUE)")
	connectortest.Source(t, connectortest.SourceSuite{
		New: sourceWith(map[string]any{"dsn": dsn, "poll_interval": "20ms", "batch_size": int64(5), "initial_offset": "0",
			"custom_query": "SELECT id, body FROM conf_q WHERE NOT hidden AND id > $offset ORDER BY id LIMIT $limit"}),
		Add:       rowAdder(db, "conf_q", `{"id":%[1]d,"body":"row %[1]d"}`),
		StableIDs: true,
	})
}

// Through the embedded broker: a custom query's rows reach the topic and
// are deleted once they are in Iggy.
func TestSourceQueryRuntime(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, body TEXT, kind TEXT)")
	for i := range 25 {
		mustExec(t, db, "INSERT INTO orders (body, kind) VALUES (?, ?)", fmt.Sprintf("order %d", i), []string{"a", "b"}[i%2])
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
custom_query = "SELECT id, body FROM $table WHERE kind = 'a' AND id > $offset ORDER BY id LIMIT $limit"
initial_offset = 0
batch_size = 4
poll_interval = "20ms"
delete_after_read = true
`, dsn)})
	connectortest.Eventually(t, "13 messages", func() bool { return len(run.Messages(t, "shop", "orders")) >= 13 })
	msgs := run.Messages(t, "shop", "orders")
	require.Len(t, msgs, 13)
	for i, m := range msgs {
		require.JSONEq(t, fmt.Sprintf(`{"id":%d,"body":"order %d"}`, 2*i+1, 2*i), string(m.Payload))
	}
	connectortest.Eventually(t, "the rows of kind a deleted after the ack", func() bool { return countRows(t, db, "orders") == 12 })
	require.Equal(t, 12, countRows(t, db, "orders WHERE kind = 'b'"))
}

// BIGINT tracking values beyond 2^53, bound as text, compare exactly
// (MariaDB converts the text to the column's type), in table mode and
// with a custom query; initial_offset starts both after its value.
func TestSourceBigIntTrackingAndInitialOffset(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE big (id BIGINT PRIMARY KEY, body TEXT)")
	mustExec(t, db, "INSERT INTO big VALUES (5, 'skipped'), (9007199254740992, 'a'), (9007199254740993, 'b'), (9223372036854775806, 'c'), (9223372036854775807, 'd')")
	want := []string{"9007199254740992", "9007199254740993", "9223372036854775806", "9223372036854775807"}
	for _, cfg := range []map[string]any{
		{"table": "big"},
		{"custom_query": "SELECT id, body FROM big WHERE id > $offset ORDER BY id LIMIT $limit"},
	} {
		cfg["dsn"], cfg["batch_size"], cfg["poll_interval"], cfg["initial_offset"] = dsn, int64(1), "10ms", "5"
		src := openWith(t, cfg, nil)
		var got []string
		for len(got) < len(want) {
			for _, m := range pollOne(t, src).Messages {
				var rec struct{ ID json.Number }
				require.NoError(t, json.Unmarshal(m.Payload, &rec))
				got = append(got, rec.ID.String())
			}
		}
		require.Equal(t, want, got, "%v", cfg)
	}
}
