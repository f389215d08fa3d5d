package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/mysqltest"
	"github.com/ferryhq/ferry/runtime"
	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { mysqltest.Main(m) }

func newSink(t testing.TB, values map[string]any) connector.Sink {
	t.Helper()
	s, err := NewSink(connector.Config{Key: "my", Plugin: connector.PluginConfig{Source: "my.toml", Values: values}})
	require.NoError(t, err)
	return s
}

func queryStrings(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q, args...)
	if err != nil {
		return nil // not created yet
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s sql.NullString
		require.NoError(t, rows.Scan(&s))
		out = append(out, s.String)
	}
	require.NoError(t, rows.Err())
	return out
}

func countRows(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
		return -1
	}
	return n
}

func TestSinkConformance(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	connectortest.Sink(t, connectortest.SinkSuite{
		New: func(t *testing.T) connector.Sink {
			return newSink(t, map[string]any{"dsn": dsn, "table": "conf_rows", "auto_create_table": true,
				"payload_format": "text"})
		},
		Read: func(t *testing.T) []string {
			return queryStrings(t, db, "SELECT payload FROM conf_rows ORDER BY iggy_offset")
		},
		Idempotent: true,
		Poison:     []byte("not UTF-8: \xff\xfe"),
	})
}

// sinkTOML is a connector file for the mysql sink of stream "app",
// topic "events"; extra goes into the [[streams]] table.
func sinkTOML(dsn, extra, plugin string) string {
	return fmt.Sprintf(`type = "sink"
key = "mysql"
enabled = true
version = 0
name = "MySQL sink"
path = "mysql"

[[streams]]
stream = "app"
topics = ["events"]
schema = "json"
batch_length = 100
poll_interval = "5ms"
consumer_group = "mysql_sink"
%s
[plugin_config]
dsn = %q
table = "events"
auto_create_table = true
payload_format = "json"
retry_delay = "50ms"
%s`, extra, dsn, plugin)
}

