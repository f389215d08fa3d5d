package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/mysqltest"
	"github.com/stretchr/testify/require"
)

// event is a CDC message's payload.
type event struct {
	Table   string          `json:"table_name"`
	Schema  string          `json:"schema"`
	Op      string          `json:"operation_type"`
	TS      time.Time       `json:"timestamp"`
	GTID    string          `json:"gtid"`
	Data    json.RawMessage `json:"data"`
	OldData json.RawMessage `json:"old_data"`
}

func decodeEvent(t testing.TB, m connector.Message) event {
	t.Helper()
	var e event
	require.NoError(t, json.Unmarshal(m.Payload, &e), "%s", m.Payload)
	return e
}

func cdcValues(dsn string, extra map[string]any) map[string]any {
	v := map[string]any{"dsn": dsn, "mode": "cdc", "batch_size": int64(50)}
	for k, x := range extra {
		v[k] = x
	}
	return v
}

func openCDC(t *testing.T, values map[string]any, state []byte) *cdcSource {
	t.Helper()
	src := sourceWith(values)(t)
	require.NoError(t, src.Open(context.Background(), state))
	t.Cleanup(func() { _ = src.Close(context.Background()) })
	return src.(*cdcSource)
}

// pollN polls (acknowledging each batch) until n messages came.
func pollN(t *testing.T, src connector.Source, n int) ([]connector.Message, []byte) {
	t.Helper()
	var out []connector.Message
	var state []byte
	deadline := time.Now().Add(60 * time.Second)
	for len(out) < n {
		require.True(t, time.Now().Before(deadline), "%d of %d messages", len(out), n)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		b, err := src.Poll(ctx)
		cancel()
		if err != nil && ctx.Err() != nil {
			continue
		}
		require.NoError(t, err)
		out = append(out, b.Messages...)
		if b.State != nil {
			state = b.State
		}
		require.NoError(t, src.(connector.Acker).Ack(context.Background(), b))
	}
	return out, state
}

func mustExec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	_, err := db.Exec(q, args...)
	require.NoError(t, err, q)
}

// The snapshot, then inserts, updates (before and after images) and
// deletes, in commit order, with the GTID of their transaction.
func TestCDCSnapshotAndChanges(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE items (id INT PRIMARY KEY, v VARCHAR(20), n BIGINT UNSIGNED, d DECIMAL(10,2), at DATETIME(3), b VARBINARY(4), e ENUM('x','y'), s SET('p','q'))")
	mustExec(t, db, "CREATE TABLE other (id INT PRIMARY KEY)")
	mustExec(t, db, "INSERT INTO items VALUES (1, 'one', 18446744073709551615, -1.50, '2024-01-02 03:04:05.600', x'00ff', 'y', 'p,q'), (2, 'two', 0, 0, NULL, NULL, NULL, '')")
	src := openCDC(t, cdcValues(dsn, map[string]any{"tables": []any{"items"}}), nil)
	snap, _ := pollN(t, src, 2)
	require.Len(t, snap, 2)
	e := decodeEvent(t, snap[0])
	require.Equal(t, "SNAPSHOT", e.Op)
	require.Equal(t, "items", e.Table)
	require.JSONEq(t, `{"id":1,"v":"one","n":18446744073709551615,"d":-1.50,"at":"2024-01-02T03:04:05.6Z","b":"AP8=","e":"y","s":"p,q"}`, string(e.Data))

	mustExec(t, db, "INSERT INTO items VALUES (3, 'three', 42, 3.25, '2024-05-06 07:08:09.000', x'01', 'x', 'q')")
	mustExec(t, db, "INSERT INTO other VALUES (1)")
	mustExec(t, db, "UPDATE items SET v = 'TWO' WHERE id = 2")
	mustExec(t, db, "DELETE FROM items WHERE id = 1")
	got, _ := pollN(t, src, 3)
	require.Len(t, got, 3)
	ins, upd, del := decodeEvent(t, got[0]), decodeEvent(t, got[1]), decodeEvent(t, got[2])
	require.Equal(t, "INSERT", ins.Op)
	require.JSONEq(t, `{"id":3,"v":"three","n":42,"d":3.25,"at":"2024-05-06T07:08:09Z","b":"AQ==","e":"x","s":"q"}`, string(ins.Data))
	require.Equal(t, "null", string(ins.OldData))
	require.Equal(t, "UPDATE", upd.Op)
	require.JSONEq(t, `{"id":2,"v":"two","n":0,"d":0.00,"at":null,"b":null,"e":null,"s":""}`, string(upd.OldData))
	require.JSONEq(t, `{"id":2,"v":"TWO","n":0,"d":0.00,"at":null,"b":null,"e":null,"s":""}`, string(upd.Data))
	require.Equal(t, "DELETE", del.Op)
	require.Equal(t, "null", string(del.Data))
	require.JSONEq(t, `{"id":1,"v":"one","n":18446744073709551615,"d":-1.50,"at":"2024-01-02T03:04:05.6Z","b":"AP8=","e":"y","s":"p,q"}`, string(del.OldData))
	require.NotEmpty(t, ins.GTID)
	require.NotEqual(t, ins.GTID, upd.GTID)
	require.Equal(t, src.set.database, ins.Schema)
}

