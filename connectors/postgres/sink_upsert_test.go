package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
)

// keyed is a message of key k at offset off with payload v; deleted
// makes it a deletion marker (payload "null", as ferry message send
// --deleted sends).
type keyed struct {
	k       string
	off     uint64
	v       string
	deleted bool
}

func keyedBatch(ms ...keyed) *connector.SinkBatch {
	b := &connector.SinkBatch{Stream: "shop", Topic: "users", Partition: 1, Schema: connector.SchemaJSON}
	for _, m := range ms {
		var id [16]byte
		binary.LittleEndian.PutUint64(id[:8], m.off+1)
		hs := []header.Header{header.New(iggy.KeyHeader, header.StringValue(m.k))}
		payload := m.v
		if m.deleted {
			hs, payload = append(hs, header.New(iggy.DeletedHeader, header.BoolValue(true))), "null"
		}
		b.Messages = append(b.Messages, connector.Message{ID: id, Offset: m.off, Payload: []byte(payload), Headers: hs,
			Timestamp: time.UnixMicro(1700000000000000 + int64(m.off)), Stream: "shop", Topic: "users", Partition: 1})
	}
	return b
}

// rows is the table as key=payload (name column) by key.
func rows(t *testing.T, db *testDB, sql string) map[string]string {
	t.Helper()
	r, err := db.pool.Query(context.Background(), sql)
	require.NoError(t, err)
	defer r.Close()
	out := map[string]string{}
	for r.Next() {
		var k, v string
		require.NoError(t, r.Scan(&k, &v))
		out[k] = v
	}
	require.NoError(t, r.Err())
	return out
}

// Upsert by key: the latest message of a key wins within a batch and
// across batches; a replay of an older batch overwrites nothing; a
// deletion marker deletes the row, and an older replayed marker does not
// delete a newer row.
func TestSinkUpsertByKey(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"values", "copy"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			s := openSink(t, map[string]any{"connection_string": db.dsn, "target_table": "users", "auto_create_table": true,
				"payload_format": "json", "insert_method": method, "upsert_by_key": true, "key_column": "user_key",
				"field_mappings": map[string]any{"name": "name"}, "field_types": map[string]any{"name": "text"}})
			ctx := context.Background()
			state := func() map[string]string {
				return rows(t, db, `SELECT user_key, name || '@' || iggy_offset FROM users`)
			}
			old := keyedBatch(keyed{"a", 1, `{"name":"a1"}`, false}, keyed{"b", 2, `{"name":"b2"}`, false},
				keyed{"a", 3, `{"name":"a3"}`, false}, keyed{"c", 4, `{"name":"c4"}`, false})
			require.NoError(t, s.Consume(ctx, old))
			require.Equal(t, map[string]string{"a": "a3@3", "b": "b2@2", "c": "c4@4"}, state(), "the latest of the batch per key")

			require.NoError(t, s.Consume(ctx, keyedBatch(keyed{"a", 5, `{"name":"a5"}`, false}, keyed{"b", 6, "", true},
				keyed{"c", 7, `{"name":"c7"}`, false})))
			want := map[string]string{"a": "a5@5", "c": "c7@7"}
			require.Equal(t, want, state(), "a and c updated, b deleted")

			// A replay of the first batch (a crash before the commit of
			// its offset) overwrites no newer value. It puts b back until
			// the replay reaches b's marker again (docs/keys.md).
			require.NoError(t, s.Consume(ctx, old))
			require.Equal(t, "a5@5", state()["a"])
			require.Equal(t, "c7@7", state()["c"])
			require.NoError(t, s.Consume(ctx, keyedBatch(keyed{"b", 6, "", true})))
			require.Equal(t, want, state())

			// A marker older than the row deletes nothing; a newer one does.
			require.NoError(t, s.Consume(ctx, keyedBatch(keyed{"c", 6, "", true})))
			require.Equal(t, want, state())
			require.NoError(t, s.Consume(ctx, keyedBatch(keyed{"c", 8, "", true}, keyed{"d", 9, `{"name":"d9"}`, false})))
			require.Equal(t, map[string]string{"a": "a5@5", "d": "d9@9"}, state())
			require.Equal(t, 2, db.count(`SELECT count(*) FROM users`))
		})
	}
}

