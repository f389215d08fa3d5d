package postgres

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

func ids(t *testing.T, b *connector.Batch) []int64 {
	t.Helper()
	var out []int64
	for _, m := range b.Messages {
		out = append(out, decode(t, m).rowID(t))
	}
	return out
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestPollingResumesFromState(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE items (id bigserial PRIMARY KEY, name text)`)
	db.exec(`INSERT INTO items (name) SELECT 'n' || g FROM generate_series(1, 25) g`)
	cfg := map[string]any{"connection_string": db.dsn, "tables": []any{"items"}, "batch_size": int64(10), "poll_interval": "10ms"}
	s := openSource(t, cfg, nil)
	b1 := poll(t, s)
	require.Equal(t, seq(1, 10), ids(t, b1))
	b2 := poll(t, s)
	require.Equal(t, seq(11, 20), ids(t, b2))
	require.JSONEq(t, `{"mode":"polling","offsets":{"items":{"tracking":"20"}},"processed_rows":20}`, string(b2.State))

	// A restart from the state of the second batch continues after it.
	s2 := openSource(t, cfg, b2.State)
	require.Equal(t, seq(21, 25), ids(t, poll(t, s2)))
	db.exec(`INSERT INTO items (name) VALUES ('late')`)
	require.Equal(t, []int64{26}, ids(t, poll(t, s2)))
}

func TestPollingInitialOffsetAndEnvelope(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE "userEvents" (id int PRIMARY KEY, "userName" text, "isActive" bool)`)
	db.exec(`INSERT INTO "userEvents" SELECT g, 'u' || g, g % 2 = 0 FROM generate_series(1, 5) g`)
	s := openSource(t, map[string]any{"connection_string": db.dsn, "tables": []any{"userEvents"},
		"initial_offset": int64(3), "snake_case_columns": true, "include_metadata": false, "poll_interval": "10ms"}, nil)
	b := poll(t, s)
	require.Len(t, b.Messages, 2)
	require.JSONEq(t, `{"id":4,"user_name":"u4","is_active":true}`, string(b.Messages[0].Payload))
	require.Equal(t, connector.SchemaJSON, b.Schema)
}

// Rows sharing a tracking value across a batch boundary are neither
// skipped nor repeated when primary_key_column breaks the tie.
func TestPollingTimestampTrackingWithTies(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE ev (id int PRIMARY KEY, at timestamptz NOT NULL)`)
	db.exec(`INSERT INTO ev SELECT g, '2024-01-01'::timestamptz + (g / 4) * interval '1 second' FROM generate_series(1, 22) g`)
	s := openSource(t, map[string]any{"connection_string": db.dsn, "tables": []any{"ev"}, "batch_size": int64(3),
		"tracking_column": "at", "primary_key_column": "id", "poll_interval": "10ms"}, nil)
	var got []int64
	for len(got) < 22 {
		got = append(got, ids(t, poll(t, s))...)
	}
	require.Equal(t, seq(1, 22), got)
}

func TestPollingCustomQuery(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE jobs (id int PRIMARY KEY, created_at timestamptz, scheduled_at timestamptz)`)
	db.exec(`INSERT INTO jobs SELECT g, '2024-01-01'::timestamptz + g * interval '1 minute',
		CASE WHEN g = 3 THEN now() + interval '1 day' END FROM generate_series(1, 6) g`)
	// upstream's documented example, with quoted placeholders
	q := `SELECT * FROM $table WHERE created_at > '$offset' AND (scheduled_at IS NULL OR scheduled_at <= '$now') ORDER BY created_at LIMIT $limit`
	s := openSource(t, map[string]any{"connection_string": db.dsn, "tables": []any{"jobs"}, "custom_query": q,
		"tracking_column": "created_at", "initial_offset": "2024-01-01 00:01:30+00", "batch_size": int64(2), "poll_interval": "10ms"}, nil)
	var got []int64
	for len(got) < 4 {
		got = append(got, ids(t, poll(t, s))...)
	}
	require.Equal(t, []int64{2, 4, 5, 6}, got, "row 1 is before initial_offset, row 3 is scheduled later")
}