// ALTER TABLE mid-stream: the changes after it carry the new columns and
// types, those before it the old ones, even when read after it.
func TestCDCFollowsSchemaChanges(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, a INT)")
	src := openCDC(t, cdcValues(dsn, map[string]any{"snapshot": "never"}), nil)
	_, state := pollN(t, src, 0) // the start position
	first, _ := src.Poll(context.Background())
	require.NotNil(t, first)
	require.NoError(t, src.Ack(context.Background(), first))
	state = first.State
	mustExec(t, db, "INSERT INTO t VALUES (1, 10)")
	mustExec(t, db, "ALTER TABLE t ADD COLUMN b VARCHAR(10) AFTER id, MODIFY a VARCHAR(5)")
	mustExec(t, db, "INSERT INTO t VALUES (2, 'bee', 'x')")
	mustExec(t, db, "ALTER TABLE t CHANGE a `renamed a` VARCHAR(5)")
	mustExec(t, db, "UPDATE t SET `renamed a` = 'y' WHERE id = 2")
	want := []string{`{"id":1,"a":10}`, `{"id":2,"b":"bee","a":"x"}`, `{"id":2,"b":"bee","renamed a":"y"}`}
	got, _ := pollN(t, src, 3)
	for i, m := range got {
		require.JSONEq(t, want[i], string(decodeEvent(t, m).Data))
	}
	// A source started after all of it reads the same from the binlog.
	again := openCDC(t, cdcValues(dsn, map[string]any{"snapshot": "never"}), state)
	got, _ = pollN(t, again, 3)
	for i, m := range got {
		require.JSONEq(t, want[i], string(decodeEvent(t, m).Data))
	}
}

func TestCDCConformance(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE conf_items (id BIGINT PRIMARY KEY, body TEXT)")
	connectortest.Source(t, connectortest.SourceSuite{
		New: sourceWith(cdcValues(dsn, map[string]any{"tables": []any{"conf_items"}, "batch_size": int64(5)})),
		Add: rowAdder(db, "conf_items", "row %[1]d"),
		Text: func(m connector.Message) string {
			var e event
			var row struct{ ID int64 }
			if json.Unmarshal(m.Payload, &e) != nil || json.Unmarshal(e.Data, &row) != nil || (e.Op != "SNAPSHOT" && e.Op != "INSERT") {
				return "unexpected event: " + string(m.Payload)
			}
			return fmt.Sprintf("row %d", row.ID)
		},
		StableIDs: true,
	})
}

func decodeInto(raw []byte, v any) error { return json.Unmarshal(raw, v) }
