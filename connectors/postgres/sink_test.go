package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/postgres/pgjson"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func openSink(t testing.TB, values map[string]any) *Sink {
	t.Helper()
	snk, err := NewSink(connector.Config{Key: "pg", Plugin: plugin(values)})
	require.NoError(t, err)
	s := snk.(*Sink)
	require.NoError(t, s.Open(context.Background()))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// sinkBatch makes n JSON messages with ids and offsets from first.
func sinkBatch(first, n int, payload func(i int) string) *connector.SinkBatch {
	b := &connector.SinkBatch{Stream: "orders", Topic: "created", Partition: 2, Schema: connector.SchemaJSON}
	for i := first; i < first+n; i++ {
		var id [16]byte
		binary.LittleEndian.PutUint64(id[:8], uint64(i))
		b.Messages = append(b.Messages, connector.Message{
			ID: id, Offset: uint64(i), Payload: []byte(payload(i)), Checksum: 0xffffffffffffffff,
			Timestamp: time.UnixMicro(1700000000000000 + int64(i)), OriginTimestamp: time.UnixMicro(1600000000000000),
			Stream: "orders", Topic: "created", Partition: 2,
		})
	}
	return b
}

func jsonPayload(i int) string {
	return fmt.Sprintf(`{"n":%d,"user":{"id":%d,"name":"u%d"}}`, i, i*10, i)
}

func TestSinkWritesUpstreamLayoutIdempotently(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"values", "copy"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			s := openSink(t, map[string]any{"connection_string": db.dsn, "target_table": "iggy_messages",
				"auto_create_table": true, "payload_format": "json", "insert_method": method, "batch_size": int64(7)})
			ctx := context.Background()
			require.NoError(t, s.Consume(ctx, sinkBatch(1, 20, jsonPayload)))
			// A replay of an overlapping range (as after a crash) adds only the new rows.
			require.NoError(t, s.Consume(ctx, sinkBatch(11, 20, jsonPayload)))
			require.Equal(t, 30, db.count(`SELECT count(*) FROM iggy_messages`))
			require.Equal(t, 30, db.count(`SELECT count(DISTINCT id) FROM iggy_messages`))
			var id, stream, topic, name string
			var offset, checksum int64
			var partition int
			var ts, origin time.Time
			require.NoError(t, db.pool.QueryRow(ctx, `SELECT id::text, iggy_offset, iggy_timestamp, iggy_stream, iggy_topic,
				iggy_partition_id, iggy_checksum, iggy_origin_timestamp, payload->'user'->>'name' FROM iggy_messages WHERE iggy_offset = 5`).
				Scan(&id, &offset, &ts, &stream, &topic, &partition, &checksum, &origin, &name))
			require.Equal(t, "5", id, "the u128 id as a decimal")
			require.Equal(t, []any{int64(5), "orders", "created", 2, int64(-1), "u5"}, []any{offset, stream, topic, partition, checksum, name})
			require.Equal(t, int64(1700000000000005), ts.UnixMicro())
			require.Equal(t, int64(1600000000000000), origin.UnixMicro())
		})
	}
}

func TestSinkIDIsTheU128(t *testing.T) {
	t.Parallel()
	u := uuid.MustParse("0190a0b1-c2d3-7e4f-8a5b-6c7d8e9fa0b1")
	var id [16]byte
	for i := range u { // Iggy ids are little-endian u128s
		id[15-i] = u[i]
	}
	// int('0190a0b1c2d37e4f8a5b6c7d8e9fa0b1', 16)
	require.Equal(t, "2080178012631052082186719122629304497", idNumeric(id).Int.String())
	require.Equal(t, "0", idNumeric([16]byte{}).Int.String())
}

// A hostile table name is quoted and payloads are data, never SQL.
func TestSinkHostileTableAndPayload(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE victims (id int)`)
	table := `evil"; DROP TABLE victims; --`
	for _, format := range []string{"text", "json", "bytea"} {
		s := openSink(t, map[string]any{"connection_string": db.dsn, "target_table": table + format,
			"auto_create_table": true, "payload_format": format})
		sqlText := `x'); DROP TABLE victims; --`
		b := sinkBatch(1, 3, func(i int) string { return fmt.Sprintf(`{"q":%q}`, sqlText) })
		require.NoError(t, s.Consume(context.Background(), b))
		var got string
		require.NoError(t, db.pool.QueryRow(context.Background(), `SELECT payload::text FROM `+quoteIdent(table+format)+` LIMIT 1`).Scan(&got))
		if format == "bytea" {
			got = string(mustUnhex(t, got))
		}
		require.Contains(t, got, "DROP TABLE victims", format)
		require.Equal(t, 3, db.count(`SELECT count(*) FROM `+quoteIdent(table+format)))
	}
	require.Zero(t, db.count(`SELECT count(*) FROM victims`), "victims still exists")
}