// Messages the upsert cannot write fail one by one; the others are
// written.
func TestSinkUpsertByKeyFailures(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	s := openSink(t, map[string]any{"connection_string": db.dsn, "target_table": "kv", "auto_create_table": true,
		"payload_format": "json", "upsert_by_key": true, "insert_method": "values"})
	b := keyedBatch(keyed{"ok", 1, `{"v":1}`, false}, keyed{"bad", 2, `not json`, false}, keyed{"nul\x00", 3, `{}`, false})
	b.Messages = append(b.Messages, connector.Message{Offset: 4, Payload: []byte(`{}`)}) // no key
	bin := keyedBatch(keyed{"x", 5, `{}`, false}).Messages[0]
	bin.Headers = []header.Header{header.New(iggy.KeyHeader, header.RawValue([]byte{1, 2}))}
	b.Messages = append(b.Messages, bin)
	err := s.Consume(context.Background(), b)
	var me connector.MessageErrors
	require.ErrorAs(t, err, &me)
	require.Len(t, me, 4, "%v", err)
	require.ErrorContains(t, me[1], "not valid JSON")
	require.ErrorContains(t, me[2], "NUL")
	require.ErrorContains(t, me[3], `no "key" header`)
	require.ErrorContains(t, me[4], "not a string")
	for i, e := range me {
		require.True(t, connector.IsPermanent(e), "message %d", i)
	}
	require.Equal(t, map[string]string{"ok": `{"v": 1}`}, rows(t, db, `SELECT key, payload::text FROM kv`))
}

func TestSinkUpsertByKeyConfig(t *testing.T) {
	t.Parallel()
	base := func(kv ...any) map[string]any {
		m := map[string]any{"connection_string": "postgres://x@127.0.0.1:1/db", "target_table": "t"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{base("key_column", "k"), "key_column: is only used with upsert_by_key = true"},
		{base("upsert_by_key", true, "include_metadata", false), "needs include_metadata = true"},
		{base("upsert_by_key", true, "dedupe_by", "offset"), "choose one"},
		{base("upsert_by_key", true, "key_column", "payload"), "is a column the sink writes already"},
		{base("upsert_by_key", true, "key_column", "n", "field_mappings", map[string]any{"n": "n"}), "also a column of field_mappings"},
	} {
		_, err := NewSink(connector.Config{Key: "pg", Plugin: plugin(tc.values)})
		require.ErrorContains(t, err, tc.want, "%v", tc.values)
	}

	// A table without a unique index on the key column cannot take
	// ON CONFLICT: Open says so.
	db := newDB(t)
	db.exec(`CREATE TABLE plain (id numeric, iggy_offset bigint, iggy_timestamp timestamptz, iggy_stream text, iggy_topic text,
		iggy_partition_id integer, iggy_checksum bigint, iggy_origin_timestamp timestamptz, payload bytea, key text)`)
	snk, err := NewSink(connector.Config{Key: "pg", Plugin: plugin(map[string]any{"connection_string": db.dsn, "target_table": "plain", "upsert_by_key": true})})
	require.NoError(t, err)
	err = snk.Open(context.Background())
	require.ErrorContains(t, err, `no unique index on "key"`)
}

// BenchmarkSinkUpsertByKey upserts batches of 1,000 messages over 10,000
// keys.
func BenchmarkSinkUpsertByKey(b *testing.B) {
	db := newDB(b)
	s := openSink(b, map[string]any{"connection_string": db.dsn, "target_table": "bench_kv", "auto_create_table": true,
		"payload_format": "json", "upsert_by_key": true})
	ctx := context.Background()
	cpu := cpuTime()
	off := uint64(0)
	b.ResetTimer()
	for b.Loop() {
		ms := make([]keyed, 1000)
		for i := range ms {
			off++
			ms[i] = keyed{fmt.Sprintf("k%d", off*7919%10000), off, fmt.Sprintf(`{"n":%d}`, off), false}
		}
		if err := s.Consume(ctx, keyedBatch(ms...)); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N) * 1000
	b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/n, "cpu-µs/msg")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
