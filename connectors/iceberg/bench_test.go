package iceberg

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
)

// BenchmarkSink appends batches of 1000 200-byte JSON rows to a table of
// the SQL catalog on PostgreSQL with a file:// warehouse: one Parquet
// file and one snapshot per batch, as the runtime calls Consume.
func BenchmarkSink(b *testing.B) {
	e := newEnv(b)
	createTable(b, e.cat, "bench.events")
	s := openSink(b, cfg("bench", e.values("bench.events")))
	ctx := context.Background()
	batch := &connector.SinkBatch{Stream: "s", Topic: "t", Schema: connector.SchemaJSON}
	for i := range 1000 {
		p := fmt.Sprintf(`{"n":%d,"text":"%s`, i, strings.Repeat("x", 200))
		batch.Messages = append(batch.Messages, connector.Message{Payload: []byte(p[:198] + `"}`)})
	}
	b.SetBytes(200 * 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range batch.Messages {
			batch.Messages[j].Offset = uint64(i*1000 + j) // new offsets: every batch is appended
		}
		if err := s.Consume(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "msgs/s")
}