// Rows are deleted only when their batch is acknowledged.
func TestPollingDeleteAfterReadOnlyOnAck(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE q (id int PRIMARY KEY, body text)`)
	db.exec(`INSERT INTO q SELECT g, 'b' FROM generate_series(1, 8) g`)
	s := openSource(t, map[string]any{"connection_string": db.dsn, "tables": []any{"q"}, "delete_after_read": true,
		"batch_size": int64(5), "poll_interval": "10ms"}, nil)
	ctx := context.Background()
	b1 := poll(t, s)
	b2 := poll(t, s)
	require.Equal(t, seq(1, 5), ids(t, b1))
	require.Equal(t, seq(6, 8), ids(t, b2))
	require.Equal(t, 8, db.count(`SELECT count(*) FROM q`), "nothing deleted before Ack")
	s.Nack(ctx, b1, fmt.Errorf("send failed"))
	require.Equal(t, 8, db.count(`SELECT count(*) FROM q`), "nothing deleted on Nack")
	require.NoError(t, s.Ack(ctx, b1))
	require.Equal(t, 3, db.count(`SELECT count(*) FROM q`))
	require.Equal(t, 3, db.count(`SELECT count(*) FROM q WHERE id > 5`))
	require.NoError(t, s.Ack(ctx, b2))
	require.Zero(t, db.count(`SELECT count(*) FROM q`))
}

func TestPollingMarkProcessedOnlyOnAck(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE q (id int PRIMARY KEY, is_processed boolean NOT NULL DEFAULT false)`)
	db.exec(`INSERT INTO q SELECT g FROM generate_series(1, 4) g`)
	cfg := map[string]any{"connection_string": db.dsn, "tables": []any{"q"}, "processed_column": "is_processed", "poll_interval": "10ms"}
	s := openSource(t, cfg, nil)
	b := poll(t, s)
	require.Equal(t, seq(1, 4), ids(t, b))
	require.Zero(t, db.count(`SELECT count(*) FROM q WHERE is_processed`))
	// Without an Ack, a new source (no state) reads them all again.
	require.Equal(t, seq(1, 4), ids(t, poll(t, openSource(t, cfg, nil))))
	require.NoError(t, s.Ack(context.Background(), b))
	require.Equal(t, 4, db.count(`SELECT count(*) FROM q WHERE is_processed`))
	// Processed rows are not read again, even without state.
	db.exec(`INSERT INTO q VALUES (5, false)`)
	require.Equal(t, []int64{5}, ids(t, poll(t, openSource(t, cfg, nil))))
}

// A table and columns named to break naive SQL are quoted, and values
// never reach SQL text.
func TestPollingHostileNames(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	table := `weird"table; DROP TABLE victims; --`
	db.exec(`CREATE TABLE victims (id int)`)
	db.exec(`CREATE TABLE ` + quoteIdent(table) + ` (id int PRIMARY KEY, "co""l" text, done boolean DEFAULT false)`)
	db.exec(`INSERT INTO `+quoteIdent(table)+` VALUES (1, $1), (2, 'x')`, `'); DROP TABLE victims; --`)
	s := openSource(t, map[string]any{"connection_string": db.dsn, "tables": []any{table},
		"processed_column": "done", "poll_interval": "10ms"}, nil)
	b := poll(t, s)
	require.Len(t, b.Messages, 2)
	r := decode(t, b.Messages[0])
	require.Equal(t, table, r.Table)
	require.JSONEq(t, `{"id":1,"co\"l":"'); DROP TABLE victims; --","done":false}`, string(r.Data))
	require.NoError(t, s.Ack(context.Background(), b))
	require.Equal(t, 2, db.count(`SELECT count(*) FROM `+quoteIdent(table)+` WHERE done`))
	require.Zero(t, db.count(`SELECT count(*) FROM victims`), "victims still exists")
}

func TestPollingPayloadColumn(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE m (id int PRIMARY KEY, raw bytea, txt text, doc jsonb)`)
	db.exec(`INSERT INTO m VALUES (1, '\x00ff41', 'héllo', '{"n": 12345678901234567890}')`)
	for i, c := range []struct {
		column, format string
		schema         connector.Schema
		want           []byte
	}{
		{"raw", "bytea", connector.SchemaRaw, []byte{0, 0xff, 'A'}},
		{"txt", "text", connector.SchemaText, []byte("héllo")},
		{"doc", "json_direct", connector.SchemaJSON, []byte(`{"n": 12345678901234567890}`)},
	} {
		s := openSource(t, map[string]any{"connection_string": db.dsn, "tables": []any{"m"},
			"payload_column": c.column, "payload_format": c.format, "poll_interval": "10ms"}, nil)
		b := poll(t, s)
		require.Equal(t, c.schema, b.Schema, "case %d", i)
		require.Equal(t, c.want, b.Messages[0].Payload, "case %d: %s", i, base64.StdEncoding.EncodeToString(b.Messages[0].Payload))
	}
}

func TestPollingStateFromAnotherModeIsAnError(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	src, err := NewSource(connector.Config{Plugin: plugin(map[string]any{"connection_string": db.dsn, "tables": []any{"t"}})})
	require.NoError(t, err)
	defer src.Close(context.Background())
	state, _ := json.Marshal(cdcState{Mode: "cdc", Slot: "s", LSN: "0/1"})
	require.ErrorContains(t, src.Open(context.Background(), state), "not a polling state")
}