func sendJSON(t *testing.T, addr, stream, topic string, payloads ...string) {
	t.Helper()
	admin, err := iggy.Dial(context.Background(), addr, iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var msgs []iggy.Message
	for _, p := range payloads {
		msgs = append(msgs, iggy.Message{Payload: []byte(p)})
	}
	_, err = admin.SendMessages(context.Background(), iggy.NamedID(stream), iggy.NamedID(topic), iggy.ToPartition(0), msgs)
	require.NoError(t, err)
}

// Through the embedded broker: JSON messages land as rows, with the
// mapped columns filled from the payload.
func TestSinkRuntime(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	run := connectortest.Start(t, map[string]string{"mysql.toml": sinkTOML(dsn, "", "columns = { user_id = \"user.id\", kind = \"kind\" }\n")})
	sendJSON(t, run.Runtime.IggyAddress(), "app", "events", `{"user":{"id":7},"kind":"signup"}`, `{"user":{"id":8}}`)
	connectortest.Eventually(t, "two rows", func() bool { return countRows(t, db, "events") == 2 })
	require.Equal(t, []string{"7", "8"}, queryStrings(t, db, "SELECT user_id FROM events ORDER BY iggy_offset"))
	require.Equal(t, []string{"signup", ""}, queryStrings(t, db, "SELECT kind FROM events ORDER BY iggy_offset"))
	var nulls int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM events WHERE kind IS NULL").Scan(&nulls))
	require.Equal(t, 1, nulls, "a missing field is NULL")
	require.Equal(t, []string{"app:events"}, queryStrings(t, db, "SELECT DISTINCT CONCAT(iggy_stream, ':', iggy_topic) FROM events"))
}

// A row the server refuses (a CHECK constraint) is dead-lettered with the
// server's reason; its neighbours are written.
func TestRefusedRowIsDeadLettered(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	_, err := db.Exec("CREATE TABLE events (id CHAR(36) PRIMARY KEY, payload JSON, iggy_stream TEXT, iggy_topic TEXT, " +
		"iggy_partition INT, iggy_offset BIGINT, iggy_timestamp DATETIME(6), n INT NOT NULL CHECK (n >= 0))")
	require.NoError(t, err)
	file := sinkTOML(dsn, "on_error = \"dead_letter\"\ndead_letter_topic = \"dlq\"\nretry_backoff = \"5ms\"\n", "columns = { n = \"n\" }\n")
	run := connectortest.Start(t, map[string]string{"mysql.toml": file})
	sendJSON(t, run.Runtime.IggyAddress(), "app", "events", `{"n":0}`, `{"n":-1}`, `{"n":2}`)
	var dead []iggy.Message
	connectortest.Eventually(t, "a dead letter", func() bool {
		dead = run.Messages(t, "app", "dlq")
		return len(dead) >= 1
	})
	require.Len(t, dead, 1)
	require.Equal(t, `{"n":-1}`, string(dead[0].Payload))
	v, ok := header.Get(dead[0].Headers, runtime.HeaderDLQError)
	require.True(t, ok, "the dead letter carries its reason")
	require.Contains(t, v.String(), "CONSTRAINT", "the server's reason")
	connectortest.Eventually(t, "the neighbours written", func() bool { return countRows(t, db, "events") == 2 })
	require.Equal(t, []string{"0", "2"}, queryStrings(t, db, "SELECT n FROM events ORDER BY n"))
}

// A server that is down for a while: the sink restarts with backoff and
// nothing sent to Iggy meanwhile is lost or written twice.
func TestSinkSurvivesAServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a MariaDB of its own")
	}
	t.Parallel()
	srv := mysqltest.Private(t)
	dsn := mysqltest.DatabaseOn(t, srv.URL)
	db := mysqltest.Open(t, dsn)
	run := connectortest.Start(t, map[string]string{"mysql.toml": sinkTOML(dsn, "retry_backoff = \"5ms\"\n", "")})
	sendJSON(t, run.Runtime.IggyAddress(), "app", "events", `{"n":0}`, `{"n":1}`)
	connectortest.Eventually(t, "two rows", func() bool { return countRows(t, db, "events") == 2 })

	srv.Halt()
	var during []string
	for i := 2; i < 12; i++ {
		during = append(during, fmt.Sprintf(`{"n":%d}`, i))
	}
	sendJSON(t, run.Runtime.IggyAddress(), "app", "events", during...)
	connectortest.Eventually(t, "the sink to notice the outage", func() bool {
		for _, info := range run.Runtime.Connectors(connector.KindSink) {
			if info.LastError != "" {
				return true
			}
		}
		return false
	})
	srv.Resume(t)
	deadline := time.Now().Add(3 * time.Minute) // the runtime's restart backoff reaches a minute
	for countRows(t, db, "events") != 12 {
		if time.Now().After(deadline) {
			t.Fatalf("after the outage %d of 12 rows", countRows(t, db, "events"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Len(t, queryStrings(t, db, "SELECT DISTINCT JSON_VALUE(payload, '$.n') FROM events"), 12, "one row per message")
}

// Hostile names and payloads: a table and columns with backticks, quotes,
// semicolons and SQL keywords are quoted, and payloads that look like SQL
// are stored byte for byte.
func TestHostileIdentifiersAndPayloads(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	table := "t`; DROP TABLE x; -- 'é\""
	col := "c`) VALUES (1); --"
	s := newSink(t, map[string]any{"dsn": dsn, "table": table, "auto_create_table": true, "payload_format": "binary",
		"id_column": "i`d", "payload_column": "select", "columns": map[string]any{col: "a"}})
	ctx := context.Background()
	require.NoError(t, s.Open(ctx))
	defer s.Close(ctx)
	payloads := []string{`{"a":"'); DROP TABLE x; --"}`, "{\"b\":\"`'\\\"\\\\\"}", `{"a":"\u0000 back\\slash"}`, `{"b":"` + strings.Repeat("x", 70000) + `"}`}
	b := &connector.SinkBatch{Stream: "s", Topic: "t"}
	for i, p := range payloads {
		b.Messages = append(b.Messages, connector.Message{ID: [16]byte{byte(i + 1)}, Payload: []byte(p), Offset: uint64(i), Stream: "s", Topic: "t"})
	}
	require.NoError(t, s.Consume(ctx, b))
	q, _ := tableName(table)
	c, _ := ident("select")
	require.Equal(t, payloads, queryStrings(t, db, "SELECT "+c+" FROM "+q+" ORDER BY iggy_offset"))
	cc, _ := ident(col)
	got := queryStrings(t, db, "SELECT "+cc+" FROM "+q+" ORDER BY iggy_offset")
	require.Equal(t, []string{"'); DROP TABLE x; --", "", "\x00 back\\slash", ""}, got)
	var tables int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&tables))
	require.Equal(t, 1, tables)
}

func TestBadConfigNamesTheKey(t *testing.T) {
	for key, values := range map[string]map[string]any{
		"dsn":      {"table": "t"},
		"table":    {"dsn": "root@tcp(127.0.0.1:1)/d", "table": "a\x00b"},
		"database": {"dsn": "root@tcp(127.0.0.1:1)/", "table": "t"},
		"columns":  {"dsn": "root@tcp(127.0.0.1:1)/d", "table": "t", "columns": map[string]any{"": "a"}},
	} {
		_, err := NewSink(connector.Config{Key: "my", Plugin: connector.PluginConfig{Source: "my.toml", Values: values}})
		require.Error(t, err, key)
		require.Contains(t, err.Error(), key)
	}
	_, err := NewSink(connector.Config{Key: "my", Plugin: connector.PluginConfig{Source: "my.toml",
		Values: map[string]any{"dsn": "root:hunter2@tcp(127.0.0.1:1)/d?bad=%zz", "table": "t"}}})
	if err != nil {
		require.NotContains(t, err.Error(), "hunter2")
	}
}

// Raw bytes (NUL, quotes, backslashes, invalid UTF-8) in a binary payload
// column come back byte for byte.
func TestBinaryPayloadsByteForByte(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	s := newSink(t, map[string]any{"dsn": dsn, "table": "raw", "auto_create_table": true, "include_metadata": false})
	ctx := context.Background()
	require.NoError(t, s.Open(ctx))
	defer s.Close(ctx)
	payloads := []string{"\x00\x01`'\"\\\xff\xfe", "'); DROP TABLE raw; --", ""}
	b := &connector.SinkBatch{Stream: "s", Topic: "t"}
	for i, p := range payloads {
		b.Messages = append(b.Messages, connector.Message{ID: [16]byte{15: byte(i + 1)}, Payload: []byte(p)})
	}
	require.NoError(t, s.Consume(ctx, b))
	require.NoError(t, s.Consume(ctx, b), "a replay")
	require.Equal(t, payloads, queryStrings(t, db, "SELECT payload FROM raw ORDER BY id"))
}

// A table dropped under the sink fails the batch as a whole: no message
// is dead-lettered for what is not its fault.
func TestDroppedTableDeadLettersNothing(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	s := newSink(t, map[string]any{"dsn": dsn, "table": "gone", "auto_create_table": true, "max_retries": int64(0)})
	ctx := context.Background()
	require.NoError(t, s.Open(ctx))
	defer s.Close(ctx)
	_, err := db.Exec("DROP TABLE gone")
	require.NoError(t, err)
	err = s.Consume(ctx, &connector.SinkBatch{Stream: "s", Topic: "t", Messages: []connector.Message{{ID: [16]byte{1}, Payload: []byte("x")}}})
	require.Error(t, err)
	var per connector.MessageErrors
	require.False(t, errors.As(err, &per), "no per-message failure: %v", err)
	require.False(t, connector.IsPermanent(err))
	require.Contains(t, err.Error(), "gone")
}

// The connection keys without a DSN: host, port, user, database. A wrong
// password is refused without being quoted.
func TestConnectionKeys(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	cfg, err := mysqldriver.ParseDSN(dsn)
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(cfg.Addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	s := newSink(t, map[string]any{"host": host, "port": int64(p), "username": "root", "database": cfg.DBName,
		"table": "keys", "auto_create_table": true})
	ctx := context.Background()
	require.NoError(t, s.Open(ctx))
	require.NoError(t, s.Close(ctx))
	bad := newSink(t, map[string]any{"host": host, "port": int64(p), "user": "nobody", "password": "hunter2-secret",
		"database": cfg.DBName, "table": "keys", "max_retries": int64(0)})
	err = bad.Open(ctx)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2-secret")
}

// on_duplicate = "update": a message id written again overwrites the
// row; the default keeps the first.
func TestOnDuplicate(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	ctx := context.Background()
	for table, mode := range map[string]string{"kept": "ignore", "updated": "update"} {
		s := newSink(t, map[string]any{"dsn": dsn, "table": table, "auto_create_table": true, "on_duplicate": mode,
			"payload_format": "text"})
		require.NoError(t, s.Open(ctx))
		for _, p := range []string{"first", "second"} {
			require.NoError(t, s.Consume(ctx, &connector.SinkBatch{Stream: "s", Topic: "t",
				Messages: []connector.Message{{ID: [16]byte{9}, Payload: []byte(p), Stream: "s", Topic: "t"}}}))
		}
		require.NoError(t, s.Close(ctx))
	}
	require.Equal(t, []string{"first"}, queryStrings(t, db, "SELECT payload FROM kept"))
	require.Equal(t, []string{"second"}, queryStrings(t, db, "SELECT payload FROM updated"))
}
