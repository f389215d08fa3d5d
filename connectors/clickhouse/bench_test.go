package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/chtest"
	"github.com/google/uuid"
)

// BenchmarkSink inserts batches of 1000 200-byte JSON rows into a
// MergeTree table, one INSERT per batch, as the runtime calls Consume,
// in each insert format that takes JSON.
func BenchmarkSink(b *testing.B) {
	for _, format := range []string{"json_each_row", "row_binary"} {
		b.Run(format, func(b *testing.B) { benchmarkSink(b, format) })
	}
}

func benchmarkSink(b *testing.B, format string) {
	db := chtest.Database(b)
	if _, err := chtest.Query(chtest.URL(b), "CREATE TABLE "+db+".events (n UInt32, text String) ENGINE = MergeTree ORDER BY n"); err != nil {
		b.Fatal(err)
	}
	s, err := New(cfg(map[string]any{"url": chtest.URL(b), "database": db, "table": "events", "insert_format": format}))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Open(ctx); err != nil {
		b.Fatal(err)
	}
	batch := &connector.SinkBatch{Schema: connector.SchemaJSON}
	for i := range 1000 {
		p := fmt.Sprintf(`{"n":%d,"text":"%s`, i, strings.Repeat("x", 200))
		batch.Messages = append(batch.Messages, connector.Message{ID: uuid.New(), Payload: []byte(p[:198] + `"}`)})
	}
	b.SetBytes(200 * 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Consume(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "msgs/s")
}
