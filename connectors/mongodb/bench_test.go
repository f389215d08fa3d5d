package mongodb

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/mongotest"
	"github.com/google/uuid"
)

// BenchmarkSink inserts batches of 1000 200-byte JSON messages
// (payload_format = "json", every metadata field), each batch
// acknowledged before the next, as the runtime calls Consume. Each
// iteration writes new ids, so nothing is a duplicate.
func BenchmarkSink(b *testing.B) {
	for _, format := range []string{"json", "binary"} {
		b.Run(format, func(b *testing.B) {
			uri, db := mongotest.URL(b), mongotest.Database(b)
			s := newSink(b, map[string]any{"connection_uri": uri, "database": db, "collection": "bench",
				"payload_format": format, "batch_size": int64(1000)})
			batch := &connector.SinkBatch{Stream: "s", Topic: "t", Schema: connector.SchemaJSON}
			for i := range 1000 {
				p := fmt.Sprintf(`{"n":%d,"text":"%s"}`, i, strings.Repeat("x", 200))
				p = p[:198] + `"}`
				batch.Messages = append(batch.Messages, connector.Message{Payload: []byte(p), Offset: uint64(i)})
			}
			ctx := context.Background()
			b.SetBytes(200 * 1000)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for k := range batch.Messages {
					batch.Messages[k].ID = uuid.New()
				}
				b.StartTimer()
				if err := s.Consume(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
