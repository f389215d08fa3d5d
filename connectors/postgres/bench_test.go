package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// BenchmarkSink measures rows/s into the local PostgreSQL, 1000 messages
// (about 200 bytes of JSON each) per Consume, one operation per message.
func BenchmarkSink(b *testing.B) {
	for _, c := range []struct{ method, format string }{
		{"values", "json"}, {"copy", "json"}, {"values", "bytea"}, {"copy", "bytea"},
	} {
		b.Run(c.method+"/"+c.format, func(b *testing.B) {
			db := newDB(b)
			s := openSink(b, map[string]any{"connection_string": db.dsn, "target_table": "bench", "auto_create_table": true,
				"payload_format": c.format, "insert_method": c.method, "batch_size": int64(1000)})
			const batch = 1000
			payload := func(i int) string {
				return fmt.Sprintf(`{"id":%d,"user":{"name":"user-%d","email":"user%d@example.com"},"amount":%d.25,"tags":["a","b","c"],"note":"lorem ipsum dolor sit amet consectetur"}`, i, i, i, i)
			}
			batches := make([]*connector.SinkBatch, 0, b.N/batch+1)
			for first := 0; first < b.N; first += batch {
				sb := sinkBatch(first, min(batch, b.N-first), payload)
				for i := range sb.Messages {
					binary.LittleEndian.PutUint64(sb.Messages[i].ID[8:], uint64(time.Now().UnixNano()))
				}
				batches = append(batches, sb)
			}
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			for _, sb := range batches {
				if err := s.Consume(ctx, sb); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
			b.StopTimer()
			require.Equal(b, b.N, db.count(`SELECT count(*) FROM bench`))
		})
	}
}

// BenchmarkCDCSource measures changes/s from the slot to acknowledged
// batches (decoding, JSON events, state), one operation per change; the
// changes are inserts of a 5-column row, 100 per transaction.
func BenchmarkCDCSource(b *testing.B) {
	db := newDB(b)
	db.exec(`CREATE TABLE items (id bigint PRIMARY KEY, name text, amount numeric(12,2), at timestamptz, tags jsonb)`)
	cfg := map[string]any{"connection_string": db.dsn, "mode": "cdc", "tables": []any{"items"}, "snapshot": "never",
		"replication_slot": db.name, "batch_size": int64(1000)}
	first := openSource(b, cfg, nil)
	require.NoError(b, first.Close(context.Background()))
	for start := 0; start < b.N; start += 100 {
		db.exec(`INSERT INTO items SELECT g, 'name-' || g, g * 1.25, now(), '{"a": [1, 2, 3]}'
			FROM generate_series($1::bigint, $2::bigint) g`, start, min(start+100, b.N)-1)
	}
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	s := openSource(b, cfg, nil)
	got := 0
	for got < b.N {
		batch, err := s.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		got += len(batch.Messages)
		if err := s.Ack(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "changes/s")
}