func mustUnhex(t *testing.T, s string) []byte {
	t.Helper()
	b, ok := pgjson.DecodeBytea([]byte(s))
	require.True(t, ok, s)
	return b
}

func TestSinkFieldMappings(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	s := openSink(t, map[string]any{"connection_string": db.dsn, "target_table": "users", "auto_create_table": true,
		"include_payload": false, "include_checksum": false,
		"field_mappings": map[string]any{"user_id": "user.id", "Name": "user.name", "raw_n": "n", "missing": "nope"},
		"field_types":    map[string]any{"user_id": "bigint", "Name": "text", "missing": "numeric(10, 2)"}})
	require.NoError(t, s.Consume(context.Background(), sinkBatch(1, 4, jsonPayload)))
	var userID int64
	var name string
	var rawN []byte
	var missing *float64
	require.NoError(t, db.pool.QueryRow(context.Background(), `SELECT user_id, "Name", raw_n::text, missing FROM users WHERE iggy_offset = 3`).
		Scan(&userID, &name, &rawN, &missing))
	require.Equal(t, int64(30), userID)
	require.Equal(t, "u3", name)
	require.Equal(t, "3", string(rawN))
	require.Nil(t, missing)
}

// Messages PostgreSQL rejects are reported one by one as permanent
// failures; the rest of the batch is written.
func TestSinkRejectsBadMessagesOnly(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE strict (id numeric PRIMARY KEY, iggy_offset bigint, iggy_timestamp timestamptz, iggy_stream text,
		iggy_topic text, iggy_partition_id int, n int CHECK (n <> 3))`)
	s := openSink(t, map[string]any{"connection_string": db.dsn, "target_table": "strict", "include_payload": false,
		"include_checksum": false, "include_origin_timestamp": false, "field_mappings": map[string]any{"n": "n"}})
	b := sinkBatch(1, 6, jsonPayload)
	b.Messages[1].Payload = []byte(`{"n": "not a number"}`)
	b.Messages[4].Payload = []byte(`not json`)
	err := s.Consume(context.Background(), b)
	var me connector.MessageErrors
	require.ErrorAs(t, err, &me)
	require.Len(t, me, 3, "%v", err)
	for _, i := range []int{1, 2, 4} {
		require.Error(t, me[i], "message %d", i)
		require.True(t, connector.IsPermanent(me[i]), "message %d", i)
	}
	require.Equal(t, 3, db.count(`SELECT count(*) FROM strict`))
}

func TestSinkChecksTheTable(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	snk, err := NewSink(connector.Config{Plugin: plugin(map[string]any{"connection_string": db.dsn, "target_table": "absent"})})
	require.NoError(t, err)
	require.ErrorContains(t, snk.Open(context.Background()), `table "absent" does not exist; create it or set auto_create_table = true`)
	require.NoError(t, snk.Close(context.Background()))
	require.NoError(t, snk.Close(context.Background()), "Close is idempotent")

	db.exec(`CREATE TABLE partial (id numeric PRIMARY KEY, payload bytea)`)
	snk, err = NewSink(connector.Config{Plugin: plugin(map[string]any{"connection_string": db.dsn, "target_table": "partial"})})
	require.NoError(t, err)
	require.ErrorContains(t, snk.Open(context.Background()), "has no column iggy_offset")
	require.NoError(t, snk.Close(context.Background()))

	// Without a unique index on the id, replays could duplicate: a warning.
	db.exec(`CREATE TABLE loose (id numeric, payload bytea)`)
	var logs bytes.Buffer
	snk, err = NewSink(connector.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Plugin: plugin(map[string]any{
		"connection_string": db.dsn, "target_table": "loose", "include_metadata": false, "include_checksum": false,
		"include_origin_timestamp": false})})
	require.NoError(t, err)
	require.NoError(t, snk.Open(context.Background()))
	require.Contains(t, logs.String(), "no unique index on the dedupe columns")
	require.NoError(t, snk.Close(context.Background()))
}

func TestSinkDedupeByOffset(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	s := openSink(t, map[string]any{"connection_string": db.dsn, "target_table": "by_offset", "auto_create_table": true,
		"dedupe_by": "offset", "payload_format": "text"})
	b := sinkBatch(1, 5, jsonPayload)
	for i := range b.Messages {
		b.Messages[i].ID = [16]byte{1} // a producer that reuses one id
	}
	require.NoError(t, s.Consume(context.Background(), b))
	require.NoError(t, s.Consume(context.Background(), b))
	require.Equal(t, 5, db.count(`SELECT count(*) FROM by_offset`))
}
